#include "cli/client_commands.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/gpu_probe.h"
#include "agent/node_check.h"
#include "api/agent_protocol.h"
#include "api/codec.h"
#include "api/job_yaml.h"
#include "cli/client.h"
#include "common/strings.h"
#include "common/time.h"
#include "model/gpu_catalog.h"
#include "node/burn_in.h"

namespace gpufleet::cli {

namespace {

using nlohmann::json;

constexpr int kTableWidth = 100;
constexpr int kSubmitRetries = 3;
// The server's long-poll wakes on new log data but not on a job's end, so a silent job that
// ends is noticed at the next poll: keep the wait short.
constexpr int kLogsWaitMs = 1000;

constexpr const char* kExitCodes =
    "\nThe server and token come from --server/--token, else GPUFLEET_SERVER/GPUFLEET_TOKEN, else\n"
    "~/.config/gpufleet/config.yaml (or $GPUFLEET_CONFIG), which 'gpufleet dev' writes.\n\n"
    "Exit codes: 0 ok; 1 the operation failed (job failed, not found); 2 usage error or bad input;\n"
    "3 cannot reach the controller or the token was refused.";

// --- Shared plumbing ------------------------------------------------------------------------

struct Connection {
  std::string server;
  std::string token;
};

void AddConnectionFlags(CLI::App* sub, Connection& c) {
  sub->add_option("--server", c.server, "Controller URL, e.g. http://127.0.0.1:8470");
  sub->add_option("--token", c.token, "Bearer token");
}

void AddOutputFlag(CLI::App* sub, std::string& output) {
  sub->add_option("-o,--output", output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
}

void SetFooter(CLI::App* sub, const std::string& examples) {
  sub->footer("Examples:\n" + examples + "\n" + kExitCodes);
}

int Fail(const std::string& cmd, int code, const std::string& message) {
  std::fprintf(stderr, "gpufleet %s: %s\n", cmd.c_str(), message.c_str());
  return code;
}

int Report(const std::string& cmd, const ApiResult& r) { return Fail(cmd, r.exit_code, r.error); }

// A client for the configured controller, or nullptr after printing why not (exit code 2).
std::unique_ptr<ApiClient> Connect(const std::string& cmd, const Connection& c) {
  auto config = LoadClientConfig(c.server, c.token);
  if (!config.ok()) {
    Fail(cmd, kExitUsage, config.status().message());
    return nullptr;
  }
  auto client = std::make_unique<ApiClient>(*config);
  if (std::string bad = client->CheckServer(); !bad.empty()) {
    Fail(cmd, kExitUsage, bad);
    return nullptr;
  }
  return client;
}

std::optional<int64_t> ParseJobId(const std::string& s) {
  std::string_view v = Trim(s);
  if (StartsWith(v, "job-")) v.remove_prefix(4);
  auto n = ParseInt(v);
  if (!n || *n < 0) return std::nullopt;
  return *n;
}

void PrintJson(const json& j) {
  std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Span(int64_t ms) {
  if (ms < 1000) return "0s";
  return FormatDuration(Duration::Seconds(ms / 1000));
}

// "3m ago"; "-" for no time.
std::string Ago(int64_t at_ms) {
  if (at_ms <= 0) return "-";
  int64_t d = NowMs() - at_ms;
  if (d < 1000) return "just now";
  return Span(d) + " ago";
}

std::string Iso(int64_t at_ms) { return FormatIso8601(Time::FromMillis(at_ms)); }

int64_t IntField(const json& j, const char* key, int64_t fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

std::string StrField(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

bool IsTerminalState(const std::string& s) { return s == "succeeded" || s == "failed" || s == "cancelled"; }

// "2x4 H100", "1 A100|H100", "0.5 any", "cpu".
std::string GpuText(const json& j) {
  std::string count;
  const json& g = j.value("gpus", json(1));
  int64_t nodes = IntField(j, "nodes", 1);
  // A whole number may arrive as 2.0: only a real fraction is a GPU slice.
  if (g.is_number_float() && g.get<double>() != static_cast<double>(static_cast<int64_t>(g.get<double>()))) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", g.get<double>());
    count = buf;
  } else {
    int64_t per = g.is_number() ? static_cast<int64_t>(g.get<double>()) : 1;
    if (per == 0) return nodes > 1 ? std::to_string(nodes) + "x cpu" : "cpu";
    count = nodes > 1 ? std::to_string(nodes) + "x" + std::to_string(per) : std::to_string(per);
  }
  std::string model;
  if (j.contains("placement") && j["placement"].is_object()) model = StrField(j["placement"], "gpu_model");
  if (model.empty() && j.contains("gpu_type") && j["gpu_type"].is_array() && !j["gpu_type"].empty()) {
    std::vector<std::string> names;
    for (const auto& m : j["gpu_type"]) names.push_back(m.get<std::string>());
    model = Join(names, "|");
  }
  return count + " " + (model.empty() ? "any" : model);
}

// Fixed-width columns sized to their content; the last column is cut to keep rows within `width`.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : rows_{std::move(headers)} {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

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

std::string RandomRequestId() {
  unsigned char bytes[12] = {};
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  bool ok = fd >= 0 && ::read(fd, bytes, sizeof bytes) == static_cast<ssize_t>(sizeof bytes);
  if (fd >= 0) ::close(fd);
  if (!ok) {
    // Not expected on Linux; the time and pid still make collisions unlikely.
    uint64_t v = static_cast<uint64_t>(NowMs()) ^ (static_cast<uint64_t>(::getpid()) << 40);
    for (size_t i = 0; i < sizeof bytes; ++i) bytes[i] = static_cast<unsigned char>(v >> ((i % 8) * 8));
  }
  static const char* kHex = "0123456789abcdef";
  std::string id = "cli-";
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

// Submits a POST /v1/jobs body (retrying transient failures: the request id makes it safe) and
// prints what was created. Returns the exit code; `ids` gets the job ids.
struct SubmitOutcome {
  int exit_code = kExitOk;
  std::vector<int64_t> ids;
};

SubmitOutcome PostJobs(ApiClient& client, const std::string& cmd, const json& body, const std::string& output) {
  SubmitOutcome out;
  ApiResult r = client.Post("/v1/jobs", body, {.retries = kSubmitRetries});
  if (!r.ok()) {
    out.exit_code = Report(cmd, r);
    return out;
  }
  const json& jobs = r.body.value("jobs", json::array());
  for (const auto& j : jobs) out.ids.push_back(IntField(j, "id"));
  if (output == "json") {
    PrintJson(r.body);
    return out;
  }
  bool created = r.body.value("created", true);
  std::string verb = created ? "submitted" : "already submitted (request " + StrField(r.body, "request_id") + ")";
  if (jobs.size() <= 20) {
    for (const auto& j : jobs) {
      std::printf("%s job %lld (%s)\n", verb.c_str(), static_cast<long long>(IntField(j, "id")),
                  StrField(j, "name").c_str());
    }
  } else {
    std::printf("%s %zu jobs: %lld (%s) .. %lld (%s)\n", verb.c_str(), jobs.size(),
                static_cast<long long>(IntField(jobs.front(), "id")), StrField(jobs.front(), "name").c_str(),
                static_cast<long long>(IntField(jobs.back(), "id")), StrField(jobs.back(), "name").c_str());
  }
  return out;
}

// After a submit: a job the cluster as it is can never run (a gang of more nodes than it has)
// waits until such nodes join. Say so, and why, unless a pool may rent them. One explanation per
// distinct shape, so a sweep of a thousand jobs asks once.
void WarnIfNeverRunnable(ApiClient& client, const std::vector<int64_t>& ids,
                         const std::vector<api::JobRequest>& jobs) {
  std::vector<std::string> shapes_seen;
  std::optional<bool> has_pool;
  for (size_t i = 0; i < ids.size() && i < jobs.size(); ++i) {
    const model::JobSpec& s = jobs[i].spec;
    std::string shape = std::to_string(s.gpus_per_node) + "/" + std::to_string(s.gpu_milli) + "/" +
                        std::to_string(s.nodes) + "/" + Join(s.gpu_models, ",") + "/" + std::to_string(s.cpu_milli) +
                        "/" + std::to_string(s.mem_mib) + "/" + model::MarketPreferenceName(s.market);
    for (const auto& [k, v] : s.constraints) shape += "/" + k + "=" + v;
    if (std::find(shapes_seen.begin(), shapes_seen.end(), shape) != shapes_seen.end()) continue;
    shapes_seen.push_back(shape);
    ApiResult e = client.Get("/v1/jobs/" + std::to_string(ids[i]) + "/explain");
    if (!e.ok() || e.body.value("ever", true)) continue;
    if (!has_pool) has_pool = client.Get("/v1/pool").ok();
    if (*has_pool) continue;  // the pool rents nodes for it
    std::vector<std::string> why;
    for (const auto& r : e.body.value("reasons", json::array())) {
      if (r.is_string() && StartsWith(r.get<std::string>(), "infeasible: ")) why.push_back(r.get<std::string>().substr(12));
    }
    std::fprintf(stderr,
                 "warning: job %lld cannot run on this cluster as it is%s%s; it waits until such nodes join (this "
                 "controller has no pool to rent them). 'gpufleet cancel %lld' drops it\n",
                 static_cast<long long>(ids[i]), why.empty() ? "" : ": ", Join(why, "; ").c_str(),
                 static_cast<long long>(ids[i]));
  }
}

// --- Logs -----------------------------------------------------------------------------------

struct LogOptions {
  bool follow = false;
  // 0: the current one; when following, every attempt from the first, one after another (a job
  // that restarts quickly must not skip one).
  int attempt = 0;
  int part = -1;    // -1: every part
};

// Prints log data; for several parts, whole lines prefixed with "[part N] ".
class LogPrinter {
 public:
  void Write(int part, const std::string& data, bool prefix) {
    if (!prefix) {
      std::fwrite(data.data(), 1, data.size(), stdout);
      std::fflush(stdout);
      return;
    }
    if (static_cast<size_t>(part) >= pending_.size()) pending_.resize(part + 1);
    std::string& buf = pending_[part];
    buf += data;
    size_t start = 0;
    for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::printf("[part %d] %.*s\n", part, static_cast<int>(nl - start), buf.data() + start);
    }
    buf.erase(0, start);
    std::fflush(stdout);
  }
  // Prints what is left of unfinished lines.
  void Flush() {
    for (size_t p = 0; p < pending_.size(); ++p) {
      if (!pending_[p].empty()) std::printf("[part %zu] %s\n", p, pending_[p].c_str());
      pending_[p].clear();
    }
    std::fflush(stdout);
  }

 private:
  std::vector<std::string> pending_;
};

int StreamLogs(ApiClient& client, const std::string& cmd, int64_t job, const LogOptions& opts) {
  const std::string path = "/v1/jobs/" + std::to_string(job) + "/logs";
  const std::string job_path = "/v1/jobs/" + std::to_string(job);
  int attempt = opts.attempt > 0 ? opts.attempt : (opts.follow ? 1 : 0);
  std::vector<int64_t> offsets;
  LogPrinter printer;
  const ApiClientOptions retry{.retries = opts.follow ? kSubmitRetries : 0};
  // Following a job that has not started yet: long-poll its attempt 0 (no output), which the
  // controller answers when the job starts, instead of asking for an attempt it does not have.
  bool not_started = false;
  for (;;) {
    std::map<std::string, std::string> q;
    if (not_started) {
      q["attempt"] = "0";
    } else if (attempt > 0) {
      q["attempt"] = std::to_string(attempt);
    }
    if (!offsets.empty() && !not_started) {
      std::vector<std::string> o;
      for (int64_t v : offsets) o.push_back(std::to_string(v));
      q["offsets"] = Join(o, ",");
    }
    q["wait_ms"] = opts.follow ? std::to_string(kLogsWaitMs) : "0";
    ApiResult r = client.Get(path, q, retry);
    if (!r.ok()) {
      printer.Flush();
      return Report(cmd, r);
    }
    if (!not_started) {
      int got = static_cast<int>(IntField(r.body, "attempt"));
      if (attempt == 0 && got > 0) attempt = got;
      const json& parts = r.body.value("parts", json::array());
      if (offsets.size() < parts.size()) offsets.resize(parts.size(), 0);
      bool any = false;
      bool prefix = parts.size() > 1 && opts.part < 0;
      for (const auto& p : parts) {
        int idx = static_cast<int>(IntField(p, "part"));
        std::string data = StrField(p, "data");
        if (data.empty() || idx < 0 || static_cast<size_t>(idx) >= offsets.size()) continue;
        any = true;
        offsets[idx] += static_cast<int64_t>(data.size());
        if (opts.part < 0 || opts.part == idx) printer.Write(idx, data, prefix);
      }
      if (any) continue;  // read on: replies come in chunks
      if (!opts.follow) break;
      if (!r.body.value("finished", false)) continue;
    }
    // This attempt is over and fully read (or the job has not begun it). Go on with the next
    // one, or stop when the job ended.
    if (opts.attempt > 0 && !not_started) break;
    ApiResult j = client.Get(job_path, {}, retry);
    if (!j.ok()) {
      printer.Flush();
      return Report(cmd, j);
    }
    int current = static_cast<int>(IntField(j.body, "attempt"));
    // Waiting for the start, the attempt has not been read yet: read it even if the job ended
    // meanwhile (a quick job can start and end between two polls).
    const bool unread = not_started;
    not_started = current == 0;
    if (current > 0 && current < attempt) {
      printer.Flush();
      return Fail(cmd, kExitFailed, "job " + std::to_string(job) + " is at attempt " + std::to_string(current) +
                                        "; attempt " + std::to_string(attempt) + " has not begun");
    }
    if (current > attempt) {
      // The next attempt, not the current one: each is printed whole, however fast they went.
      printer.Flush();
      attempt += 1;
      offsets.clear();
      std::printf("--- attempt %d ---\n", attempt);
      std::fflush(stdout);
      continue;
    }
    if (unread && current > 0) continue;
    if (IsTerminalState(StrField(j.body, "state"))) break;
  }
  printer.Flush();
  return kExitOk;
}

// Jobs that name no working directory run in the one they were submitted from, as with sbatch
// (on a cluster without a shared filesystem, give `workdir` explicitly).
std::string CurrentDir() {
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  return ec ? std::string() : cwd;
}

// --- submit ---------------------------------------------------------------------------------

std::function<int()> SetupSubmit(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string file;
    std::string request_id;
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("submit", "Submit the jobs of a job file (YAML) to the controller");
  sub->add_option("file", a->file, "Job file (schema: docs/api.md#job-file); several jobs as YAML documents")
      ->required();
  sub->add_option("--request-id", a->request_id,
                  "Idempotency key: submitting again with the same id creates nothing new (default: random)");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet submit train.yaml
  gpufleet submit sweep.yaml --request-id sweep-2024-06-01   # safe to repeat
  gpufleet submit train.yaml -o json
The file is checked here first; an error names file:line:column and the field.)");
  return [a]() {
    const std::string cmd = "submit";
    std::ifstream f(a->file, std::ios::binary);
    if (!f) return Fail(cmd, kExitUsage, "cannot read " + a->file);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    api::JobParseOptions opts;
    opts.source = a->file;
    auto jobs = api::ParseJobs(text, opts);
    if (!jobs.ok()) return Fail(cmd, kExitUsage, jobs.status().message());
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    std::string source = a->file.substr(a->file.find_last_of('/') + 1);
    json body = {{"request_id", a->request_id.empty() ? RandomRequestId() : a->request_id},
                 {"yaml", text},
                 {"source", source},
                 {"default_workdir", CurrentDir()}};
    SubmitOutcome out = PostJobs(*client, cmd, body, a->output);
    if (out.exit_code == kExitOk) WarnIfNeverRunnable(*client, out.ids, *jobs);
    return out.exit_code;
  };
}

// --- run ------------------------------------------------------------------------------------

// A job name from the command: its program's base name, in the characters names allow.
std::string NameFromCommand(const std::vector<std::string>& argv) {
  std::string prog = argv.empty() ? "job" : argv[0].substr(argv[0].find_last_of('/') + 1);
  std::string name;
  for (char c : prog) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    name += ok ? c : '-';
  }
  return name.empty() || name[0] == '.' ? "job" : name;
}

std::function<int()> SetupRun(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string gpus;
    int nodes = 1;
    std::vector<std::string> gpu_types;
    std::string name;
    std::string team;
    int priority = 0;
    std::vector<std::string> env;
    std::string workdir;
    std::string checkpoint_dir;
    int max_restarts = 0;
    std::string stall_timeout;
    std::string on_stall;
    bool process_per_gpu = false;
    bool follow = false;
    std::string request_id;
    std::string output = "table";
    std::vector<std::string> command;
    CLI::Option* nodes_opt = nullptr;
    CLI::Option* priority_opt = nullptr;
    CLI::Option* restarts_opt = nullptr;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("run", "Run a command as a job: gpufleet run [flags] -- CMD ARGS...");
  sub->add_option("--gpus", a->gpus, "GPUs per node (default 1; 0 for CPU only; 0.5 for half a GPU)");
  a->nodes_opt = sub->add_option("--nodes", a->nodes, "Nodes: more than 1 makes a gang that starts all at once");
  sub->add_option("--gpu-type", a->gpu_types, "Acceptable GPU model, first preferred (repeat or comma-separate)")
      ->allow_extra_args(false)
      ->delimiter(',');
  sub->add_option("--name", a->name, "Job name (default: the program's name)");
  sub->add_option("--team", a->team, "Team (default: your token's team, else default)");
  a->priority_opt = sub->add_option("--priority", a->priority, "Priority, -1000..1000; larger runs first");
  sub->add_option("--env", a->env, "Environment variable K=V (repeat for more)")->allow_extra_args(false);
  sub->add_option("--workdir", a->workdir, "Working directory on the node (default: one the agent makes)");
  sub->add_option("--checkpoint-dir", a->checkpoint_dir, "GPUFLEET_CHECKPOINT_DIR for the job");
  a->restarts_opt = sub->add_option("--max-restarts", a->max_restarts, "Requeue after a non-zero exit this many times");
  sub->add_option("--stall-timeout", a->stall_timeout,
                  "Watchdog: flag the job when it made no progress (GPUFLEET_PROGRESS), wrote no output and kept "
                  "its GPUs idle this long, e.g. 15m (docs/observability.md)");
  sub->add_option("--on-stall", a->on_stall, "With --stall-timeout: alert (default) or restart from its checkpoint")
      ->check(CLI::IsMember({"alert", "restart"}));
  sub->add_flag("--process-per-gpu", a->process_per_gpu, "Start one process per GPU with RANK and LOCAL_RANK");
  sub->add_flag("-f,--follow", a->follow, "Stream the job's logs until it ends; exit 0 if it succeeded, else 1");
  sub->add_option("--request-id", a->request_id, "Idempotency key (default: random)");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  sub->add_option("command", a->command, "The command and its arguments, after --")->required();
  SetFooter(sub, R"(  gpufleet run -- nvidia-smi
  gpufleet run --gpus 8 --nodes 2 --gpu-type H100 --name llama-ft -- torchrun train.py --epochs 3
  gpufleet run --gpus 0.5 --env BATCH=64 -f -- python3 eval.py
  gpufleet run -f -- sh -c 'echo hello; exit 0'
With -f the exit code is the job's outcome: 0 if it succeeded, 1 if it failed or was cancelled.)");
  return [a]() {
    const std::string cmd = "run";
    json job = json::object();
    job["name"] = a->name.empty() ? NameFromCommand(a->command) : a->name;
    if (!a->team.empty()) job["team"] = a->team;
    if (a->priority_opt->count()) job["priority"] = a->priority;
    json res = json::object();
    if (!a->gpus.empty()) {
      if (auto n = ParseInt(a->gpus)) {
        res["gpus"] = *n;
      } else if (auto d = ParseDouble(a->gpus)) {
        res["gpus"] = *d;
      } else {
        return Fail(cmd, kExitUsage, "--gpus must be a number (4, or 0.5 for half a GPU), got '" + a->gpus + "'");
      }
    }
    if (a->nodes_opt->count()) res["nodes"] = a->nodes;
    if (!a->gpu_types.empty()) res["gpu_type"] = a->gpu_types;
    if (!res.empty()) job["resources"] = res;
    job["run"] = a->command;
    if (!a->env.empty()) {
      json env = json::object();
      for (const auto& kv : a->env) {
        size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) return Fail(cmd, kExitUsage, "--env wants K=V, got '" + kv + "'");
        env[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      job["env"] = env;
    }
    if (!a->workdir.empty()) job["workdir"] = a->workdir;
    if (!a->checkpoint_dir.empty()) job["checkpoint"] = {{"dir", a->checkpoint_dir}};
    if (a->restarts_opt->count()) job["restart"] = {{"max_restarts_on_errors", a->max_restarts}};
    if (a->process_per_gpu) job["process_per_gpu"] = true;
    if (!a->on_stall.empty() && a->stall_timeout.empty()) return Fail(cmd, kExitUsage, "--on-stall needs --stall-timeout");
    if (!a->stall_timeout.empty()) {
      job["watchdog"] = {{"stall_timeout", a->stall_timeout}};
      if (!a->on_stall.empty()) job["watchdog"]["on_stall"] = a->on_stall;
    }
    api::JobParseOptions opts;
    opts.source = "gpufleet run";
    auto jobs = api::ParseJobs(job.dump(), opts);
    if (!jobs.ok()) return Fail(cmd, kExitUsage, jobs.status().message());
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    json body = {{"request_id", a->request_id.empty() ? RandomRequestId() : a->request_id},
                 {"job", api::ToJobJson(jobs->front())},
                 {"default_workdir", CurrentDir()}};
    SubmitOutcome s = PostJobs(*client, cmd, body, a->follow ? "table" : a->output);
    if (s.exit_code == kExitOk) WarnIfNeverRunnable(*client, s.ids, *jobs);
    if (s.exit_code != kExitOk || !a->follow || s.ids.empty()) return s.exit_code;
    std::fflush(stdout);
    int64_t id = s.ids.front();
    int rc = StreamLogs(*client, cmd, id, {.follow = true});
    if (rc != kExitOk) return rc;
    ApiResult j = client->Get("/v1/jobs/" + std::to_string(id), {}, {.retries = kSubmitRetries});
    if (!j.ok()) return Report(cmd, j);
    std::string state = StrField(j.body, "state");
    std::fprintf(stderr, "job %lld %s: %s\n", static_cast<long long>(id), state.c_str(),
                 StrField(j.body, "reason").c_str());
    return state == "succeeded" ? kExitOk : kExitFailed;
  };
}

// --- queue ----------------------------------------------------------------------------------

std::function<int()> SetupQueue(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("queue", "Show running and pending jobs, pending ones in queue order");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet queue
  gpufleet queue -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')");
  return [a]() {
    const std::string cmd = "queue";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/queue");
    if (!r.ok()) return Report(cmd, r);
    if (a->output == "json") {
      PrintJson(r.body);
      return kExitOk;
    }
    const json& jobs = r.body.value("jobs", json::array());
    if (jobs.empty()) {
      std::printf("no jobs running or pending\n");
      return kExitOk;
    }
    Table t({"ID", "NAME", "TEAM", "STATE", "GPUS", "POSITION", "AGE/RUNTIME", "REASON"});
    for (const auto& j : jobs) {
      int64_t pos = IntField(j, "position");
      std::string state = StrField(j, "state");
      // Pending: how long it has waited; otherwise how long since it entered its state.
      std::string age = state == "pending" ? Span(NowMs() - IntField(j, "submitted_ms"))
                                           : Span(NowMs() - IntField(j, "updated_ms"));
      t.Add({std::to_string(IntField(j, "id")), StrField(j, "name"), StrField(j, "team"), state, GpuText(j),
             pos > 0 ? std::to_string(pos) : "-", age, StrField(j, "reason")});
    }
    t.Print();
    return kExitOk;
  };
}

// --- status ---------------------------------------------------------------------------------

std::string CommandText(const json& run) {
  if (run.is_string()) return run.get<std::string>();
  std::vector<std::string> words;
  if (run.is_array()) {
    for (const auto& w : run) {
      std::string s = w.is_string() ? w.get<std::string>() : w.dump();
      bool plain = !s.empty() && s.find_first_of(" \t\n'\"\\$`;&|<>*?()") == std::string::npos;
      if (plain) {
        words.push_back(s);
      } else {
        std::string q = "'";
        for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        words.push_back(q + "'");
      }
    }
  }
  return Join(words, " ");
}

// Node id -> name, from GET /v1/nodes (empty when that fails: ids are shown instead).
std::map<int64_t, std::string> NodeNames(ApiClient& client) {
  std::map<int64_t, std::string> names;
  ApiResult r = client.Get("/v1/nodes");
  if (!r.ok()) return names;
  for (const auto& n : r.body.value("nodes", json::array())) names[IntField(n, "id")] = StrField(n, "name");
  return names;
}

std::string PlacementText(const json& placement, const std::map<int64_t, std::string>& names) {
  std::vector<std::string> parts;
  int rank = 0;
  for (const auto& p : placement.value("parts", json::array())) {
    int64_t node = IntField(p, "node");
    auto it = names.find(node);
    std::string where = it != names.end() ? it->second : "node " + std::to_string(node);
    std::vector<std::string> gpus;
    for (const auto& g : p.value("gpus", json::array())) gpus.push_back(std::to_string(g.get<int64_t>()));
    std::string part = where + (gpus.empty() ? "" : " GPUs " + Join(gpus, ","));
    int64_t milli = IntField(p, "gpu_milli", 1000);
    if (milli < 1000) part += " (" + std::to_string(milli) + " milli-GPU)";
    parts.push_back(placement.value("parts", json::array()).size() > 1 ? "part " + std::to_string(rank) + ": " + part
                                                                       : part);
    ++rank;
  }
  std::string model = StrField(placement, "gpu_model");
  return Join(parts, "; ") + (model.empty() ? "" : " [" + model + "]");
}

std::function<int()> SetupStatus(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string job;
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("status", "Show a job: state, resources, placement and its full history");
  sub->add_option("job", a->job, "Job id")->required();
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet status 12
  gpufleet status 12 -o json)");
  return [a]() {
    const std::string cmd = "status";
    auto id = ParseJobId(a->job);
    if (!id) return Fail(cmd, kExitUsage, "JOB must be a job number, got '" + a->job + "'");
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/jobs/" + std::to_string(*id));
    if (!r.ok()) return Report(cmd, r);
    const json& j = r.body;
    if (a->output == "json") {
      PrintJson(j);
      return kExitOk;
    }
    auto line = [](const char* key, const std::string& value) {
      std::printf("  %-11s %s\n", key, value.c_str());
    };
    std::printf("job %lld (%s)\n", static_cast<long long>(IntField(j, "id")), StrField(j, "name").c_str());
    line("team:", StrField(j, "team"));
    std::string state = StrField(j, "state");
    std::string reason = StrField(j, "reason");
    line("state:", state + (reason.empty() ? "" : " (" + reason + ")"));
    line("priority:", std::to_string(IntField(j, "priority")));
    int64_t nodes = IntField(j, "nodes", 1);
    std::string gpus = GpuText(json{{"gpus", j.value("gpus", json(1))},
                                    {"gpu_type", j.value("gpu_type", json::array())},
                                    {"placement", j.value("placement", json())}});
    std::string res = gpus == "cpu" ? "no GPU" : gpus + " GPU" + (gpus.rfind("1 ", 0) == 0 ? "" : "s");
    if (nodes > 1) res = std::to_string(nodes) + " nodes x " + res + " each";
    if (j.contains("job_file") && j["job_file"].is_object()) {
      const json& f = j["job_file"];
      const json& rr = f.value("resources", json::object());
      if (rr.contains("cpus")) res += ", " + rr["cpus"].dump() + " CPUs";
      if (rr.contains("memory")) res += ", " + StrField(rr, "memory") + " memory";
      line("resources:", res);
      if (f.contains("run")) line("command:", CommandText(f["run"]));
    } else {
      line("resources:", res);
    }
    line("submitted:", Iso(IntField(j, "submitted_ms")) + " (" + Ago(IntField(j, "submitted_ms")) + ")");
    line("attempt:", std::to_string(IntField(j, "attempt")));
    if (j.contains("placement") && j["placement"].is_object()) {
      line(IsTerminalState(state) ? "ran on:" : "placement:", PlacementText(j["placement"], NodeNames(*client)));
    }
    if (j.contains("exit_code") && j["exit_code"].is_number()) line("exit code:", j["exit_code"].dump());
    if (j.contains("activity") && j["activity"].is_object()) {
      const json& act = j["activity"];
      if (act.contains("step")) {
        std::string p = "step " + act["step"].dump();
        if (act.contains("loss") && act["loss"].is_number()) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.4g", act["loss"].get<double>());
          p += ", loss " + std::string(buf);
        }
        if (act.contains("progress_at")) p += " at " + StrField(act, "progress_at");
        line("progress:", p);
      }
      if (act.contains("stall_timeout_ms")) {
        line("watchdog:", "stall_timeout " + FormatDuration(Duration::Millis(IntField(act, "stall_timeout_ms"))) +
                              ", on_stall " + StrField(act, "on_stall"));
      }
    }
    std::printf("\nhistory:\n");
    Table t({"  TIME", "FROM", "TO", "REASON"});
    for (const auto& h : j.value("history", json::array())) {
      t.Add({"  " + Iso(IntField(h, "at_ms")), StrField(h, "from"), StrField(h, "to"), StrField(h, "reason")});
    }
    t.Print();
    return kExitOk;
  };
}

// --- logs -----------------------------------------------------------------------------------

std::function<int()> SetupLogs(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string job;
    bool follow = false;
    int attempt = 0;
    int part = -1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("logs", "Print a job's output (stdout and stderr of every node)");
  sub->add_option("job", a->job, "Job id")->required();
  sub->add_flag("-f,--follow", a->follow,
                "Keep printing until the job ends, across restarts (prints '--- attempt N ---')");
  sub->add_option("--attempt", a->attempt, "Show this attempt (1 is the first run; default: the latest)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--part", a->part, "Only this part of a gang (node rank, from 0)")->check(CLI::NonNegativeNumber);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet logs 12
  gpufleet logs -f 12              # follow until the job ends
  gpufleet logs --attempt 1 12     # the run before a restart
  gpufleet logs --part 1 12        # node rank 1 of a gang (else lines read '[part N] ...'))");
  return [a]() {
    const std::string cmd = "logs";
    auto id = ParseJobId(a->job);
    if (!id) return Fail(cmd, kExitUsage, "JOB must be a job number, got '" + a->job + "'");
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    return StreamLogs(*client, cmd, *id, {.follow = a->follow, .attempt = a->attempt, .part = a->part});
  };
}

// --- cancel ---------------------------------------------------------------------------------

std::function<int()> SetupCancel(CLI::App& app) {
  struct Args {
    Connection conn;
    std::vector<std::string> jobs;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("cancel", "Cancel jobs: pending ones leave the queue, running ones are stopped");
  sub->add_option("jobs", a->jobs, "Job ids")->required();
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet cancel 12
  gpufleet cancel 12 13 14
A running job gets its checkpoint signal (default SIGTERM), a grace period, then SIGKILL.)");
  return [a]() {
    const std::string cmd = "cancel";
    std::vector<int64_t> ids;
    for (const auto& s : a->jobs) {
      auto id = ParseJobId(s);
      if (!id) return Fail(cmd, kExitUsage, "JOB must be a job number, got '" + s + "'");
      ids.push_back(*id);
    }
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    int rc = kExitOk;
    for (int64_t id : ids) {
      ApiResult r = client->Post("/v1/jobs/" + std::to_string(id) + "/cancel", json::object());
      if (!r.ok()) {
        rc = std::max(rc, Report(cmd, r));
        if (r.exit_code == kExitUnreachable) return rc;
        continue;
      }
      std::printf("cancel requested for job %lld\n", static_cast<long long>(id));
    }
    return rc;
  };
}

// --- explain --------------------------------------------------------------------------------

std::function<int()> SetupExplain(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string job;
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("explain", "Say why a job is not running: queue position, what it waits for");
  sub->add_option("job", a->job, "Job id")->required();
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet explain 12
  gpufleet explain 12 -o json)");
  return [a]() {
    const std::string cmd = "explain";
    auto id = ParseJobId(a->job);
    if (!id) return Fail(cmd, kExitUsage, "JOB must be a job number, got '" + a->job + "'");
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/jobs/" + std::to_string(*id) + "/explain");
    if (!r.ok()) return Report(cmd, r);
    const json& e = r.body;
    if (a->output == "json") {
      PrintJson(e);
      return kExitOk;
    }
    std::string phase = e.contains("phase") ? StrField(e, "phase") : StrField(e, "state");
    std::printf("job %lld is %s", static_cast<long long>(*id), phase.c_str());
    if (IntField(e, "position") > 0) {
      std::printf(": number %lld of %lld in the queue", static_cast<long long>(IntField(e, "position")),
                  static_cast<long long>(IntField(e, "queue_length")));
    }
    std::printf("\n");
    if (e.contains("can_start_now")) {
      std::printf("  can start now:   %s\n", e.value("can_start_now", false) ? "yes" : "no");
      std::printf("  can ever run:    %s\n",
                  e.value("ever", true) ? "yes" : "no: it asks for more than this cluster has, even when empty");
      if (e.contains("earliest_start_ms")) {
        int64_t at = IntField(e, "earliest_start_ms");
        int64_t in = at - NowMs();
        std::printf("  earliest start:  %s (%s)\n", Iso(at).c_str(), in > 0 ? ("in " + Span(in)).c_str() : "now");
      } else if (phase == "pending" && e.value("ever", true)) {
        std::printf("  earliest start:  unknown (running jobs give no runtime estimates)\n");
      }
    }
    const json& reasons = e.value("reasons", json::array());
    if (!reasons.empty()) {
      std::printf("why:\n");
      for (const auto& s : reasons) std::printf("  - %s\n", s.is_string() ? s.get<std::string>().c_str() : s.dump().c_str());
    }
    return kExitOk;
  };
}

// --- nodes ----------------------------------------------------------------------------------

// A burn-in report (api::ToJson(model::BurnInReport)) as tables: each test against its
// reference, then each GPU's health, then the verdict.
void PrintBurnIn(const json& b) {
  const double threshold = b.value("threshold", 0.0);
  std::printf("burn-in: %s path, torch %s, %s, %s%s\n", StrField(b, "path").c_str(),
              StrField(b, "torch").empty() ? "?" : StrField(b, "torch").c_str(),
              StrField(b, "backend").empty() ? "-" : StrField(b, "backend").c_str(),
              Span(IntField(b, "took_ms")).c_str(), b.value("timed_out", false) ? " (hit its time limit)" : "");
  Table t({"TEST", "GPU", "MEASURED", "REFERENCE", "SHARE", "OK", "BASIS"});
  char buf[64];
  for (const auto& m : b.value("tests", json::array())) {
    const int64_t gpu = m.value("gpu", int64_t{-1});
    const std::string g = gpu >= 0 ? std::to_string(gpu) : "all";
    if (m.contains("skipped")) {
      t.Add({StrField(m, "name"), g, "-", "-", "-", "-", "skipped: " + StrField(m, "skipped")});
      continue;
    }
    if (m.contains("error")) {
      t.Add({StrField(m, "name"), g, "-", "-", "-", "no", "error: " + StrField(m, "error")});
      continue;
    }
    const std::string unit = StrField(m, "unit");
    const double v = m.value("value", 0.0), ref = m.value("reference", 0.0);
    std::snprintf(buf, sizeof buf, "%.4g %s", v, unit.c_str());
    std::string measured = buf, reference = "-", share = "-";
    if (ref > 0) {
      std::snprintf(buf, sizeof buf, "%.4g %s", ref, unit.c_str());
      reference = buf;
      std::snprintf(buf, sizeof buf, "%.0f%%", 100 * v / ref);
      share = buf;
    }
    t.Add({StrField(m, "name"), g, measured, reference, share, m.value("ok", true) ? "yes" : "NO",
           ref > 0 ? StrField(m, "basis") : "no reference yet: recorded"});
  }
  t.Print();
  const json& health = b.value("health", json::array());
  if (!health.empty()) {
    std::printf("\n");
    Table h({"GPU", "ECC", "RETIRED", "PCIE", "NVLINK", "MAX TEMP", "MAX POWER", "SM CLOCK", "THROTTLE", "XID"});
    auto num = [](const json& x, const char* k, const char* suffix = "") {
      return x.contains(k) ? std::to_string(x.value(k, int64_t{0})) + suffix : std::string("-");
    };
    for (const auto& x : health) {
      std::string pcie = "-";
      if (x.contains("pcie_width")) {
        pcie = "gen" + num(x, "pcie_gen") + " x" + num(x, "pcie_width") + " (max gen" + num(x, "pcie_max_gen") + " x" +
               num(x, "pcie_max_width") + ")";
      }
      std::string nvlink = x.contains("nvlink_total") ? num(x, "nvlink_active") + "/" + num(x, "nvlink_total") : "-";
      std::vector<std::string> throttle, xid;
      for (const auto& r : x.value("throttle_reasons", json::array())) throttle.push_back(r.get<std::string>());
      for (const auto& r : x.value("xid_errors", json::array())) xid.push_back(std::to_string(r.get<int64_t>()));
      std::string clock = x.contains("min_sm_clock_mhz") ? num(x, "min_sm_clock_mhz") + "-" + num(x, "max_sm_clock_mhz") + " MHz" : "-";
      h.Add({num(x, "index"), num(x, "ecc_uncorrected"),
             num(x, "retired_pages") + (x.value("retirement_pending", false) ? " (pending)" : ""), pcie, nvlink,
             num(x, "max_temperature_c", " C"), num(x, "max_power_w", " W"), clock,
             throttle.empty() ? "-" : Join(throttle, ","), xid.empty() ? "-" : Join(xid, ",")});
    }
    h.Print();
  }
  std::snprintf(buf, sizeof buf, "%.0f%%", threshold * 100);
  int judged = 0;
  for (const auto& m : b.value("tests", json::array())) judged += m.value("reference", 0.0) > 0 ? 1 : 0;
  if (b.value("passed", false) && judged == 0) {
    std::printf("\nPASSED: health clean; no reference for these figures yet (no datasheet on the %s path): the "
                "controller judges them against its fleet's passed nodes\n", StrField(b, "path").c_str());
  } else if (b.value("passed", false)) {
    std::printf("\nPASSED (each judged test reached %s of its reference)\n", buf);
  } else {
    std::printf("\nFAILED (threshold %s):\n", buf);
    for (const auto& p : b.value("problems", json::array())) std::printf("  - %s\n", p.get<std::string>().c_str());
  }
}

void PrintNodeDetail(const json& n) {
  std::printf("node %s (%s): %s", StrField(n, "name").c_str(), StrField(n, "address").c_str(), StrField(n, "state").c_str());
  const std::string acceptance = StrField(n, "acceptance");
  if (!acceptance.empty()) std::printf(", acceptance %s", acceptance.c_str());
  std::printf("\n  GPUs:         %lld x %s (%lld in use)\n", static_cast<long long>(IntField(n, "gpus")),
              StrField(n, "gpu_model").c_str(), static_cast<long long>(IntField(n, "gpus_used")));
  std::printf("  market:       %s\n", StrField(n, "market").c_str());
  std::printf("  driver:       %s (CUDA %s)\n", StrField(n, "driver_version").empty() ? "none reported" : StrField(n, "driver_version").c_str(),
              StrField(n, "cuda_version").empty() ? "-" : StrField(n, "cuda_version").c_str());
  std::vector<std::string> envs, ready;
  for (const auto& e : n.value("environments", json::array())) envs.push_back(e.get<std::string>());
  for (const auto& e : n.value("environments_ready", json::array())) ready.push_back(e.get<std::string>());
  std::printf("  environments: %s\n", envs.empty() ? "none (no presets, or no driver reported)" : Join(envs, ", ").c_str());
  std::printf("  prepared:     %s\n", ready.empty() ? "none (jobs here start cold)" : Join(ready, ", ").c_str());
  if (!StrField(n, "acceptance_reason").empty()) std::printf("  why:          %s\n", StrField(n, "acceptance_reason").c_str());
  if (n.contains("burn_in") && n["burn_in"].is_object()) {
    std::printf("\n");
    PrintBurnIn(n["burn_in"]);
  } else {
    std::printf("  burn-in:      never run ('gpufleet node check %s' runs it)\n", StrField(n, "name").c_str());
  }
}

std::function<int()> SetupNodes(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    std::string node;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("nodes", "Show the nodes: state, GPUs in use, telemetry, jobs; one node in detail");
  sub->add_option("node", a->node, "One node in detail: its software, environments and burn-in result");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet nodes
  gpufleet nodes -o json
  gpufleet nodes gpu-node-07          # driver, environments, the burn-in's figures and verdict
UTIL%, TEMP and POWER are averages over the node's GPUs from its last heartbeat. STATE reclaiming: the
provider sent a spot interruption notice; the node drains and its jobs were requeued. STATE checking:
the node runs its acceptance burn-in and takes no work until it passes; quarantined: it failed (see
'gpufleet nodes NODE' for why; 'gpufleet node check NODE' runs it again). docs/nodes.md)");
  return [a]() {
    const std::string cmd = "nodes";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/nodes");
    if (!r.ok()) return Report(cmd, r);
    if (!a->node.empty()) {
      for (const auto& n : r.body.value("nodes", json::array())) {
        if (StrField(n, "name") != a->node) continue;
        if (a->output == "json") {
          PrintJson(n);
        } else {
          PrintNodeDetail(n);
        }
        return kExitOk;
      }
      std::fprintf(stderr, "gpufleet nodes: no node named '%s' (gpufleet nodes lists them)\n", a->node.c_str());
      return kExitFailed;
    }
    if (a->output == "json") {
      PrintJson(r.body);
      return kExitOk;
    }
    const json& nodes = r.body.value("nodes", json::array());
    if (nodes.empty()) {
      std::printf("no nodes have registered; start agents with 'gpufleet agent' (or 'gpufleet dev')\n");
      return kExitOk;
    }
    Table t({"NAME", "STATE", "GPUS", "UTIL%", "TEMP", "POWER", "LAST SEEN", "JOBS"});
    for (const auto& n : nodes) {
      const json& tel = n.value("telemetry", json::array());
      std::string util = "-", temp = "-", power = "-";
      if (!tel.empty()) {
        int64_t u = 0, c = 0, w = 0;
        for (const auto& g : tel) {
          u += IntField(g, "util_pct");
          c += IntField(g, "temperature_c");
          w += IntField(g, "power_w");
        }
        int64_t k = static_cast<int64_t>(tel.size());
        util = std::to_string((u + k / 2) / k);
        temp = std::to_string((c + k / 2) / k) + "C";
        power = std::to_string((w + k / 2) / k) + "W";
      }
      std::vector<std::string> jobs;
      for (const auto& j : n.value("jobs", json::array())) jobs.push_back(std::to_string(j.get<int64_t>()));
      std::string model = StrField(n, "gpu_model");
      // A spot interruption notice: the node drains until the provider takes it back.
      std::string state = StrField(n, "state");
      if (state == "draining" && n.contains("notice")) state = "reclaiming";
      // Acceptance: a node running its burn-in, or one that failed it, takes no work.
      const std::string acceptance = StrField(n, "acceptance");
      if (state == "up" && (acceptance == "checking" || acceptance == "quarantined")) state = acceptance;
      t.Add({StrField(n, "name"), state,
             std::to_string(IntField(n, "gpus_used")) + "/" + std::to_string(IntField(n, "gpus")) +
                 (model.empty() ? "" : " " + model),
             util, temp, power, Ago(IntField(n, "last_heartbeat_ms")), jobs.empty() ? "-" : Join(jobs, ",")});
    }
    t.Print();
    return kExitOk;
  };
}


// --- node check ------------------------------------------------------------------------------

std::function<int()> SetupNode(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    std::string node;
    std::string fake_gpus, fake_faults, fake_driver, nvml;
    std::string python, suite, time_limit = "170s", device = "auto";
    double threshold = node::kDefaultThreshold;
    bool quick = false, wait = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* node_app = app.add_subcommand("node", "Node lifecycle: acceptance burn-in (node check)");
  node_app->require_subcommand(1);
  CLI::App* sub = node_app->add_subcommand(
      "check", "Burn in a node: GPU health, matmul, memory and host-link bandwidth, all-reduce; pass or fail");
  sub->add_option("node", a->node,
                  "A registered node to check again through the controller (it takes no work until the new result "
                  "is judged). Without it: check this machine now and print the result");
  sub->add_option("--fake-gpus", a->fake_gpus, "Check fake GPUs (COUNTxMODEL) instead of the real ones");
  sub->add_option("--fake-faults", a->fake_faults,
                  "With --fake-gpus: faults to pretend, e.g. 'gpu=1 ecc=3; slow=10' (docs/nodes.md)");
  sub->add_option("--fake-driver", a->fake_driver, "With --fake-gpus: DRIVER/CUDA, e.g. 525.60.13/12.0");
  sub->add_option("--nvml-library", a->nvml, "Path of libnvidia-ml.so.1 if not on the loader path");
  sub->add_option("--python", a->python,
                  "Interpreter with PyTorch for the suite (default: $GPUFLEET_BURNIN_PYTHON, else python3)");
  sub->add_option("--suite", a->suite, "The suite script (default: scripts/burnin.py, or $GPUFLEET_BURNIN_SUITE)");
  sub->add_option("--time-limit", a->time_limit, "Stop starting tests after this long")->capture_default_str();
  sub->add_option("--device", a->device, "auto (CUDA when there are GPUs), cuda or cpu")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  sub->add_flag("--quick", a->quick, "Smallest sizes: a smoke test of the suite, not a verdict on the node");
  sub->add_option("--threshold", a->threshold, "Share of its reference each test must reach")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  sub->add_flag("--wait", a->wait, "With NODE: wait for the result and print it");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet node check                         # this machine's GPUs, about 3 minutes
  gpufleet node check --quick -o json          # a smoke test, as JSON
  gpufleet node check --fake-gpus 2xT4 --device cpu --python /usr/bin/python3   # no GPU: the CPU/gloo path
  gpufleet node check gpu-node-07 --wait       # ask a registered node to run it again (admin)
Exit status: 0 passed, 1 failed (the reasons are printed), 2 bad usage or the suite could not run.
Without a GPU datasheet reference (the CPU path) tests are recorded, not judged: the controller judges
them against the fleet's passed nodes. What is measured and the thresholds: docs/nodes.md.)");
  return [a]() {
    const std::string cmd = "node check";
    if (!a->node.empty()) {
      auto client = Connect(cmd, a->conn);
      if (!client) return kExitUsage;
      ApiResult r = client->Post("/v1/nodes/" + a->node + "/check", json::object());
      if (!r.ok()) return Report(cmd, r);
      if (!a->wait) {
        std::printf("node %s is running its burn-in; 'gpufleet nodes %s' shows the result when it is in\n",
                    a->node.c_str(), a->node.c_str());
        return kExitOk;
      }
      for (;;) {
        ApiResult n = client->Get("/v1/nodes");
        if (!n.ok()) return Report(cmd, n);
        for (const auto& x : n.body.value("nodes", json::array())) {
          if (StrField(x, "name") != a->node || StrField(x, "acceptance") == "checking") continue;
          if (a->output == "json") {
            PrintJson(x);
          } else {
            PrintNodeDetail(x);
          }
          return StrField(x, "acceptance") == "passed" ? kExitOk : kExitFailed;
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
    // This machine.
    agent::FakeGpuOptions fake;
    fake.spec = a->fake_gpus;
    fake.node = "local";
    fake.faults = a->fake_faults;
    fake.driver = a->fake_driver;
    auto opened = agent::OpenProbe(fake, a->nvml, model::GpuCatalog::BuiltIn());
    if (!opened.ok()) {
      std::fprintf(stderr, "gpufleet %s: %s\n", cmd.c_str(), opened.status().message().c_str());
      return kExitUsage;
    }
    std::unique_ptr<agent::GpuProbe> probe = std::move(*opened);
    agent::NodeCheckOptions o;
    const char* env_python = std::getenv("GPUFLEET_BURNIN_PYTHON");
    o.python = !a->python.empty() ? a->python : (env_python && *env_python ? env_python : "python3");
    o.suite = a->suite;
    o.quick = a->quick;
    o.device = a->device;
    auto limit = ParseDuration(a->time_limit);
    if (!limit || *limit <= Duration::Zero()) {
      std::fprintf(stderr, "gpufleet %s: --time-limit wants a duration such as 170s or 3m, got '%s'\n", cmd.c_str(),
                   a->time_limit.c_str());
      return kExitUsage;
    }
    o.time_limit = *limit;
    if (a->output != "json") std::fprintf(stderr, "running the burn-in (up to %s) ...\n", a->time_limit.c_str());
    auto report = agent::RunNodeCheck(*probe, o);
    if (!report.ok()) {
      std::fprintf(stderr, "gpufleet %s: %s\n", cmd.c_str(), report.status().message().c_str());
      return kExitUsage;
    }
    report->at = Time::FromMillis(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
    auto devices = probe->Devices();
    if (devices.ok() && !devices->empty()) {
      auto m = agent::CatalogModelForDriverName((*devices)[0].name, (*devices)[0].memory_mib, model::GpuCatalog::BuiltIn());
      if (m.ok()) report->gpu_model = *m;
    }
    node::JudgeOptions jo;
    jo.threshold = a->threshold;
    jo.gpu = model::GpuCatalog::BuiltIn().Find(report->gpu_model);
    node::Judge(*report, jo);
    if (a->output == "json") {
      PrintJson(api::ToJson(*report));
    } else {
      std::printf("%s: %d x %s\n", "node check", report->gpus, report->gpu_model.empty() ? "no GPU" : report->gpu_model.c_str());
      PrintBurnIn(api::ToJson(*report));
    }
    return report->passed ? kExitOk : kExitFailed;
  };
}

// --- history --------------------------------------------------------------------------------

// Time spent running, over every attempt, from the transitions.
int64_t RuntimeMs(const json& history, int64_t now_ms) {
  int64_t total = 0, since = -1;
  for (const auto& h : history) {
    int64_t at = IntField(h, "at_ms");
    if (StrField(h, "to") == "running" && since < 0) since = at;
    if (StrField(h, "from") == "running" && StrField(h, "to") != "running" && since >= 0) {
      total += at - since;
      since = -1;
    }
  }
  if (since >= 0) total += now_ms - since;
  return total;
}

// How long a job held its GPUs, from its transitions: the time spent starting, running or
// stopping, over all attempts (a fast job can go from starting straight to succeeded).
int64_t HeldMs(const json& history, int64_t now_ms) {
  auto holds = [](const std::string& state) { return state == "starting" || state == "running" || state == "stopping"; };
  int64_t total = 0, since = -1;
  for (const auto& h : history) {
    int64_t at = IntField(h, "at_ms");
    const bool from = holds(StrField(h, "from")), to = holds(StrField(h, "to"));
    if (to && !from) since = at;
    if (from && !to && since >= 0) {
      total += at - since;
      since = -1;
    }
  }
  if (since >= 0) total += now_ms - since;
  return total;
}

std::function<int()> SetupHistory(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string team;
    int limit = 20;
    bool limit_given = false;
    std::string state;
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("history", "Show recent jobs, finished and current, newest first");
  sub->add_option("--team", a->team, "Only this team's jobs");
  auto* limit_opt = sub->add_option("--limit", a->limit, "At most this many jobs (newest first; -o jsonl: all)")
                       ->check(CLI::Range(1, 100000))
                       ->capture_default_str();
  sub->add_option("--state", a->state,
                  "Only jobs in these states, comma-separated (pending, starting, running, stopping, succeeded, "
                  "failed, cancelled, preempted)");
  sub->add_option("-o,--output", a->output,
                  "table, json, or jsonl: one line per finished job that ran, in the trace format `gpufleet sim` "
                  "and `gpufleet plan` read (submit time, GPUs, work = time it held its GPUs, all attempts)")
      ->check(CLI::IsMember({"table", "json", "jsonl"}))
      ->capture_default_str();
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet history
  gpufleet history --team vision --limit 50
  gpufleet history --state failed,cancelled -o json
  gpufleet history -o jsonl > jobs.jsonl   # then: gpufleet plan --trace jobs.jsonl ...)");
  return [a, limit_opt]() {
    a->limit_given = limit_opt->count() > 0;
    const std::string cmd = "history";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    // A trace wants the whole history, not the last screenful.
    const int64_t limit = a->output == "jsonl" && !a->limit_given ? INT64_MAX : a->limit;
    // Pages of at most 1000 (the controller's largest), newest first, until `limit` jobs.
    constexpr int64_t kPage = 1000;
    json jobs = json::array();
    int64_t cursor = 0;
    for (int64_t seen = 0; seen < limit;) {
      std::map<std::string, std::string> q = {{"limit", std::to_string(std::min(kPage, limit - seen))}};
      if (cursor > 0) q["cursor"] = std::to_string(cursor);
      if (!a->team.empty()) q["team"] = a->team;
      if (!a->state.empty()) q["state"] = a->state;
      ApiResult r = client->Get("/v1/jobs", q);
      if (!r.ok()) return Report(cmd, r);
      const json& page = r.body.value("jobs", json::array());
      for (const auto& j : page) jobs.push_back(j);
      seen += std::min(kPage, limit - seen);
      cursor = IntField(r.body, "next_cursor");
      if (cursor <= 0) break;
    }
    std::stable_sort(jobs.begin(), jobs.end(),
                     [](const json& x, const json& y) { return IntField(x, "id") > IntField(y, "id"); });
    // Runtimes come from each job's transitions; a long listing skips them rather than make
    // hundreds of requests.
    int64_t now = NowMs();
    if (a->output == "jsonl") {
      // The cluster's own history as a trace: each job that ran, with the time it held its GPUs
      // (all attempts) as its work, oldest first.
      std::reverse(jobs.begin(), jobs.end());
      for (const auto& j : jobs) {
        // Finished jobs only: a running one's work is not known yet.
        if (IntField(j, "attempt") == 0 || !IsTerminalState(StrField(j, "state"))) continue;
        ApiResult d = client->Get("/v1/jobs/" + std::to_string(IntField(j, "id")));
        if (!d.ok()) return Report(cmd, d);
        const int64_t work_ms = HeldMs(d.body.value("history", json::array()), now);
        if (work_ms <= 0) continue;
        nlohmann::ordered_json o;
        o["id"] = std::to_string(IntField(j, "id"));
        if (!StrField(j, "name").empty()) o["name"] = StrField(j, "name");
        if (!StrField(j, "team").empty()) o["team"] = StrField(j, "team");
        if (IntField(j, "priority") != 0) o["priority"] = IntField(j, "priority");
        o["submit"] = static_cast<double>(IntField(j, "submitted_ms")) / 1000.0;
        o["work"] = static_cast<double>(work_ms) / 1000.0;
        const json& g = j.value("gpus", json(1));
        const int64_t nodes = IntField(j, "nodes", 1);
        if (g.is_number_float() && g.get<double>() < 1.0) {
          o["gpus"] = 1;
          o["gpu_milli"] = static_cast<int64_t>(g.get<double>() * 1000.0 + 0.5);
        } else if (nodes > 1) {
          o["gpus_per_node"] = g.is_number() ? static_cast<int64_t>(g.get<double>()) : 1;
          o["nodes"] = nodes;
        } else {
          o["gpus"] = g.is_number() ? static_cast<int64_t>(g.get<double>()) : 1;
        }
        if (j.contains("gpu_type") && j["gpu_type"].is_array() && !j["gpu_type"].empty()) {
          o["gpu_models"] = j["gpu_type"];
        } else if (std::string ran_on = j.contains("placement") && j["placement"].is_object()
                                            ? StrField(j["placement"], "gpu_model")
                                            : "";
                   !ran_on.empty()) {
          // A job that named no model: the one it ran on, which is the GPU its work was measured
          // on (the planner's --gpu keeps only the jobs of its model).
          o["gpu_models"] = json::array({ran_on});
        }
        std::printf("%s\n", o.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
      }
      return kExitOk;
    }
    if (jobs.size() <= 200) {
      for (auto& j : jobs) {
        if (IntField(j, "attempt") == 0) {
          j["runtime_ms"] = 0;
          continue;
        }
        ApiResult d = client->Get("/v1/jobs/" + std::to_string(IntField(j, "id")));
        if (d.ok()) j["runtime_ms"] = RuntimeMs(d.body.value("history", json::array()), now);
      }
    }
    if (a->output == "json") {
      PrintJson({{"jobs", jobs}});
      return kExitOk;
    }
    if (jobs.empty()) {
      std::printf("no jobs\n");
      return kExitOk;
    }
    Table t({"ID", "NAME", "TEAM", "STATE", "GPUS", "SUBMITTED", "RUNTIME", "OUTCOME"});
    for (const auto& j : jobs) {
      std::string state = StrField(j, "state");
      std::string outcome = "-";
      if (IsTerminalState(state) || state == "preempted") {
        outcome = StrField(j, "reason");
        if (j.contains("exit_code") && j["exit_code"].is_number() && outcome.find("code") == std::string::npos) {
          outcome = "exit " + j["exit_code"].dump() + (outcome.empty() ? "" : ": " + outcome);
        }
      }
      t.Add({std::to_string(IntField(j, "id")), StrField(j, "name"), StrField(j, "team"), state, GpuText(j),
             Ago(IntField(j, "submitted_ms")), j.contains("runtime_ms") ? Span(IntField(j, "runtime_ms")) : "?",
             outcome});
    }
    t.Print();
    return kExitOk;
  };
}

// --- cost, budget ---------------------------------------------------------------------------

std::string Usd(int64_t micros) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "$%lld.%02lld", static_cast<long long>(micros / 1000000),
                static_cast<long long>(micros % 1000000 / 10000));
  return buf;
}

std::function<int()> SetupCost(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    std::string team;
    std::string since;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("cost", "What jobs and teams have cost, against their budgets");
  sub->add_option("--team", a->team, "Only this team");
  sub->add_option("--since", a->since, "Only jobs submitted in the last DURATION (e.g. 7d, 12h)");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet cost
  gpufleet cost --team vision --since 7d -o json
A job pays its GPUs' share of its nodes' prices while it holds them (agents give their node's price
with --price-per-hour). A node the pool rented is billed whole, from its rent to its release: the
team it was rented for pays what its jobs do not use (RENTED IDLE: booting, idle GPUs, the idle
tail). SPENT counts from the budget period's start and includes RENTED IDLE; RATE is what the
team costs per hour now. A hard budget stops the team early by its jobs' stop grace (and the
pool's release lead) so that the bill ends at the budget; see docs/cost.md.)");
  return [a]() {
    const std::string cmd = "cost";
    std::map<std::string, std::string> query;
    if (!a->team.empty()) query["team"] = a->team;
    if (!a->since.empty()) {
      auto d = ParseDuration(a->since);
      if (!d || *d <= Duration::Zero()) return Fail(cmd, kExitUsage, "--since wants a duration like 7d or 12h");
      query["since_ms"] = std::to_string(NowMs() - d->millis());
    }
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/cost", query);
    if (!r.ok()) return Report(cmd, r);
    if (a->output == "json") {
      PrintJson(r.body);
      return kExitOk;
    }
    Table t({"TEAM", "JOBS COST", "RENTED IDLE", "SPENT", "RATE", "BUDGET", "SOFT", "MAX/H", "STATUS"});
    for (const auto& team : r.body.value("teams", json::array())) {
      const json b = team.value("budget", json::object());
      std::string status = team.value("over_hard", false)   ? "over hard budget: held"
                           : team.value("hard_stop", false) ? "hard budget reached: stopped"
                           : team.value("over_soft", false) ? "over soft budget"
                                                            : "ok";
      auto limit = [&](const char* k) {
        int64_t v = b.value(k, int64_t{0});
        return v > 0 ? Usd(v) : std::string("-");
      };
      t.Add({StrField(team, "team"), Usd(IntField(team, "jobs_cost_micros")),
             Usd(IntField(team, "rented_idle_micros")), Usd(IntField(team, "spent_micros")),
             Usd(IntField(team, "rate_micros_per_hour")) + "/h", limit("hard_micros"), limit("soft_micros"),
             limit("max_rate_micros"), status});
    }
    t.Print();
    std::printf("\ntotal %s over %zu priced job(s)\n", Usd(IntField(r.body, "total_micros")).c_str(),
                r.body.value("jobs", json::array()).size());
    return kExitOk;
  };
}

std::function<int()> SetupBudget(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string team;
    double hard = 0, soft = 0, max_hourly = 0;
    bool keep_running = false;
    std::string period = "none";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("budget", "Set a team's budget (admin): hard and soft limits, max $/h");
  sub->add_option("team", a->team, "The team")->required();
  sub->add_option("--hard", a->hard, "Dollars: no new starts once spent; running jobs are stopped (requeued)")
      ->check(CLI::Range(0.0, 1e12));
  sub->add_option("--soft", a->soft, "Dollars: reported only")->check(CLI::Range(0.0, 1e12));
  sub->add_option("--max-hourly", a->max_hourly, "Dollars per hour the team's running jobs may cost")
      ->check(CLI::Range(0.0, 1e12));
  sub->add_flag("--keep-running", a->keep_running, "At the hard limit, stop admitting but let running jobs finish");
  sub->add_option("--period", a->period,
                  "none: one period from now; daily, weekly, monthly: the budget rolls over at each UTC "
                  "day, Monday or first of the month, and spend counts from zero again")
      ->check(CLI::IsMember({"none", "daily", "weekly", "monthly"}))
      ->capture_default_str();
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet budget vision --hard 5000 --soft 4000 --max-hourly 300
  gpufleet budget vision --hard 20000 --period monthly   # $20k per calendar month (UTC)
  gpufleet budget vision            # no limits: removes the budget
Without --period the budget counts from now: spend before it does not count.)");
  return [a]() {
    const std::string cmd = "budget";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    json body = {{"hard", a->hard},
                 {"soft", a->soft},
                 {"max_hourly", a->max_hourly},
                 {"stop_running", !a->keep_running},
                 {"period", a->period}};
    ApiResult r = client->Post("/v1/teams/" + a->team + "/budget", body);
    if (!r.ok()) return Report(cmd, r);
    std::printf("team %s: hard %s, soft %s, max %s/h, %s\n", a->team.c_str(),
                a->hard > 0 ? Usd(IntField(r.body, "hard_micros")).c_str() : "-",
                a->soft > 0 ? Usd(IntField(r.body, "soft_micros")).c_str() : "-",
                a->max_hourly > 0 ? Usd(IntField(r.body, "max_rate_micros")).c_str() : "-",
                a->period == "none" ? "from now" : (a->period + ", this period from " +
                                                    FormatIso8601(Time::FromMillis(IntField(r.body, "since_ms")))).c_str());
    return kExitOk;
  };
}

// --- quota ----------------------------------------------------------------------------------

std::function<int()> SetupQuota(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    std::string team;
    std::optional<int64_t> gpus, max_running, max_pending;
    std::string model;
    bool borrow = false, no_borrow = false, clear = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "quota", "Show team quotas and limits, or set a team's (admin): guaranteed GPUs, borrowing, job limits");
  sub->add_option("team", a->team, "The team to show or set (default: every team you may see)");
  sub->add_option("--gpus", a->gpus, "GPUs guaranteed to the team (of --model, else of any model); 0 removes it")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  sub->add_option("--model", a->model, "With --gpus: the GPU model they are of (H100, A100-80GB, ...)");
  auto* borrow = sub->add_flag("--borrow", a->borrow, "The team may use idle GPUs beyond its quota (the default)");
  sub->add_flag("--no-borrow", a->no_borrow, "The team never holds more than its quota")->excludes(borrow);
  sub->add_option("--max-running", a->max_running, "Jobs of the team running at once (0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  sub->add_option("--max-pending", a->max_pending,
                  "Jobs of the team waiting at once; submits past it are refused (0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  sub->add_flag("--clear", a->clear, "Start from no quota and no limits (alone: removes them)");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet quota                                      # every team's quota, limits and use
  gpufleet quota vision --gpus 32 --model H100 --borrow   # 32 H100s guaranteed, may borrow idle GPUs
  gpufleet quota vision --gpus 8 --no-borrow           # never more than 8 GPUs of any model
  gpufleet quota nlp --max-running 20 --max-pending 1000
  gpufleet quota nlp --clear                           # no quota, no limits
Quotas order fair-share (--policy fair-share) and what a reclaim gives back; with --no-borrow a team's
jobs wait ('gpufleet explain' says why) rather than go past its quota. Changes add to the team's
current quota; --clear starts afresh.)");
  return [a]() {
    const std::string cmd = "quota";
    const bool set = a->gpus || a->max_running || a->max_pending || a->borrow || a->no_borrow || a->clear;
    if (!a->model.empty() && !a->gpus) return Fail(cmd, kExitUsage, "--model needs --gpus (how many of them)");
    if (set && a->team.empty()) return Fail(cmd, kExitUsage, "name the team to set, e.g. gpufleet quota vision --gpus 8");
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    if (set) {
      json body = json::object();
      if (a->gpus) body["gpus"] = *a->gpus;
      if (!a->model.empty()) body["model"] = a->model;
      if (a->borrow || a->no_borrow) body["borrow"] = a->borrow;
      if (a->max_running) body["max_running_jobs"] = *a->max_running;
      if (a->max_pending) body["max_pending_jobs"] = *a->max_pending;
      if (a->clear) body["clear"] = true;
      ApiResult r = client->Post("/v1/teams/" + a->team + "/quota", body);
      if (!r.ok()) return Report(cmd, r);
      if (a->output == "json") {
        PrintJson(r.body);
        return kExitOk;
      }
    }
    ApiResult r = client->Get("/v1/quotas");
    if (!r.ok()) return Report(cmd, r);
    json teams = json::array();
    for (const auto& t : r.body.value("teams", json::array())) {
      if (a->team.empty() || StrField(t, "team") == a->team) teams.push_back(t);
    }
    if (a->output == "json") {
      PrintJson(json{{"teams", teams}});
      return kExitOk;
    }
    auto number = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, v == static_cast<int64_t>(v) ? "%.0f" : "%.2f", v);
      return std::string(buf);
    };
    auto of = [](int64_t n, int64_t limit) {
      return std::to_string(n) + (limit > 0 ? "/" + std::to_string(limit) : std::string());
    };
    Table t({"TEAM", "GUARANTEED GPUS", "BORROW", "GPUS IN USE", "RUNNING", "PENDING"});
    for (const auto& team : teams) {
      std::string q;
      if (IntField(team, "gpus") > 0) q = std::to_string(IntField(team, "gpus")) + " any";
      const json model_gpus = team.value("model_gpus", json::object());
      for (const auto& [m, g] : model_gpus.items()) {
        q += (q.empty() ? "" : ", ") + std::to_string(g.get<int64_t>()) + " " + m;
      }
      std::string used = number(team.value("used_gpus", 0.0));
      std::string by;
      const json by_model = team.value("used_gpus_by_model", json::object());
      for (const auto& [m, g] : by_model.items()) {
        by += (by.empty() ? "" : ", ") + number(g.get<double>()) + " " + m;
      }
      if (!by.empty()) used += " (" + by + ")";
      t.Add({StrField(team, "team"), q.empty() ? "-" : q, team.value("borrow", true) ? "yes" : "no", used,
             of(IntField(team, "running_jobs"), IntField(team, "max_running_jobs")),
             of(IntField(team, "pending_jobs"), IntField(team, "max_pending_jobs"))});
    }
    if (teams.empty()) {
      std::printf("no team has a quota or jobs%s\n", a->team.empty() ? "" : (" (team " + a->team + ")").c_str());
      return kExitOk;
    }
    t.Print();
    return kExitOk;
  };
}

// --- alerts ---------------------------------------------------------------------------------

std::function<int()> SetupAlerts(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    bool all = false;
    std::string name;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "alerts", "Show the controller's alerts: idle or hot GPUs, silent nodes, stalled jobs, budgets, queue wait");
  sub->add_flag("--all", a->all, "Also show pending alerts and those resolved within the last hour");
  sub->add_option("--name", a->name, "Only this rule (GpuHot, JobStalled, ...)");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet alerts                 # what is firing now
  gpufleet alerts --all           # and what is pending (not yet past its rule's 'for') or resolved
  gpufleet alerts --name JobStalled -o json
Rules and their settings: docs/observability.md (change them with 'gpufleet server --alert-rules FILE').
Firing alerts also go to the webhooks given with --alert-webhook, and show in /metrics as gpufleet_alert.)");
  return [a]() {
    const std::string cmd = "alerts";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/alerts");
    if (!r.ok()) return Report(cmd, r);
    json alerts = json::array();
    for (const auto& al : r.body.value("alerts", json::array())) {
      if (!a->name.empty() && StrField(al, "name") != a->name) continue;
      if (!a->all && StrField(al, "state") != "firing") continue;
      alerts.push_back(al);
    }
    if (a->output == "json") {
      PrintJson(json{{"alerts", alerts}});
      return kExitOk;
    }
    if (alerts.empty()) {
      std::printf("no %salerts%s\n", a->all ? "" : "firing ", a->name.empty() ? "" : (" named " + a->name).c_str());
      if (!r.body.value("enabled", true)) std::printf("(the alert rules are turned off: enabled: false)\n");
      return kExitOk;
    }
    Table t({"STATE", "SEVERITY", "ALERT", "SINCE", "MESSAGE"});
    for (const auto& al : alerts) {
      std::string since = al.contains("fired_at") && al["fired_at"].is_string() ? StrField(al, "fired_at")
                                                                               : StrField(al, "started_at");
      if (StrField(al, "state") == "resolved" && al["resolved_at"].is_string()) since = StrField(al, "resolved_at");
      t.Add({StrField(al, "state"), StrField(al, "severity"), StrField(al, "name"), since, StrField(al, "message")});
    }
    t.Print(std::numeric_limits<size_t>::max());  // the message is the point: never cut it
    return kExitOk;
  };
}

// --- pool -----------------------------------------------------------------------------------

std::function<int()> SetupPool(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("pool", "Show the autoscaling pool: its provider, offers and rented instances");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet pool
  gpufleet pool -o json
The controller rents instances when it runs with --pool FILE (docs/providers.md). STATE: creating
(the provider call is under way), booting (its agent has not registered), up, draining. FOR JOBS:
the jobs the instance was rented for. BILLED TO: the team of the first of them, which pays what jobs
on the instance do not (see gpufleet cost). IDLE FOR: how long an up node has had no job; it is released
after the pool's idle_duration. A controller without a pool answers 'no pool' (exit code 1).)");
  return [a]() {
    const std::string cmd = "pool";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/pool");
    if (!r.ok()) return Report(cmd, r);
    if (a->output == "json") {
      PrintJson(r.body);
      return kExitOk;
    }
    const json& offers = r.body.value("offers", json::array());
    const json& instances = r.body.value("instances", json::array());
    std::printf("provider: %s\n\n", StrField(r.body, "provider").c_str());
    if (offers.empty()) {
      std::printf("no offers: the pool rents nothing\n");
    } else {
      Table t({"OFFER", "GPU", "GPUS", "MARKET", "$/H", "ZONE"});
      for (const auto& o : offers) {
        std::string zone = StrField(o, "zone");
        t.Add({StrField(o, "name"), StrField(o, "gpu"), std::to_string(IntField(o, "gpus")), StrField(o, "market"),
               Usd(IntField(o, "price_micros_per_hour")), zone.empty() ? "-" : zone});
      }
      t.Print();
    }
    std::printf("\n");
    if (instances.empty()) {
      std::printf("no instances rented\n");
      return kExitOk;
    }
    const int64_t now = NowMs();
    Table t({"NAME", "STATE", "OFFER", "AGE", "IDLE FOR", "FOR JOBS", "BILLED TO", "NOTE"});
    for (const auto& i : instances) {
      std::vector<std::string> jobs;
      for (const auto& j : i.value("for_jobs", json::array())) {
        if (j.is_number()) jobs.push_back(std::to_string(j.get<int64_t>()));
      }
      const int64_t created = IntField(i, "created_ms");
      const int64_t idle_since = IntField(i, "idle_since_ms");
      std::string note = StrField(i, "note");
      t.Add({StrField(i, "name"), StrField(i, "state"), StrField(i, "offer"), created > 0 ? Span(now - created) : "-",
             idle_since > 0 ? Span(now - idle_since) : "-", jobs.empty() ? "-" : Join(jobs, ","),
             StrField(i, "team").empty() ? "-" : StrField(i, "team"), note.empty() ? "-" : note});
    }
    t.Print();
    return kExitOk;
  };
}

// --- token, drain, undrain ------------------------------------------------------------------

std::function<int()> SetupToken(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string role = "user";
    std::string team;
    std::string subject;
    std::string ttl;
    bool join = false;
    std::string output = "table";
    std::string id;
  };
  auto a = std::make_shared<Args>();
  CLI::App* token = app.add_subcommand("token", "Make, list and revoke API tokens (admins; team-admins for their team)");
  token->require_subcommand(1);
  CLI::App* create = token->add_subcommand("create", "Create a token and print it (it is shown only this once)");
  create->add_option("--role", a->role, "admin, team-admin, user, viewer or metrics (docs/security.md)")
      ->check(CLI::IsMember({"admin", "team-admin", "user", "viewer", "metrics"}))
      ->capture_default_str();
  create->add_option("--team", a->team, "The team the token acts for (team-admins: always their own)");
  create->add_option("--subject", a->subject, "Who the token is for (a user name; shown in audit records)");
  create->add_option("--ttl", a->ttl, "Expire the token after this long (e.g. 30d, 12h); default: never");
  create->add_flag("--join", a->join, "A join token, for agents to register nodes with (admins)");
  AddOutputFlag(create, a->output);
  AddConnectionFlags(create, a->conn);
  SetFooter(create, R"(  gpufleet token create --subject alice --team vision --ttl 90d
  gpufleet token create --role team-admin --subject carol --team vision
  gpufleet token create --role admin --subject ops
  gpufleet token create --join > join.token   # then: gpufleet agent --join-token-file join.token ...)");
  CLI::App* list = token->add_subcommand("list", "List tokens: id, kind, subject, role, team, created, expiry, last use");
  AddOutputFlag(list, a->output);
  AddConnectionFlags(list, a->conn);
  SetFooter(list, "  gpufleet token list\n  gpufleet token list -o json");
  CLI::App* revoke = token->add_subcommand("revoke", "Revoke a token: it is refused from now on");
  revoke->add_option("id", a->id, "The token's id as 'gpufleet token list' shows it (8 or more hex digits)")->required();
  AddConnectionFlags(revoke, a->conn);
  SetFooter(revoke, "  gpufleet token revoke 4f9c0d2e8a7b");
  token->footer(std::string("Examples:\n  gpufleet token create --subject alice --team vision\n  gpufleet token list\n"
                            "  gpufleet token revoke 4f9c0d2e8a7b\n") +
                kExitCodes);
  return [a, create, list, revoke]() {
    if (list->parsed()) {
      const std::string cmd = "token list";
      auto client = Connect(cmd, a->conn);
      if (!client) return kExitUsage;
      ApiResult r = client->Get("/v1/tokens");
      if (!r.ok()) return Report(cmd, r);
      if (a->output == "json") {
        PrintJson(r.body);
        return kExitOk;
      }
      Table t({"ID", "KIND", "SUBJECT", "ROLE", "TEAM", "CREATED", "EXPIRES", "LAST USED", "STATE"});
      for (const auto& k : r.body.value("tokens", json::array())) {
        int64_t expires = IntField(k, "expires_ms");
        int64_t used = IntField(k, "last_used_ms");
        bool expired = expires > 0 && expires <= NowMs();
        t.Add({StrField(k, "id"), StrField(k, "kind"), StrField(k, "subject"), StrField(k, "role"), StrField(k, "team"),
               Ago(IntField(k, "created_ms")), expires > 0 ? Iso(expires) : "never", used > 0 ? Ago(used) : "never",
               k.value("revoked", false) ? "revoked" : expired ? "expired" : "active"});
      }
      t.Print();
      return kExitOk;
    }
    if (revoke->parsed()) {
      const std::string cmd = "token revoke";
      auto client = Connect(cmd, a->conn);
      if (!client) return kExitUsage;
      ApiResult r = client->Post("/v1/tokens/" + a->id + "/revoke", json::object());
      if (!r.ok()) return Report(cmd, r);
      std::printf("revoked token %s (%s of %s)\n", StrField(r.body, "id").c_str(), StrField(r.body, "role").c_str(),
                  StrField(r.body, "subject").c_str());
      return kExitOk;
    }
    (void)create;
    const std::string cmd = "token create";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    json body = {{"kind", a->join ? "join" : "user"}, {"role", a->role}, {"subject", a->subject}, {"team", a->team}};
    if (!a->ttl.empty()) body["ttl"] = a->ttl;
    ApiResult r = client->Post("/v1/tokens", body);
    if (!r.ok()) return Report(cmd, r);
    if (a->output == "json") {
      PrintJson(r.body);
      return kExitOk;
    }
    std::printf("%s\n", StrField(r.body, "token").c_str());
    std::fprintf(stderr, "created a %s token %s%s%s%s; it is shown only this once\n",
                 a->join ? "join" : StrField(r.body, "role").c_str(), StrField(r.body, "id").c_str(),
                 a->subject.empty() ? "" : (" for " + a->subject).c_str(),
                 StrField(r.body, "team").empty() ? "" : (" (team " + StrField(r.body, "team") + ")").c_str(),
                 IntField(r.body, "expires_ms") > 0 ? (", expires " + Iso(IntField(r.body, "expires_ms"))).c_str() : "");
    return kExitOk;
  };
}

std::function<int()> SetupAudit(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string since;
    std::string subject;
    std::string verb;
    int limit = 100;
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("audit", "The audit log: who changed what, and what was refused (admin)");
  sub->add_option("--since", a->since, "Only records of the last DURATION (e.g. 1d, 30m)");
  sub->add_option("--subject", a->subject, "Only this token subject's records");
  sub->add_option("--verb", a->verb, "Only this verb (job.submit), or a family ending in '.' (job.)");
  sub->add_option("--limit", a->limit, "At most this many records, oldest first")->check(CLI::Range(1, 1000000));
  sub->add_option("-o,--output", a->output, "table, json or jsonl")->check(CLI::IsMember({"table", "json", "jsonl"}))
      ->capture_default_str();
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet audit --since 1d
  gpufleet audit --verb job. --subject alice
  gpufleet audit --verb auth.login -o jsonl     # failed logins, one JSON object a line)");
  return [a]() {
    const std::string cmd = "audit";
    std::map<std::string, std::string> q;
    if (!a->since.empty()) {
      auto d = ParseDuration(a->since);
      if (!d || *d <= Duration::Zero()) return Fail(cmd, kExitUsage, "--since wants a duration like 1d or 30m");
      q["since_ms"] = std::to_string(NowMs() - d->millis());
    }
    if (!a->subject.empty()) q["subject"] = a->subject;
    if (!a->verb.empty()) q["verb"] = a->verb;
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    json records = json::array();
    int64_t cursor = 0;
    while (static_cast<int64_t>(records.size()) < a->limit) {
      q["limit"] = std::to_string(std::min<int64_t>(1000, a->limit - static_cast<int64_t>(records.size())));
      if (cursor > 0) q["cursor"] = std::to_string(cursor);
      ApiResult r = client->Get("/v1/audit", q);
      if (!r.ok()) return Report(cmd, r);
      for (const auto& rec : r.body.value("records", json::array())) records.push_back(rec);
      cursor = IntField(r.body, "next_cursor");
      if (cursor <= 0) break;
    }
    if (a->output == "json") {
      PrintJson(json{{"records", records}});
      return kExitOk;
    }
    if (a->output == "jsonl") {
      for (const auto& rec : records) std::printf("%s\n", rec.dump().c_str());
      return kExitOk;
    }
    Table t({"TIME", "SUBJECT", "ROLE", "SOURCE", "VERB", "OBJECT", "OUTCOME", "WHY"});
    for (const auto& rec : records) {
      t.Add({Iso(IntField(rec, "at_ms")), StrField(rec, "subject").empty() ? "-" : StrField(rec, "subject"),
             StrField(rec, "role").empty() ? "-" : StrField(rec, "role"), StrField(rec, "source"), StrField(rec, "verb"),
             StrField(rec, "object"), StrField(rec, "outcome"), StrField(rec, "reason")});
    }
    t.Print(140);
    return kExitOk;
  };
}

std::function<int()> SetupDrainLike(CLI::App& app, bool drain) {
  struct Args {
    Connection conn;
    std::string node;
  };
  auto a = std::make_shared<Args>();
  const std::string name = drain ? "drain" : "undrain";
  CLI::App* sub = app.add_subcommand(
      name, drain ? "Stop placing new jobs on a node; running jobs finish (admin)" : "Let a drained node take jobs again (admin)");
  sub->add_option("node", a->node, "Node name, as 'gpufleet nodes' shows it")->required();
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, "  gpufleet " + name + " gpu-node-07");
  return [a, name]() {
    auto client = Connect(name, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Post("/v1/nodes/" + a->node + "/" + name, json::object());
    if (!r.ok()) return Report(name, r);
    std::printf("node %s is %s\n", a->node.c_str(), StrField(r.body, "state").c_str());
    return kExitOk;
  };
}

}  // namespace

std::function<int()> SetupSubmitCommand(CLI::App& app) { return SetupSubmit(app); }
std::function<int()> SetupRunCommand(CLI::App& app) { return SetupRun(app); }
std::function<int()> SetupQueueCommand(CLI::App& app) { return SetupQueue(app); }
std::function<int()> SetupStatusCommand(CLI::App& app) { return SetupStatus(app); }
std::function<int()> SetupLogsCommand(CLI::App& app) { return SetupLogs(app); }
std::function<int()> SetupCancelCommand(CLI::App& app) { return SetupCancel(app); }
std::function<int()> SetupExplainCommand(CLI::App& app) { return SetupExplain(app); }
std::function<int()> SetupNodesCommand(CLI::App& app) { return SetupNodes(app); }
std::function<int()> SetupNodeCommand(CLI::App& app) { return SetupNode(app); }
std::function<int()> SetupPoolCommand(CLI::App& app) { return SetupPool(app); }
std::function<int()> SetupHistoryCommand(CLI::App& app) { return SetupHistory(app); }
std::function<int()> SetupTokenCommand(CLI::App& app) { return SetupToken(app); }
std::function<int()> SetupAuditCommand(CLI::App& app) { return SetupAudit(app); }
std::function<int()> SetupDrainCommand(CLI::App& app) { return SetupDrainLike(app, true); }
std::function<int()> SetupCostCommand(CLI::App& app) { return SetupCost(app); }
std::function<int()> SetupBudgetCommand(CLI::App& app) { return SetupBudget(app); }
std::function<int()> SetupQuotaCommand(CLI::App& app) { return SetupQuota(app); }
std::function<int()> SetupAlertsCommand(CLI::App& app) { return SetupAlerts(app); }
std::function<int()> SetupUndrainCommand(CLI::App& app) { return SetupDrainLike(app, false); }

}  // namespace gpufleet::cli
