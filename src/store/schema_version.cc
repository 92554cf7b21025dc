#include "store/schema_version.h"

#include <cstdlib>

namespace gpufleet::store {

Result<int> ParseSchemaVersion(const std::optional<std::string>& stored, const std::string& where) {
  if (!stored) return 0;
  char* end = nullptr;
  const long parsed = std::strtol(stored->c_str(), &end, 10);
  if (stored->empty() || *end != '\0' || parsed < 0 || parsed > 1'000'000) {
    return Status::Internal(where + ": schema_version '" + *stored + "' is not a number");
  }
  return static_cast<int>(parsed);
}

Status CheckSchemaVersion(int version, int known, const std::string& where) {
  if (version <= known) return Status::Ok();
  return Status::FailedPrecondition(where + ": database schema version " + std::to_string(version) +
                                    " is newer than this gpufleet knows (" + std::to_string(known) +
                                    "); upgrade gpufleet to open it");
}

}  // namespace gpufleet::store
