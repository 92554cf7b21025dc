// Choosing a store by one string: "sqlite:PATH" or a PostgreSQL URL.
#include <string>

#include "store/state_store.h"

namespace gpufleet::store {
namespace {

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

Result<StoreLocation> ParseStoreLocation(const std::string& text) {
  constexpr const char* kAccepted =
      "expected sqlite:PATH (e.g. sqlite:/var/lib/gpufleet/state.db) or a PostgreSQL URL "
      "(e.g. postgresql://gpufleet@db.example:5432/gpufleet)";
  if (StartsWith(text, "sqlite:")) {
    std::string path = text.substr(7);
    if (StartsWith(path, "//")) path = path.substr(2);  // sqlite:///abs/path, as in other tools' URLs
    if (path.empty()) return Status::InvalidArgument(std::string("no path after 'sqlite:'; ") + kAccepted);
    return StoreLocation{StoreLocation::Engine::kSqlite, path};
  }
  if (StartsWith(text, "postgresql://") || StartsWith(text, "postgres://")) {
    return StoreLocation{StoreLocation::Engine::kPostgres, text};
  }
  return Status::InvalidArgument(kAccepted);
}

std::string Redacted(const StoreLocation& where) {
  if (where.engine == StoreLocation::Engine::kSqlite) return "sqlite:" + where.target;
  // scheme://[user[:password]@]host...: the userinfo ends at the last '@' before the path.
  const std::string& url = where.target;
  const size_t start = url.find("://") + 3;
  const size_t path = url.find_first_of("/?", start);
  const size_t at = url.rfind('@', path == std::string::npos ? std::string::npos : path);
  std::string out = url;
  if (at != std::string::npos && at >= start) {
    const size_t colon = url.find(':', start);
    if (colon != std::string::npos && colon < at) out = url.substr(0, colon + 1) + "***" + url.substr(at);
  }
  // A password given as a query parameter (?password=...).
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    if (p == 0 || (out[p - 1] != '?' && out[p - 1] != '&')) continue;
    const size_t end = out.find('&', p);
    out = out.substr(0, p + 9) + "***" + (end == std::string::npos ? "" : out.substr(end));
  }
  return out;
}

Result<std::unique_ptr<StateStore>> OpenStore(const StoreLocation& where) {
  switch (where.engine) {
    case StoreLocation::Engine::kSqlite:
      return OpenSqliteStore(where.target);
    case StoreLocation::Engine::kPostgres:
      return OpenPostgresStore(where.target);
  }
  return Status::InvalidArgument("unknown store engine");
}

}  // namespace gpufleet::store
