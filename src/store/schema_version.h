// The schema version both stores keep in their meta table (key schema_version), read the same
// way: migrations are numbered alike for SQLite and PostgreSQL (docs/operations.md).
//
// Thread-safety: free functions.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace gpufleet::store {

// The schema version this gpufleet writes (both stores migrate to it; one migration per version).
inline constexpr int kCurrentSchemaVersion = 8;

// The stored value as a version: none (a new database) is 0. `where` names the database in
// errors ("/var/lib/gpufleet/state.db: schema_version 'x' is not a number").
Result<int> ParseSchemaVersion(const std::optional<std::string>& stored, const std::string& where);

// FailedPrecondition, saying to upgrade gpufleet, when `version` is newer than `known`.
Status CheckSchemaVersion(int version, int known, const std::string& where);

}  // namespace gpufleet::store
