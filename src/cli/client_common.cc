#include "cli/client_common.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/job_yaml.h"
#include "cost/offer.h"
#include "cli/client.h"
#include "common/strings.h"
#include "common/time.h"

namespace gpufleet::cli::client {

// --- Shared plumbing ------------------------------------------------------------------------

void LogPrinter::Write(int part, const std::string& data, bool prefix) {
  if (!prefix) {
    std::fwrite(data.data(), 1, data.size(), out_);
    std::fflush(out_);
    return;
  }
  if (static_cast<size_t>(part) >= pending_.size()) pending_.resize(part + 1);
  std::string& buf = pending_[part];
  buf += data;
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
    Line(part, std::string_view(buf).substr(start, nl - start));
  }
  buf.erase(0, start);
  std::fflush(out_);
}

void LogPrinter::Flush() {
  for (size_t p = 0; p < pending_.size(); ++p) {
    if (!pending_[p].empty()) Line(static_cast<int>(p), pending_[p]);
    pending_[p].clear();
  }
  std::fflush(out_);
}

void LogPrinter::Line(int part, std::string_view text) {
  std::fprintf(out_, "[part %d] ", part);
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fputc('\n', out_);
}



std::string NonEmptyToken(const std::string& value) {
  // An empty --token (a script's unset variable) must not fall back to the config file's token,
  // often an admin's.
  return value.empty() ? "an empty token; give the token, or leave --token out to use GPUFLEET_TOKEN or the config file's"
                       : "";
}

void AddConnectionFlags(CLI::App* sub, Connection& c) {
  sub->add_option("--server", c.server,
                  "Controller URL, e.g. http://127.0.0.1:8470; several controllers on one store: URL1,URL2,... "
                  "(the CLI follows the leader among them)");
  sub->add_option("--token", c.token, "Bearer token (default: GPUFLEET_TOKEN, else the config file's)")
      ->check(NonEmptyToken);
}

void AddOutputFlag(CLI::App* sub, std::string& output) {
  sub->add_option("-o,--output", output, "table or json (text: the same as table)")
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"text", "table"}}))
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
std::unique_ptr<ApiClient> Connect(const std::string& cmd, const Connection& c, bool needs_token) {
  auto config = LoadClientConfig(c.server, c.token, needs_token);
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

int64_t IntField(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

std::string StrField(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

bool IsTerminalState(const std::string& s) { return s == "succeeded" || s == "failed" || s == "cancelled"; }

// "2x4 H100", "1 A100|H100", "0.5 any", "cpu".
std::string GpuText(const api::JobSummary& j) {
  std::string count;
  if (j.fractional()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(j.gpu_milli) / 1000.0);
    count = buf;
  } else {
    if (j.gpus_per_node == 0) return j.nodes > 1 ? std::to_string(j.nodes) + "x cpu" : "cpu";
    count = j.nodes > 1 ? std::to_string(j.nodes) + "x" + std::to_string(j.gpus_per_node)
                        : std::to_string(j.gpus_per_node);
  }
  std::string model = j.placement ? j.placement->gpu_model : "";
  if (model.empty()) model = Join(j.gpu_models, "|");
  return count + " " + (model.empty() ? "any" : model);
}

Result<std::vector<api::JobSummary>> DecodeJobList(const json& body) {
  return DecodeList(body, "jobs", &api::JobSummaryFromJson);
}

Result<std::vector<api::Transition>> DecodeHistory(const json& job) {
  return DecodeList(job, "history", &api::TransitionFromJson, /*optional=*/true);
}

Result<std::vector<api::NodeSummary>> DecodeNodeList(const json& body) {
  return DecodeList(body, "nodes", &api::NodeSummaryFromJson);
}

Result<std::vector<api::AuditRecord>> DecodeAuditList(const json& body) {
  return DecodeList(body, "records", &api::AuditRecordFromJson);
}

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
    const int64_t first = IntField(jobs.front(), "id"), last = IntField(jobs.back(), "id");
    std::printf("%s %zu jobs: %lld (%s) .. %lld (%s)\n", verb.c_str(), jobs.size(), static_cast<long long>(first),
                StrField(jobs.front(), "name").c_str(), static_cast<long long>(last),
                StrField(jobs.back(), "name").c_str());
    // One submission's ids follow each other: one range names them all.
    if (last - first + 1 == static_cast<int64_t>(jobs.size())) {
      std::printf("('gpufleet cancel %lld-%lld' cancels them all)\n", static_cast<long long>(first),
                  static_cast<long long>(last));
    }
  }
  return out;
}

// After a submit: a job asking for more GPUs on one node than any node has runs split into a gang
// (said, once per shape). A job the cluster as it is can never run (a gang of more nodes than it has)
// waits until such nodes join. Say so, and why, unless a pool may rent them. One explanation per
// distinct shape, so a sweep of a thousand jobs asks once.
void WarnIfNeverRunnable(ApiClient& client, const std::vector<int64_t>& ids,
                         const std::vector<api::JobRequest>& jobs) {
  std::vector<std::string> shapes_seen;
  std::optional<bool> has_pool;
  std::optional<json> offer_list;  // GET /v1/pool's offers (none without a pool), asked once when needed
  auto pool_offers = [&]() -> const json& {
    if (!offer_list) {
      ApiResult p = client.Get("/v1/pool");
      has_pool = p.ok();
      offer_list = p.ok() ? p.body.value("offers", json::array()) : json::array();
    }
    return *offer_list;
  };
  std::optional<json> node_list;  // GET /v1/nodes, asked once when needed
  auto nodes = [&]() -> const json& {
    if (!node_list) {
      ApiResult n = client.Get("/v1/nodes");
      node_list = n.ok() ? n.body.value("nodes", json::array()) : json::array();
    }
    return *node_list;
  };
  for (size_t i = 0; i < ids.size() && i < jobs.size(); ++i) {
    const model::JobSpec& s = jobs[i].spec;
    std::string shape = std::to_string(s.gpus_per_node) + "/" + std::to_string(s.gpu_milli) + "/" +
                        std::to_string(s.nodes) + "/" + Join(s.gpu_models, ",") + "/" + std::to_string(s.cpu_milli) +
                        "/" + std::to_string(s.mem_mib) + "/" + model::MarketPreferenceName(s.market);
    for (const auto& [k, v] : s.constraints) shape += "/" + k + "=" + v;
    if (std::find(shapes_seen.begin(), shapes_seen.end(), shape) != shapes_seen.end()) continue;
    shapes_seen.push_back(shape);
    // One node's worth asked for, more GPUs than any node of its models has: the scheduler runs it
    // as a gang of equal parts (split_large_jobs), its command once per node. Said, as a program
    // that is not distributed would run twice and write its outputs twice.
    if (s.nodes == 1 && !s.fractional() && s.gpus_per_node > 0) {
      // The largest node of its models: the nodes there are, and (only when the job is larger than
      // all of them: most submits ask for no more) those a pool may rent, as the scheduler counts.
      auto largest_of = [&](const json& list, const char* model_field) {
        int largest = 0;
        for (const auto& n : list) {
          if (StrField(n, "state") == "gone") continue;
          const std::string m = StrField(n, model_field);
          if (s.gpu_models.empty() || std::find(s.gpu_models.begin(), s.gpu_models.end(), m) != s.gpu_models.end()) {
            largest = std::max(largest, static_cast<int>(IntField(n, "gpus")));
          }
        }
        return largest;
      };
      int largest = largest_of(nodes(), "gpu_model");
      if (s.gpus_per_node > largest) largest = std::max(largest, largest_of(pool_offers(), "gpu"));
      model::JobSpec split = s;
      model::SplitToFit(split, largest);
      if (split.nodes > 1) {
        std::fprintf(stderr,
                     "warning: job %lld asks for %d GPUs on one node, more than any node has (%d): it runs as %d nodes "
                     "of %d GPU%s, its command once on each node (GPUFLEET_NODE_RANK 0..%d). For one process, ask for "
                     "at most %d GPUs; for a distributed job, say nodes: %d to make it plain\n",
                     static_cast<long long>(ids[i]), s.gpus_per_node, largest, split.nodes, split.gpus_per_node,
                     split.gpus_per_node == 1 ? "" : "s", split.nodes - 1, largest, split.nodes);
      }
    }
    // Memory or CPUs asked for, and nodes of its models that do not enforce limits (no cgroup v2
    // with those controllers): the job may use more there, and others' jobs with it.
    if (s.cpu_milli > 0 || s.mem_mib > 0) {
      std::vector<std::string> loose;
      std::string why;
      bool loose_memory = false, loose_cpu = false;
      for (const auto& node : nodes()) {
        const std::string model = StrField(node, "gpu_model");
        const bool allowed = s.gpu_models.empty() || std::find(s.gpu_models.begin(), s.gpu_models.end(), model) != s.gpu_models.end();
        if (StrField(node, "state") == "gone" || !allowed) continue;
        const json limits = node.value("limits", json());
        const bool memory_loose = s.mem_mib > 0 && limits.is_object() && !limits.value("memory", true);
        const bool cpu_loose = s.cpu_milli > 0 && limits.is_object() && !limits.value("cpu", true);
        if (memory_loose || cpu_loose) {
          if (memory_loose) loose_memory = true;
          if (cpu_loose) loose_cpu = true;
          loose.push_back(StrField(node, "name"));
          if (why.empty()) why = StrField(node, "containment");
        }
      }
      if (!loose.empty()) {
        if (loose.size() > 5) {
          loose.resize(5);
          loose.push_back("...");
        }
        std::fprintf(stderr,
                     "warning: job %lld asks for %s, which nodes %s do not enforce (%s): there it may use more. "
                     "'gpufleet nodes NODE' says why\n",
                     static_cast<long long>(ids[i]),
                     loose_cpu && loose_memory ? "CPUs and memory" : loose_cpu ? "CPUs" : "memory",
                     Join(loose, ", ").c_str(), why.c_str());
      }
    }
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



int StreamLogs(ApiClient& client, const std::string& cmd, int64_t job, const LogOptions& opts) {
  const std::string path = "/v1/jobs/" + std::to_string(job) + "/logs";
  const std::string job_path = "/v1/jobs/" + std::to_string(job);
  int attempt = opts.attempt > 0 ? opts.attempt : (opts.follow ? 1 : 0);
  std::vector<int64_t> offsets;
  LogPrinter printer;
  // A follower rides out a controller restart (a standby taking over, `gpufleet dev` started
  // again): 7 retries, backing off from 250 ms, wait about 30 s in all.
  const ApiClientOptions retry{.retries = opts.follow ? 7 : 0};
  // Following a job that has not started yet: long-poll its attempt 0 (no output), which the
  // controller answers when the job starts, instead of asking for an attempt it does not have.
  bool not_started = false;
  bool printed_any = false;
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
      if (opts.part >= 0 && !parts.empty() && static_cast<size_t>(opts.part) >= parts.size()) {
        printer.Flush();
        return Fail(cmd, kExitUsage, "job " + std::to_string(job) + " has " + std::to_string(parts.size()) +
                                         " part(s), 0 to " + std::to_string(parts.size() - 1) + "; there is no part " +
                                         std::to_string(opts.part));
      }
      if (opts.attempt > 0 && parts.empty()) {
        // No parts: an attempt the job has not had (an older one keeps its logs). Followed, it
        // may still come while the job lives; not once the job has ended.
        ApiResult j = client.Get(job_path, {}, retry);
        const int current = j.ok() ? static_cast<int>(IntField(j.body, "attempt")) : 0;
        const bool ended = j.ok() && IsTerminalState(StrField(j.body, "state"));
        if (j.ok() && opts.attempt > current && (!opts.follow || ended)) {
          printer.Flush();
          return Fail(cmd, kExitUsage, "job " + std::to_string(job) + " is at attempt " + std::to_string(current) +
                                           "; it has no attempt " + std::to_string(opts.attempt));
        }
      }
      if (offsets.size() < parts.size()) offsets.resize(parts.size(), 0);
      if (!opts.follow && !printed_any) {
        // Nothing to show: say why, rather than print nothing and succeed.
        if (parts.empty() && got == 0) {
          if (r.body.value("finished", false)) {
            std::fprintf(stderr, "%s: job %lld ended without starting: no output\n", ("gpufleet " + cmd).c_str(),
                         static_cast<long long>(job));
          } else {
            std::fprintf(stderr,
                         "%s: job %lld has not started yet: no output (follow it with 'gpufleet logs -f %lld')\n",
                         ("gpufleet " + cmd).c_str(), static_cast<long long>(job), static_cast<long long>(job));
          }
        }
        for (const auto& p : parts) {
          if (!p.value("missing", false) || (opts.part >= 0 && IntField(p, "part") != opts.part)) continue;
          std::fprintf(stderr,
                       "%s: part %lld of job %lld (attempt %d) has no log on this controller: it wrote no output, or "
                       "its log stayed with the controller that led when it ran (before a takeover or a restore; "
                       "docs/operations.md)\n",
                       ("gpufleet " + cmd).c_str(), static_cast<long long>(IntField(p, "part")),
                       static_cast<long long>(job), got);
        }
      }
      bool any = false;
      bool prefix = parts.size() > 1 && opts.part < 0;
      for (const auto& p : parts) {
        int idx = static_cast<int>(IntField(p, "part"));
        std::string data = StrField(p, "data");
        if (data.empty() || idx < 0 || static_cast<size_t>(idx) >= offsets.size()) continue;
        any = true;
        // Where the controller's copy goes on (a controller without next_offset: after the data).
        const int64_t next = p.contains("next_offset") ? IntField(p, "next_offset") : 0;
        offsets[idx] = next > offsets[idx] ? next : offsets[idx] + static_cast<int64_t>(data.size());
        if (opts.part < 0 || opts.part == idx) printer.Write(idx, data, prefix);
        printed_any = true;
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
    if (IsTerminalState(StrField(j.body, "state"))) {
      if (current == 0 && !printed_any) {
        // Followed while it waited, and it ended (cancelled, failed to start) without a run.
        std::fprintf(stderr, "%s: job %lld ended without starting (%s): no output\n", ("gpufleet " + cmd).c_str(),
                     static_cast<long long>(job), StrField(j.body, "state").c_str());
      }
      break;
    }
  }
  printer.Flush();
  return kExitOk;
}

int64_t RuntimeMs(const std::vector<api::Transition>& history, int64_t now_ms) {
  auto holds = [](api::JobState s) { return s == api::JobState::kRunning || s == api::JobState::kStopping; };
  int64_t total = 0, since = -1;
  for (const api::Transition& h : history) {
    const int64_t at = h.at.millis();
    if (h.to == api::JobState::kRunning && since < 0) since = at;
    if (holds(h.from) && !holds(h.to) && since >= 0) {
      total += at - since;
      since = -1;
    }
  }
  if (since >= 0) total += now_ms - since;
  return total;
}

// Jobs that name no working directory run in the one they were submitted from, as with sbatch
// (on a cluster without a shared filesystem, give `workdir` explicitly).
std::string CurrentDir() {
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  return ec ? std::string() : cwd;
}

// --- submit ---------------------------------------------------------------------------------

std::string UsdExact(int64_t micros) {
  if (micros % 10000 == 0) return Usd(micros);
  std::string s = cost::FormatUsd(micros, 6);  // every digit, trailing zeros dropped
  while (s.back() == '0') s.pop_back();
  return s;
}

std::string Usd(int64_t micros) {
  // Rounded to the cent, as the dashboard and the JSON's consumers round.
  const bool neg = micros < 0;
  const int64_t cents = ((neg ? -micros : micros) + 5000) / 10000;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s$%lld.%02lld", neg ? "-" : "", static_cast<long long>(cents / 100),
                static_cast<long long>(cents % 100));
  return buf;
}

std::string RedactSecrets(std::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t at = text.find("gf_", i);
    if (at == std::string_view::npos) break;
    size_t k = at + 3;
    while (k < text.size() && std::islower(static_cast<unsigned char>(text[k]))) ++k;
    size_t h = k < text.size() && text[k] == '_' && k > at + 3 ? k + 1 : std::string_view::npos;
    size_t end = h;
    while (end != std::string_view::npos && end < text.size() && std::isxdigit(static_cast<unsigned char>(text[end]))) {
      ++end;
    }
    if (h == std::string_view::npos || end - h < 8) {
      out.append(text.substr(i, at + 3 - i));
      i = at + 3;
      continue;
    }
    out.append(text.substr(i, h - i));
    out.append("\u2026");
    i = end;
  }
  out.append(text.substr(i));
  return out;
}


}  // namespace gpufleet::cli::client
