// Tokens: every API request carries `Authorization: Bearer <token>`. Only the SHA-256 of a token
// is stored; the secret is shown once, when it is made.
//
//   gf_user_<32 hex>   people and scripts (role admin or user)
//   gf_join_<32 hex>   lets an agent register a node
//   gf_agent_<32 hex>  given to an agent at registration; names its node
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "api/records.h"
#include "common/mutex.h"
#include "common/status.h"
#include "store/state_store.h"

namespace gpufleet::controller {

// Lowercase hex SHA-256 (OpenSSL).
std::string Sha256Hex(std::string_view data);
// A new secret "gf_<kind>_<32 random hex digits>" from the OS's random source.
std::string NewToken(api::TokenKind kind);

// Looks tokens up by hash, through a small cache in front of the store. The lookup is by the
// SHA-256 of the presented secret, so its timing says nothing about any stored secret.
class Authenticator {
 public:
  explicit Authenticator(store::StateStore& store) : store_(store) {}
  // The token's record, or NotFound for an unknown, revoked or expired token (the caller answers
  // 401). Records when the token was last used, at most once a minute per token.
  Result<api::TokenRecord> Check(std::string_view token, Time now);
  // Stores a new token and returns its secret. `expires`: none for a token that never expires.
  // `audit`, when given, is written with the token, its object naming the token's id ("token
  // 1a2b3c4d5e6f", the id token listings and revocations show).
  Result<std::string> Create(api::TokenKind kind, std::string subject, std::string role, std::string team, Time now,
                             std::optional<Time> expires = std::nullopt,
                             std::optional<api::AuditRecord> audit = std::nullopt, std::string made_by = "");
  // Revokes the token with this hash: it is refused from now on, here and after a restart.
  Status Revoke(const std::string& hash);

 private:
  store::StateStore& store_;
  Mutex mu_;  // not held across a store call
  std::unordered_map<std::string, api::TokenRecord> cache_ GF_GUARDED_BY(mu_);
};

}  // namespace gpufleet::controller
