// Where the CLI finds the controller and its token, in order: --server/--token flags, the
// GPUFLEET_SERVER/GPUFLEET_TOKEN environment, then the config file ($GPUFLEET_CONFIG, else
// $XDG_CONFIG_HOME/gpufleet/config.yaml, else ~/.config/gpufleet/config.yaml):
//
//   server: http://127.0.0.1:8470
//   token: gf_user_0123...
//
// With several controllers on one store (docs/operations.md), `server` lists them all, comma-
// separated in the flag and the environment ("http://c1:8470,http://c2:8470"), or as that string
// or a YAML list in the file; the client follows the leader among them (client.h) and remembers
// the one that answered for the next command, in $XDG_CACHE_HOME/gpufleet (else ~/.cache/gpufleet).
#pragma once

#include <string>

#include "common/status.h"

namespace gpufleet::cli {

struct ClientConfig {
  std::string server = "http://127.0.0.1:8470";  // one URL, or several separated by commas
  std::string token;
  // With an https:// server: the CA certificate (PEM) to trust for it, and no other; empty: the
  // system's trusted CAs. `ca_cert:` in the file, or GPUFLEET_CA_CERT.
  std::string ca_cert;
  std::string source;  // where the values came from, for error messages
  std::string server_source = "the default";  // where `server` came from: the file, GPUFLEET_SERVER or --server
  // Where the client remembers which of several controllers answered last, one small file per
  // list of URLs; empty: it does not remember between commands.
  std::string leader_memory_dir;
};

// $XDG_CACHE_HOME/gpufleet, else $HOME/.cache/gpufleet; empty without either.
std::string LeaderMemoryDir();

std::string ClientConfigPath();
// Reads the file (if any) and the environment; `server`/`token` flags override when non-empty.
// `needs_token`: false for a command that sends none (an empty GPUFLEET_TOKEN is then no error).
Result<ClientConfig> LoadClientConfig(const std::string& server_flag, const std::string& token_flag,
                                      bool needs_token = true);
// Writes the file (mode 0600, parent directories made), replacing it atomically.
Status WriteClientConfig(const std::string& path, const std::string& server, const std::string& token,
                         const std::string& ca_cert = "");

}  // namespace gpufleet::cli
