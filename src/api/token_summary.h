// TokenSummary: what GET /v1/tokens and a revocation show of an API token — its short id, kind,
// subject, role, team and times — never the secret nor the whole hash. The controller builds it
// from the record (SummaryOf), the codec encodes it (ToJson) and the CLI decodes it
// (TokenSummaryFromJson).
//
// Thread-safety: a plain value.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/records.h"
#include "common/status.h"
#include "common/time.h"

namespace gpufleet::api {

struct TokenSummary {
  std::string id;  // TokenRecord::Id(): the first 12 hex digits of the hash
  TokenKind kind = TokenKind::kUser;
  std::string subject;
  std::string role;
  std::string team;
  Time created;
  bool revoked = false;
  std::optional<Time> expires;    // none: never
  std::optional<Time> last_used;  // none: never
  std::string made_by;            // the id of the token that made it; empty: made at a start
};

TokenSummary SummaryOf(const TokenRecord& record);

// The wire shape (docs/api.md): "kind" by name, times in ms, "expires_ms" and "last_used_ms" only
// when set. Decoding is strict as in codec.h.
nlohmann::json ToJson(const TokenSummary& token);
Result<TokenSummary> TokenSummaryFromJson(const nlohmann::json& j);

}  // namespace gpufleet::api
