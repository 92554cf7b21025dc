// The plumbing the client commands share (client_commands.cc, job_commands.cc,
// node_commands.cc, admin_commands.cc): connection flags, the API client, error reporting with
// the exit codes of cli/exit_codes.h, tables, times and log streaming. Private to src/cli/.
//
// Thread-safety: the functions print to stdout/stderr; call them from one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "api/codec.h"
#include "api/job_request.h"
#include "api/job_summary.h"
#include "api/node_summary.h"
#include "api/records.h"
#include "cli/client.h"
#include "common/strings.h"

namespace gpufleet::cli::client {

using nlohmann::json;

inline constexpr int kTableWidth = 100;
inline constexpr int kSubmitRetries = 3;
// The server's long-poll wakes on new log data but not on a job's end, so a silent job that
// ends is noticed at the next poll: keep the wait short.
inline constexpr int kLogsWaitMs = 1000;

inline constexpr const char* kExitCodes =
    "\nThe server and token come from --server/--token, else GPUFLEET_SERVER/GPUFLEET_TOKEN, else\n"
    "~/.config/gpufleet/config.yaml (or $GPUFLEET_CONFIG), which 'gpufleet dev' writes.\n\n"
    "Exit codes: 0 ok; 1 the operation failed (job failed, not found); 2 usage error or bad input;\n"
    "3 cannot reach the controller or the token was refused.";

struct Connection {
  std::string server;
  std::string token;
};

void AddConnectionFlags(CLI::App* sub, Connection& c);
// A CLI11 check for --token: an empty one is refused (it would fall back to another token).
std::string NonEmptyToken(const std::string& value);
void AddOutputFlag(CLI::App* sub, std::string& output);
// "Examples:" and the examples, then where the server and token come from and the exit codes.
void SetFooter(CLI::App* sub, const std::string& examples);

// Prints "gpufleet CMD: MESSAGE" on stderr and returns `code`.
int Fail(const std::string& cmd, int code, const std::string& message);
// Fail with an API result's message and exit code.
int Report(const std::string& cmd, const ApiResult& r);
// A client for the configured controller, or nullptr after printing why not (exit code 2).
std::unique_ptr<ApiClient> Connect(const std::string& cmd, const Connection& c, bool needs_token = true);

// "42" or "job-42".
std::optional<int64_t> ParseJobId(const std::string& s);
void PrintJson(const json& j);
int64_t NowMs();
std::string Span(int64_t ms);       // "3m", "0s" under a second
std::string Ago(int64_t at_ms);     // "3m ago"; "-" for no time
std::string Iso(int64_t at_ms);
std::string Usd(int64_t micros);    // "$1.25"
std::string UsdExact(int64_t micros);  // a limit as set: whole cents as Usd, "$0.005" keeps its digits
int64_t IntField(const json& j, const char* key, int64_t fallback = 0);
std::string StrField(const json& j, const char* key);
bool IsTerminalState(const std::string& s);
// "2x4 H100", "1 A100|H100", "0.5 any", "cpu".
std::string GpuText(const api::JobSummary& j);
// A list in the controller's answer (`body[key]`), each element decoded with the codec's
// `decode`; an answer of the wrong shape is InvalidArgument naming the field ("jobs[3].state:
// ..."). A missing list is an error unless `optional`.
template <typename T>
Result<std::vector<T>> DecodeList(const json& body, const char* key, Result<T> (*decode)(const json&),
                                  bool optional = false) {
  std::vector<T> out;
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) {
    if (optional) return out;
    return Status::InvalidArgument(std::string(key) + ": expected a list, got nothing");
  }
  if (!it->is_array()) return Status::InvalidArgument(std::string(key) + ": expected a list");
  for (size_t i = 0; i < it->size(); ++i) {
    auto v = decode((*it)[i]);
    if (!v.ok()) return Status::InvalidArgument(std::string(key) + "[" + std::to_string(i) + "]: " + v.status().message());
    out.push_back(std::move(*v));
  }
  return out;
}
// The controller's job listings, a job's transitions, its nodes and audit records.
Result<std::vector<api::JobSummary>> DecodeJobList(const json& body);
Result<std::vector<api::Transition>> DecodeHistory(const json& job);
// How long a job's runs held their GPUs, from each move to running until it left running and
// stopping (a stop's grace counts: the processes run, the GPUs are held and billed), the current
// run until `now_ms`.
int64_t RuntimeMs(const std::vector<api::Transition>& history, int64_t now_ms);
Result<std::vector<api::NodeSummary>> DecodeNodeList(const json& body);
Result<std::vector<api::AuditRecord>> DecodeAuditList(const json& body);

// Text from the controller (job reasons, commands, audit notes: some of it written by other
// users) goes to a terminal through Printable (common/strings.h).
using gpufleet::Printable;

// `text` with every API token in it (gf_KIND_HEX..., as the controller makes them) cut to its
// prefix: "gf_user_…". For messages that echo what was typed, which may hold a secret.
std::string RedactSecrets(std::string_view text);

// Fixed-width columns sized to their content; the last column is cut to keep rows within `width`.
// Cells go through Printable.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : rows_{std::move(headers)} {}
  void Add(std::vector<std::string> row) {
    for (std::string& cell : row) cell = Printable(cell);
    rows_.push_back(std::move(row));
  }

  void Print(size_t width = kTableWidth) const {
    size_t cols = rows_[0].size();
    std::vector<size_t> w(cols, 0);
    for (const auto& r : rows_) {
      for (size_t c = 0; c + 1 < cols && c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
    }
    size_t start = 0;
    for (size_t c = 0; c + 1 < cols; ++c) start += w[c] + 2;
    size_t last = width > start + 12 ? width - start : 12;
    for (const auto& r : rows_) {
      std::string line;
      for (size_t c = 0; c < cols; ++c) {
        std::string cell = c < r.size() ? r[c] : "";
        if (c + 1 < cols) {
          cell.resize(w[c] + 2, ' ');
        } else if (cell.size() > last) {
          cell = cell.substr(0, last - 3) + "...";
        }
        line += cell;
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      std::printf("%s\n", line.c_str());
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

// A fresh idempotency key for a submit ("cli-" and 24 hex digits).
std::string RandomRequestId();

// Submits a POST /v1/jobs body (retrying transient failures: the request id makes it safe) and
// prints what was created. Returns the exit code; `ids` gets the job ids.
struct SubmitOutcome {
  int exit_code = kExitOk;
  std::vector<int64_t> ids;
};
SubmitOutcome PostJobs(ApiClient& client, const std::string& cmd, const json& body, const std::string& output);
// After a submit: says which of the jobs run split into a gang (more GPUs than any node has) and
// which the cluster as it is can never run, and why.
void WarnIfNeverRunnable(ApiClient& client, const std::vector<int64_t>& ids,
                         const std::vector<api::JobRequest>& jobs);

// Prints log data to `out`; for several parts, whole lines prefixed with "[part N] ", byte for
// byte (a NUL or invalid UTF-8 in a job's output is passed on, not a line's end).
class LogPrinter {
 public:
  explicit LogPrinter(std::FILE* out = stdout) : out_(out) {}
  void Write(int part, const std::string& data, bool prefix);
  // Prints what is left of unfinished lines.
  void Flush();

 private:
  void Line(int part, std::string_view text);
  std::FILE* out_;
  std::vector<std::string> pending_;
};

struct LogOptions {
  bool follow = false;
  // 0: the current one; when following, every attempt from the first, one after another (a job
  // that restarts quickly must not skip one).
  int attempt = 0;
  int part = -1;    // -1: every part
};
// Prints a job's logs (following them with opts.follow); returns the exit code.
int StreamLogs(ApiClient& client, const std::string& cmd, int64_t job, const LogOptions& opts);

// The directory a job that names none runs in: the one it was submitted from.
std::string CurrentDir();

}  // namespace gpufleet::cli::client
