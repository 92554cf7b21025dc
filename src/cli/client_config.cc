#include "cli/client_config.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/nesting.h"
#include "common/read_file.h"
#include "common/source_location.h"

namespace gpufleet::cli {

std::string ClientConfigPath() {
  if (const char* p = std::getenv("GPUFLEET_CONFIG"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/gpufleet/config.yaml";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.config/gpufleet/config.yaml";
}

std::string LeaderMemoryDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/gpufleet";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/gpufleet";
  return "";
}

Result<ClientConfig> LoadClientConfig(const std::string& server_flag, const std::string& token_flag, bool needs_token) {
  ClientConfig c;
  std::string path = ClientConfigPath();
  if (std::filesystem::exists(path)) {
    auto read = ReadFileText(path);
    if (!read.ok()) return Status::InvalidArgument(read.status().message());
    std::stringstream text;
    text << *read;
    // yaml-cpp parses recursively: bound the depth before it does.
    Status depth = CheckNestingDepth(text.str(), NestingSyntax::kYaml);
    if (!depth.ok()) return InSource(path, depth);
    YAML::Node doc;
    try {
      doc = YAML::Load(text.str());
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(SourcePrefixAt(path, e.mark) + "invalid YAML: " + e.msg);
    }
    const YAML::Node& n = doc;
    if (!n.IsMap()) {  // an empty file too: its node has no position, so point at the start
      return Status::InvalidArgument((n.Mark().is_null() ? SourcePrefix(path, 1, 1) : SourcePrefixAt(path, n.Mark())) +
                                     "expected 'server:' and 'token:' lines");
    }
    for (auto [key, out] : {std::pair{"server", &c.server}, {"token", &c.token}, {"ca_cert", &c.ca_cert}}) {
      const YAML::Node v = n[key];
      if (!v) continue;
      if (out == &c.server && v.IsSequence()) {  // several controllers, as a list
        std::string joined;
        for (const auto& item : v) {
          if (!item.IsScalar()) {
            return Status::InvalidArgument(SourcePrefixAt(path, item.Mark()) + "server: each entry must be a URL");
          }
          joined += (joined.empty() ? "" : ",") + item.Scalar();
        }
        *out = joined;
        c.server_source = path;
        continue;
      }
      if (!v.IsScalar()) {
        return Status::InvalidArgument(SourcePrefixAt(path, v.Mark()) + key + ": must be a single value, got " +
                                       (v.IsSequence() ? "a list" : v.IsMap() ? "a mapping" : "nothing"));
      }
      *out = v.Scalar();
      if (out == &c.server) c.server_source = path;
    }
    c.source = path;
  } else if (const char* named = std::getenv("GPUFLEET_CONFIG"), *server_env = std::getenv("GPUFLEET_SERVER");
             named && *named && server_flag.empty() && !(server_env && *server_env)) {
    // A file named on purpose and not there: falling back to the default address could reach
    // another cluster than the one meant.
    return Status::InvalidArgument("GPUFLEET_CONFIG names " + path +
                                   ", which does not exist (gpufleet dev --config writes one; or give --server and "
                                   "--token, or unset GPUFLEET_CONFIG)");
  }
  if (const char* s = std::getenv("GPUFLEET_SERVER"); s && *s) {
    c.server = s;
    c.server_source = "GPUFLEET_SERVER";
  }
  if (const char* t = std::getenv("GPUFLEET_TOKEN"); t && *t) {
    c.token = t;
  } else if (t && token_flag.empty() && needs_token) {
    // Set but empty (a script's unset variable): the config file's token, often an admin's,
    // must not stand in for the one meant.
    return Status::InvalidArgument("GPUFLEET_TOKEN is set but empty; set it to a token, or " +
                                   (c.source.empty() ? std::string("give --token")
                                                     : "unset it to use the config file's (" + path + ")"));
  }
  if (const char* a = std::getenv("GPUFLEET_CA_CERT"); a && *a) c.ca_cert = a;
  if (!server_flag.empty()) {
    c.server = server_flag;
    c.server_source = "--server";
  }
  if (!token_flag.empty()) c.token = token_flag;
  if (c.source.empty()) c.source = "flags/environment (no " + path + ")";
  c.leader_memory_dir = LeaderMemoryDir();
  return c;
}

Status WriteClientConfig(const std::string& path, const std::string& server, const std::string& token,
                         const std::string& ca_cert) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return Status::Unavailable("cannot write " + tmp);
    f << "# Written by gpufleet; the CLI reads the controller's address and your token here.\n";
    f << "server: " << server << "\n";
    f << "token: " << token << "\n";
    if (!ca_cert.empty()) f << "ca_cert: " << ca_cert << "\n";
    if (!f) return Status::Unavailable("cannot write " + tmp);
  }
  ::chmod(tmp.c_str(), 0600);
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Unavailable("cannot replace " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace gpufleet::cli
