// Tokens: every API request carries `Authorization: Bearer <token>`. Only the SHA-256 of a token
// is stored; the secret is shown once, when it is made.
//
//   gf_user_<32 hex>   people and scripts (role admin or user)
//   gf_join_<32 hex>   lets an agent register a node
//   gf_agent_<32 hex>  given to an agent at registration; names its node
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "api/records.h"
#include "common/status.h"
#include "store/state_store.h"

namespace gpufleet::controller {

// Lowercase hex SHA-256 (OpenSSL).
std::string Sha256Hex(std::string_view data);
// A new secret "gf_<kind>_<32 random hex digits>" from the OS's random source.
std::string NewToken(api::TokenKind kind);

// Looks tokens up by hash, through a small cache in front of the store.
class Authenticator {
 public:
  explicit Authenticator(store::StateStore& store) : store_(store) {}
  // The token's record, or Unauthenticated-style errors: NotFound for an unknown or revoked
  // token (the caller answers 401).
  Result<api::TokenRecord> Check(std::string_view token);
  // Stores a new token and returns its secret.
  Result<std::string> Create(api::TokenKind kind, std::string subject, std::string role, std::string team, Time now);

 private:
  store::StateStore& store_;
  std::mutex mu_;
  std::unordered_map<std::string, api::TokenRecord> cache_;
};

}  // namespace gpufleet::controller
