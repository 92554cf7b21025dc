#include "cli/client_commands.h"

#include <fnmatch.h>
#include <signal.h>
#include <unistd.h>


#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/job_summary.h"
#include "api/job_yaml.h"
#include "cli/client.h"
#include "cli/client_common.h"
#include "common/read_file.h"
#include "cli/cluster_history.h"
#include "common/strings.h"
#include "common/time.h"
#include "model/gpu_speeds.h"

// The job commands: submit, run, queue, status, logs, cancel, explain, history.

namespace gpufleet::cli {

namespace {

using namespace client;  // NOLINT(build/namespaces): the shared plumbing of the client commands

// A CLI11 check: an empty --request-id (a script's unset variable) would quietly be a random one,
// and a retry of the submission would create its jobs again.
std::string NonEmptyRequestId(const std::string& value) {
  return value.empty() ? "an empty request id; give one, or leave --request-id out for a random one" : "";
}

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
                  "Idempotency key: submitting again with the same id creates nothing new (default: random)")
      ->check(NonEmptyRequestId);
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet submit train.yaml
  gpufleet submit sweep.yaml --request-id sweep-2024-06-01   # safe to repeat
  gpufleet submit train.yaml -o json
The file is checked here first; an error names file:line:column and the field.)");
  return [a]() {
    const std::string cmd = "submit";
    auto read = ReadFileText(a->file);
    if (!read.ok()) return Fail(cmd, kExitUsage, read.status().message());
    std::string text = std::move(*read);
    api::JobParseOptions opts;
    opts.source = a->file;
    // A workload class is checked against the shipped speed table where there is one.
    if (const auto& speeds = model::GpuSpeeds::Shipped(); speeds.ok()) opts.speeds = &*speeds;
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

// The job parser's message about the job `run` made from its flags, told in flags: "--gpus: must
// be from 0 to 1024 per node, got -1", not "gpufleet run:1:36: resources.gpus: ...".
std::string RunFlagError(const std::string& message) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"resources.gpus", "--gpus"}, {"resources.nodes", "--nodes"}, {"resources.gpu_type", "--gpu-type"},
      {"restart.max_restarts_on_errors", "--max-restarts"}, {"watchdog.stall_timeout", "--stall-timeout"},
      {"watchdog.on_stall", "--on-stall"}, {"checkpoint.dir", "--checkpoint-dir"}, {"priority", "--priority"},
      {"name", "--name"}, {"team", "--team"}, {"env", "--env"}, {"workdir", "--workdir"},
      {"process_per_gpu", "--process-per-gpu"}, {"run", "the command"}};
  std::string m = message;
  const std::string source = "gpufleet run:";
  if (m.rfind(source, 0) == 0) {
    // gpufleet run:LINE:COLUMN: what
    size_t at = source.size();
    for (int field = 0; field < 2; ++field) {
      const size_t colon = m.find(':', at);
      if (colon == std::string::npos || colon == at ||
          m.find_first_not_of("0123456789", at) != colon) {
        at = std::string::npos;
        break;
      }
      at = colon + 1;
    }
    if (at != std::string::npos) m = m.substr(at + (at < m.size() && m[at] == ' ' ? 1 : 0));
  }
  for (const auto& [field, flag] : kFlags) {
    const size_t n = std::strlen(field);
    if (m.compare(0, n, field) == 0 && (m.size() == n || m[n] == ':' || m[n] == '.' || m[n] == '[' || m[n] == ' ')) {
      return flag + (m.size() > n && m[n] == '.' ? " " + m.substr(n + 1) : m.substr(n));  // --env 1A: ...
    }
  }
  return m;
}

// Ctrl-C (or SIGTERM) while `run -f` follows its job: the CLI stops following, the job runs on.
// Prints that, with the commands to follow or cancel it, and exits 130 (as the shell reports an
// interrupted command). The text is made before: a signal handler may only write it.
char g_interrupted_text[256];
size_t g_interrupted_len = 0;
extern "C" void OnFollowInterrupted(int) {
  ssize_t unused = ::write(2, g_interrupted_text, g_interrupted_len);
  (void)unused;
  ::_exit(130);
}
void SayJobGoesOnWhenInterrupted(int64_t id) {
  const int n = std::snprintf(g_interrupted_text, sizeof g_interrupted_text,
                              "\ngpufleet run: stopped following job %lld; it goes on running ('gpufleet logs -f %lld' "
                              "follows it again, 'gpufleet cancel %lld' stops it)\n",
                              static_cast<long long>(id), static_cast<long long>(id), static_cast<long long>(id));
  g_interrupted_len = n > 0 ? std::min(static_cast<size_t>(n), sizeof g_interrupted_text - 1) : 0;
  struct sigaction sa {};
  sa.sa_handler = OnFollowInterrupted;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

// After following a job to its end: says how it ended (on stderr, after its output) and exits 0
// only if it succeeded, so that `gpufleet run -f ... && next` and `gpufleet logs -f N && next` go
// on only after a success.
int EndedJobExit(ApiClient& client, const std::string& cmd, int64_t id) {
  ApiResult j = client.Get("/v1/jobs/" + std::to_string(id), {}, {.retries = kSubmitRetries});
  if (!j.ok()) return Report(cmd, j);
  auto done = api::JobSummaryFromJson(j.body);
  if (!done.ok()) return Fail(cmd, kExitFailed, "the controller's answer: " + done.status().message());
  std::fprintf(stderr, "job %lld %s: %s\n", static_cast<long long>(id), api::JobStateName(done->state),
               Printable(done->reason).c_str());
  return done->state == api::JobState::kSucceeded ? kExitOk : kExitFailed;
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
  sub->add_option("--workdir", a->workdir, "Working directory on the node (default: the directory you run this from; the node must allow it)");
  sub->add_option("--checkpoint-dir", a->checkpoint_dir, "GPUFLEET_CHECKPOINT_DIR for the job");
  a->restarts_opt = sub->add_option("--max-restarts", a->max_restarts, "Requeue after a non-zero exit this many times");
  sub->add_option("--stall-timeout", a->stall_timeout,
                  "Watchdog: flag the job when it made no progress (GPUFLEET_PROGRESS), wrote no output and kept "
                  "its GPUs idle this long, e.g. 15m (docs/observability.md)");
  sub->add_option("--on-stall", a->on_stall, "With --stall-timeout: alert (default) or restart from its checkpoint")
      ->check(CLI::IsMember({"alert", "restart"}));
  sub->add_flag("--process-per-gpu", a->process_per_gpu, "Start one process per GPU with RANK and LOCAL_RANK");
  sub->add_flag("-f,--follow", a->follow, "Stream the job's logs until it ends; exit 0 if it succeeded, else 1 (Ctrl-C stops following; the job goes on)");
  sub->add_option("--request-id", a->request_id, "Idempotency key (default: random)")->check(NonEmptyRequestId);
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
        if (env.contains(kv.substr(0, eq))) {
          return Fail(cmd, kExitUsage, "--env " + kv.substr(0, eq) + " is given twice; give each variable once");
        }
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
    if (a->follow && a->output != "table") {
      return Fail(cmd, kExitUsage,
                  "-f streams the job's logs as text, which -o " + a->output +
                      " would mix into; drop -f and read them with `gpufleet logs -f ID`, or drop -o");
    }
    api::JobParseOptions opts;
    opts.source = "gpufleet run";
    auto jobs = api::ParseJobs(job.dump(), opts);
    if (!jobs.ok()) return Fail(cmd, kExitUsage, RunFlagError(jobs.status().message()));
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    json spec = api::ToJobJson(jobs->front());
    if (a->team.empty()) spec.erase("team");  // the token's team, which the controller fills in
    json body = {{"request_id", a->request_id.empty() ? RandomRequestId() : a->request_id},
                 {"job", std::move(spec)},
                 {"default_workdir", CurrentDir()}};
    SubmitOutcome s = PostJobs(*client, cmd, body, a->follow ? "table" : a->output);
    if (s.exit_code == kExitOk) WarnIfNeverRunnable(*client, s.ids, *jobs);
    if (s.exit_code != kExitOk || !a->follow || s.ids.empty()) return s.exit_code;
    std::fflush(stdout);
    int64_t id = s.ids.front();
    // Interrupted while following: the job goes on; say so, and how to stop it.
    SayJobGoesOnWhenInterrupted(id);
    int rc = StreamLogs(*client, cmd, id, {.follow = true});
    if (rc != kExitOk) return rc;
    return EndedJobExit(*client, cmd, id);
  };
}

// --- queue ----------------------------------------------------------------------------------

std::function<int()> SetupQueue(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    int64_t limit = 1000;
    bool all = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("queue", "Show running and pending jobs, pending ones in queue order");
  auto* limit_opt = sub->add_option("--limit", a->limit, "At most this many jobs, running ones first")
                        ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
                        ->capture_default_str();
  sub->add_flag("--all", a->all, "Every job in the queue, however many (read 1,000 at a time)")->excludes(limit_opt);
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet queue
  gpufleet queue --limit 20                  # the running jobs and the next to start
  gpufleet queue --all -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))'

When more jobs wait than are shown, a last line says how many (the table) or the JSON carries
"total" and "next_cursor" (GET /v1/queue?cursor=K goes on from there).)");
  return [a]() {
    const std::string cmd = "queue";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    // Pages of at most 1000 (the controller's largest) until the limit or the queue's end. The
    // cursor is an index into the queue as it stands, so a job that moved between two pages may
    // come twice: the first sighting is kept.
    constexpr int64_t kPage = 1000;
    const int64_t want = a->all ? INT64_MAX : a->limit;
    std::vector<api::JobSummary> jobs;
    std::set<int64_t> seen;
    json raw = json::array();
    int64_t cursor = 0;
    int64_t total = 0;
    int64_t next = 0;
    while (static_cast<int64_t>(jobs.size()) < want) {
      std::map<std::string, std::string> q = {
          {"limit", std::to_string(std::min(kPage, want - static_cast<int64_t>(jobs.size())))}};
      if (cursor > 0) q["cursor"] = std::to_string(cursor);
      ApiResult r = client->Get("/v1/queue", q);
      if (!r.ok()) return Report(cmd, r);
      auto page = DecodeJobList(r.body);
      if (!page.ok()) return Fail(cmd, kExitFailed, "the controller's answer: " + page.status().message());
      const json& listed = r.body.contains("jobs") && r.body["jobs"].is_array() ? r.body["jobs"] : json::array();
      for (size_t i = 0; i < page->size(); ++i) {
        if (!seen.insert((*page)[i].id.value()).second) continue;
        jobs.push_back((*page)[i]);
        if (i < listed.size()) raw.push_back(listed[i]);
      }
      total = IntField(r.body, "total", static_cast<int64_t>(jobs.size()));
      next = IntField(r.body, "next_cursor");
      if (next <= cursor || page->empty()) break;
      cursor = next;
    }
    const bool more = next > 0 && static_cast<int64_t>(jobs.size()) < total;
    if (a->output == "json") {
      json out = {{"jobs", raw}, {"total", total}};
      if (more) out["next_cursor"] = next;
      PrintJson(out);
      return kExitOk;
    }
    if (jobs.empty()) {
      std::printf("no jobs running or pending\n");
      return kExitOk;
    }
    Table t({"ID", "NAME", "TEAM", "STATE", "GPUS", "POSITION", "AGE/RUNTIME", "REASON"});
    for (const api::JobSummary& j : jobs) {
      const int64_t pos = j.position.value_or(0);
      // Pending: how long it has waited; otherwise how long since it entered its state.
      std::string age = j.state == api::JobState::kPending ? Span(NowMs() - j.submitted.millis())
                                                           : Span(NowMs() - j.updated.millis());
      t.Add({std::to_string(j.id.value()), j.name, j.team, api::JobStateName(j.state), GpuText(j),
             pos > 0 ? std::to_string(pos) : "-", age, j.reason});
    }
    t.Print();
    if (more) {
      std::printf("(%zu of %lld jobs shown; --all shows every one, --limit N the first N)\n", jobs.size(),
                  static_cast<long long>(total));
    }
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
  auto nodes = DecodeNodeList(r.body);
  if (!nodes.ok()) return names;
  for (const api::NodeSummary& n : *nodes) names[n.id.value()] = n.name;
  return names;
}

std::string PlacementText(const model::Placement& placement, const std::map<int64_t, std::string>& names) {
  std::vector<std::string> parts;
  int rank = 0;
  for (const model::NodeAssignment& p : placement.parts) {
    auto it = names.find(p.node.value());
    std::string where = it != names.end() ? it->second : "node " + std::to_string(p.node.value());
    std::vector<std::string> gpus;
    for (int g : p.gpus) gpus.push_back(std::to_string(g));
    std::string part = where + (gpus.empty() ? "" : " GPUs " + Join(gpus, ","));
    if (p.gpu_milli < model::kMilliGpuPerGpu) part += " (" + std::to_string(p.gpu_milli) + " milli-GPU)";
    parts.push_back(placement.parts.size() > 1 ? "part " + std::to_string(rank) + ": " + part : part);
    ++rank;
  }
  return Join(parts, "; ") + (placement.gpu_model.empty() ? "" : " [" + placement.gpu_model + "]");
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
      std::printf("  %-11s %s\n", key, Printable(value).c_str());
    };
    auto job = api::JobSummaryFromJson(j);
    if (!job.ok()) return Fail(cmd, kExitFailed, "the controller's answer: " + job.status().message());
    auto history = DecodeHistory(j);
    if (!history.ok()) return Fail(cmd, kExitFailed, "the controller's answer: " + history.status().message());
    std::printf("job %lld (%s)\n", static_cast<long long>(job->id.value()), Printable(job->name).c_str());
    line("team:", job->team);
    const std::string state = api::JobStateName(job->state);
    line("state:", state + (job->reason.empty() ? "" : " (" + job->reason + ")"));
    line("priority:", std::to_string(job->priority));
    api::JobSummary per_node = *job;
    per_node.nodes = 1;  // "2 nodes x 4 H100 GPUs each"
    std::string gpus = GpuText(per_node);
    std::string res = gpus == "cpu" ? "no GPU" : gpus + " GPU" + (gpus.rfind("1 ", 0) == 0 ? "" : "s");
    if (job->nodes > 1) res = std::to_string(job->nodes) + " nodes x " + res + " each";
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
    line("submitted:", Iso(job->submitted.millis()) + " (" + Ago(job->submitted.millis()) + ")");
    line("attempt:", std::to_string(job->attempt));
    if (job->placement) {
      // A pending job's placement is its last run's (requeued after a preemption or a lost node).
      const char* label = IsTerminalState(state) ? "ran on:" : state == "pending" ? "last run:" : "placement:";
      line(label, PlacementText(*job->placement, NodeNames(*client)));
    }
    if (job->exit_code) line("exit code:", std::to_string(*job->exit_code));
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
    for (const api::Transition& h : *history) {
      t.Add({"  " + Iso(h.at.millis()), api::JobStateName(h.from), api::JobStateName(h.to), h.reason});
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
      ->check(CLI::Range(1, 1000000000));
  sub->add_option("--part", a->part, "Only this part of a gang (node rank, from 0)")
      ->check(CLI::Range(0, 100000));
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet logs 12
  gpufleet logs -f 12              # follow until the job ends
  gpufleet logs --attempt 1 12     # the run before a restart
  gpufleet logs --part 1 12        # node rank 1 of a gang (else lines read '[part N] ...')
With -f (and no --attempt) the exit status is the job's: 0 when it succeeded, 1 when it failed or
was cancelled (how it ended is printed on stderr after its output).)");
  return [a]() {
    const std::string cmd = "logs";
    auto id = ParseJobId(a->job);
    if (!id) return Fail(cmd, kExitUsage, "JOB must be a job number, got '" + a->job + "'");
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    const int rc = StreamLogs(*client, cmd, *id, {.follow = a->follow, .attempt = a->attempt, .part = a->part});
    // Followed to its end (every attempt, not one asked for): how it ended decides the exit.
    if (rc != kExitOk || !a->follow || a->attempt > 0) return rc;
    return EndedJobExit(*client, cmd, *id);
  };
}

// --- cancel ---------------------------------------------------------------------------------

// The jobs `cancel` names: ids and ranges ("4-100003"), each id once, ascending. Empty after
// printing why on a word that is neither.
std::optional<std::vector<int64_t>> CancelIds(const std::string& cmd, const std::vector<std::string>& words) {
  constexpr int64_t kMaxRange = 10'000'000;
  std::vector<int64_t> ids;
  for (const auto& w : words) {
    if (auto dash = w.find('-', w.rfind("job-", 0) == 0 ? 4 : 0); dash != std::string::npos && dash > 0) {
      auto lo = ParseJobId(w.substr(0, dash));
      auto hi = ParseJobId(w.substr(dash + 1));
      if (!lo || !hi || *lo < 1 || *hi < *lo) {
        Fail(cmd, kExitUsage, "a range of jobs is FIRST-LAST with 1 <= FIRST <= LAST (as '4-100003'), got '" + w + "'");
        return std::nullopt;
      }
      if (*hi - *lo + 1 > kMaxRange - static_cast<int64_t>(ids.size())) {
        Fail(cmd, kExitUsage, "the jobs named come to more than " + std::to_string(kMaxRange) + " (the range '" + w +
                                  "' names " + std::to_string(*hi - *lo + 1) + "); cancel them in parts");
        return std::nullopt;
      }
      for (int64_t id = *lo; id <= *hi; ++id) ids.push_back(id);
      continue;
    }
    auto id = ParseJobId(w);
    if (!id) {
      Fail(cmd, kExitUsage, "JOB must be a job number or a range FIRST-LAST, got '" + w + "'");
      return std::nullopt;
    }
    ids.push_back(*id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// One reading of the queue (GET /v1/queue, every page): the ids of the unfinished jobs whose state,
// name and team match the filters given (empty: any), and how many pages it took; nullopt after
// printing why the queue could not be read.
struct QueueReading {
  std::map<int64_t, std::string> teams;  // each matching job's team, by id
  int pages = 0;
};
std::optional<QueueReading> ReadQueueOnce(const std::string& cmd, ApiClient& client,
                                          const std::vector<api::JobState>& states, const std::string& name,
                                          const std::string& team) {
  QueueReading out;
  for (int64_t cursor = 0;;) {
    ++out.pages;
    std::map<std::string, std::string> q = {{"limit", "1000"}};
    if (cursor > 0) q["cursor"] = std::to_string(cursor);
    ApiResult r = client.Get("/v1/queue", q);
    if (!r.ok()) {
      Report(cmd, r);
      return std::nullopt;
    }
    auto page = DecodeJobList(r.body);
    if (!page.ok()) {
      Fail(cmd, kExitFailed, "the controller's answer: " + page.status().message());
      return std::nullopt;
    }
    for (const api::JobSummary& j : *page) {
      if (!states.empty() && std::find(states.begin(), states.end(), j.state) == states.end()) continue;
      if (!name.empty() && fnmatch(name.c_str(), j.name.c_str(), 0) != 0) continue;
      if (!team.empty() && j.team != team) continue;
      out.teams[j.id.value()] = j.team;
    }
    const int64_t next = IntField(r.body, "next_cursor");
    if (next <= cursor || page->empty()) return out;
    cursor = next;
  }
}

// The matching unfinished jobs, ascending. The queue is paged by position: a job that leaves it
// (or moves up) between two pages shifts the next page past one job, so a queue of several pages
// is read again until a reading finds nothing new (at most five readings).
// Each with its team.
std::optional<std::map<int64_t, std::string>> QueuedIds(const std::string& cmd, ApiClient& client,
                                                        const std::vector<api::JobState>& states,
                                                        const std::string& name, const std::string& team) {
  std::map<int64_t, std::string> found;
  for (int reading = 0; reading < 5; ++reading) {
    const size_t before = found.size();
    auto once = ReadQueueOnce(cmd, client, states, name, team);
    if (!once) return std::nullopt;
    found.insert(once->teams.begin(), once->teams.end());
    if (once->pages == 1 || (reading > 0 && found.size() == before)) break;
  }
  return found;
}

std::function<int()> SetupCancel(CLI::App& app) {
  struct Args {
    Connection conn;
    std::vector<std::string> jobs;
    std::string output = "table";
    std::string state, name, team;
    bool dry_run = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("cancel", "Cancel jobs: pending ones leave the queue, running ones are stopped");
  sub->add_option("jobs", a->jobs, "Job ids, or ranges FIRST-LAST (an array's tasks)");
  sub->add_option("--state", a->state,
                  "Instead of ids: the unfinished jobs in these states (one comma-separated list, lowercase: pending, "
                  "starting, running, stopping, preempted); a job that has left them by the cancel is left alone");
  sub->add_option("--name", a->name,
                  "Instead of ids: the unfinished jobs whose name matches this shell pattern ('sweep-*', case-sensitive)");
  sub->add_option("--team", a->team,
                  "Instead of ids: the unfinished jobs of this team (with any filter, other teams' jobs your token may "
                  "not cancel are left alone)");
  sub->add_flag("--dry-run", a->dry_run, "Print the jobs the filters select and cancel nothing");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet cancel 12
  gpufleet cancel 12 13 14
  gpufleet cancel 4-100003          # the tasks of an array ('submit' printed the first and last)
  gpufleet cancel 4-100003 -o json  # the ids cancelled, stopping, and those that had ended
  gpufleet cancel --state pending --name 'sweep-*' --dry-run   # which waiting sweep jobs
  gpufleet cancel --state pending --team vision                 # every waiting job of team vision
A running job gets its checkpoint signal (default SIGTERM), a grace period, then SIGKILL.
Several jobs are cancelled in one request (100,000 a request): every one is checked first, and
if one does not exist or is another team's, none of that request's jobs is cancelled. Exit 1
when a job named had already ended (the others are cancelled).)");
  return [a]() {
    const std::string cmd = "cancel";
    const bool filtered = !a->state.empty() || !a->name.empty() || !a->team.empty();
    if (filtered == !a->jobs.empty()) {
      return Fail(cmd, kExitUsage,
                  filtered ? "name jobs by ids or by --state/--name/--team, not both"
                           : "name the jobs to cancel: ids, ranges (4-100003), or --state/--name/--team");
    }
    if (a->dry_run && !filtered) return Fail(cmd, kExitUsage, "--dry-run goes with --state, --name or --team");
    std::vector<api::JobState> states;
    if (!a->state.empty() && Trim(a->state).find_first_not_of(", ") == std::string::npos) {
      return Fail(cmd, kExitUsage, "--state: name at least one state (pending, starting, running, stopping, preempted)");
    }
    for (const auto& word : Split(a->state, ',')) {
      if (Trim(word).empty()) continue;
      auto st = api::ParseJobState(std::string(Trim(word)));
      if (!st.ok() || api::IsTerminal(*st)) {
        return Fail(cmd, kExitUsage,
                    "--state: '" + std::string(Trim(word)) +
                        "' is not a state an unfinished job has (pending, starting, running, stopping, preempted)");
      }
      states.push_back(*st);
    }
    std::optional<std::vector<int64_t>> ids;
    if (!filtered) {
      ids = CancelIds(cmd, a->jobs);
      if (!ids) return kExitUsage;
    }
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    if (filtered) {
      auto chosen = QueuedIds(cmd, *client, states, a->name, a->team);
      if (!chosen) return kExitFailed;
      ids.emplace();
      std::map<std::string, int64_t> by_team;
      for (const auto& [id, team] : *chosen) {
        ids->push_back(id);
        ++by_team[team];
      }
      if (a->dry_run || ids->empty()) {
        if (a->output == "json") {
          PrintJson(a->dry_run ? json{{"selected", *ids}, {"teams", by_team}}
                               : json{{"cancel_requested", false}, {"cancelled", json::array()},
                                      {"stopping", json::array()}, {"ended", json::array()}, {"skipped", json::array()}});
        } else if (ids->empty()) {
          std::printf("no unfinished job matches\n");
        } else {
          std::printf("%zu job(s) match: %s\n", ids->size(), api::JobsAuditObject(*ids).c_str());
          if (by_team.size() > 1) {
            // The cancel leaves alone the jobs the token may not cancel (skip_other_teams): say
            // whose they are, which the listing shows and the token's rights decide.
            std::string teams;
            for (const auto& [team, n] : by_team) teams += (teams.empty() ? "" : ", ") + Printable(team) + " " + std::to_string(n);
            std::printf("  by team: %s (a cancel leaves alone the jobs of teams your token may not cancel)\n",
                        teams.c_str());
          }
        }
        return kExitOk;
      }
    }
    const bool one = a->jobs.size() == 1 && ParseJobId(a->jobs[0]).has_value();
    if (one && a->output != "json") {
      ApiResult r = client->Post("/v1/jobs/" + std::to_string(ids->front()) + "/cancel", json::object());
      if (!r.ok()) return Report(cmd, r);
      std::printf("cancel requested for job %lld\n", static_cast<long long>(ids->front()));
      return kExitOk;
    }
    // Many: 100,000 a request, each checked as a whole by the controller.
    constexpr size_t kPerRequest = 100'000;
    json all = {{"cancelled", json::array()}, {"stopping", json::array()}, {"ended", json::array()},
                {"skipped", json::array()}};
    for (size_t at = 0; at < ids->size(); at += kPerRequest) {
      const size_t end = std::min(ids->size(), at + kPerRequest);
      json body = {{"ids", std::vector<int64_t>(ids->begin() + static_cast<std::ptrdiff_t>(at),
                                                ids->begin() + static_cast<std::ptrdiff_t>(end))}};
      if (filtered) {
        // What the filters chose, as it stands at the cancel: only jobs still in those states, and
        // other teams' jobs left alone rather than refusing the rest.
        body["skip_other_teams"] = true;
        if (!states.empty()) {
          json names = json::array();
          for (api::JobState st : states) names.push_back(api::JobStateName(st));
          body["states"] = std::move(names);
        }
      }
      ApiResult r = client->Post("/v1/jobs/cancel", body);
      if (!r.ok()) {
        if (at > 0) {
          // What the requests before this one did stands; this one's jobs and those after are untouched.
          if (a->output == "json") {
            all["cancel_requested"] = !all["cancelled"].empty() || !all["stopping"].empty();
            all["not_sent_from"] = (*ids)[at];
            PrintJson(all);
          }
          // One account of both: the requests that went through, then the one refused (whose
          // "nothing was cancelled" is about its own jobs) and what was not sent after it.
          return Fail(cmd, r.exit_code,
                      "the jobs up to job " + std::to_string((*ids)[at - 1]) + " went in " +
                          std::to_string(at / kPerRequest) + " request(s) of 100,000: " +
                          std::to_string(all["cancelled"].size()) + " cancelled, " +
                          std::to_string(all["stopping"].size()) + " stopping, " + std::to_string(all["ended"].size()) +
                          " had ended. The next request, from job " + std::to_string((*ids)[at]) +
                          ", was refused, and its jobs and those after it (" + std::to_string(ids->size() - at) +
                          " in all) were left as they were; the controller said of that request: " + r.error);
        }
        return Report(cmd, r);
      }
      for (const char* k : {"cancelled", "stopping", "ended", "skipped"}) {
        for (const auto& v : r.body.value(k, json::array())) all[k].push_back(v);
      }
    }
    const json& ended = all["ended"];
    // Named jobs that had ended are a failure, as for one job; jobs a filter chose that ended on
    // their own before the cancel are not.
    const int done_rc = ended.empty() || filtered ? kExitOk : kExitFailed;
    if (a->output == "json") {
      all["cancel_requested"] = !all["cancelled"].empty() || !all["stopping"].empty();
      PrintJson(all);
      return done_rc;
    }
    const size_t waiting = all["cancelled"].size(), stopping = all["stopping"].size();
    if (waiting + stopping <= 20) {
      std::vector<int64_t> changed;
      for (const char* k : {"cancelled", "stopping"}) {
        for (const auto& v : all[k]) changed.push_back(v.get<int64_t>());
      }
      std::sort(changed.begin(), changed.end());
      for (int64_t id : changed) std::printf("cancel requested for job %lld\n", static_cast<long long>(id));
    } else {
      std::printf("cancel requested for %zu jobs: %zu were waiting (cancelled now), %zu stopping (they end cancelled)\n",
                  waiting + stopping, waiting, stopping);
    }
    for (size_t i = 0; i < ended.size() && i < 20; ++i) {
      std::fprintf(stderr, "gpufleet %s: job %lld already %s\n", cmd.c_str(), static_cast<long long>(IntField(ended[i], "id")),
                   StrField(ended[i], "state").c_str());
    }
    if (ended.size() > 20) {
      std::fprintf(stderr, "gpufleet %s: and %zu more jobs had already ended\n", cmd.c_str(), ended.size() - 20);
    }
    if (!all["skipped"].empty()) {
      std::fprintf(stderr, "gpufleet %s: %zu job(s) left alone: other teams' or no longer in the states asked\n",
                   cmd.c_str(), all["skipped"].size());
    }
    return done_rc;
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
    // "job 7 is pending", "job 7 has failed", "job 7 was cancelled".
    const char* verb = phase == "failed" || phase == "succeeded" ? "has" : phase == "cancelled" ? "was" : "is";
    std::printf("job %lld %s %s", static_cast<long long>(*id), verb, phase.c_str());
    if (IntField(e, "position") > 0) {
      std::printf(": number %lld of %lld in the queue", static_cast<long long>(IntField(e, "position")),
                  static_cast<long long>(IntField(e, "queue_length")));
    }
    std::printf("\n");
    if (e.contains("can_start_now")) {
      std::printf("  can start now:   %s\n", e.value("can_start_now", false) ? "yes" : "no");
      std::printf("  can ever run:    %s\n", e.value("ever", true) ? "yes" : "no (the reasons below say why)");
      if (e.contains("earliest_start_ms")) {
        int64_t at = IntField(e, "earliest_start_ms");
        int64_t in = at - NowMs();
        std::printf("  estimated start: %s (%s, if running jobs end as estimated)\n", Iso(at).c_str(),
                    in > 0 ? ("in " + Span(in)).c_str() : "now");
      } else if (phase == "pending" && e.value("ever", true) && !e.value("can_start_now", false)) {
        std::printf("  estimated start: not known (the reasons below say what it waits for)\n");
      }
    }
    const json& reasons = e.value("reasons", json::array());
    if (!reasons.empty()) {
      std::printf("why:\n");
      for (const auto& s : reasons) std::printf("  - %s\n", Printable(s.is_string() ? s.get<std::string>() : s.dump()).c_str());
    }
    return kExitOk;
  };
}

// --- nodes ----------------------------------------------------------------------------------

// A burn-in report (api::ToJson(model::BurnInReport)) as tables: each test against its
// reference, then each GPU's health, then the verdict.

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
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"text", "table"}}))
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
    JobListQuery query;
    query.team = a->team;
    query.state = a->state;
    query.limit = a->output == "jsonl" && !a->limit_given ? INT64_MAX : a->limit;
    auto listed = ListJobs(*client, query);
    if (!listed.ok()) return Report(cmd, listed.error);
    const std::vector<api::JobSummary>& jobs = listed.value;
    // Runtimes come from each job's transitions; a long listing skips them rather than make
    // hundreds of requests.
    int64_t now = NowMs();
    if (a->output == "jsonl") {
      // The cluster's own history as a trace (cluster_history.h), oldest first.
      int64_t cpu_only = 0;
      auto lines = TraceLinesOf(*client, jobs, now, &cpu_only);
      if (!lines.ok()) return Report(cmd, lines.error);
      for (const std::string& line : lines.value) std::printf("%s\n", line.c_str());
      if (cpu_only > 0) {
        std::fprintf(stderr, "gpufleet history: left out %lld finished job(s) that held no GPU (a trace is of GPU work)\n",
                     static_cast<long long>(cpu_only));
      }
      return kExitOk;
    }
    std::vector<std::optional<int64_t>> runtimes(jobs.size());
    if (jobs.size() <= 200) {
      for (size_t i = 0; i < jobs.size(); ++i) {
        if (jobs[i].attempt == 0) {
          runtimes[i] = 0;
          continue;
        }
        ApiResult d = client->Get("/v1/jobs/" + std::to_string(jobs[i].id.value()));
        if (!d.ok()) continue;
        if (auto history = DecodeHistory(d.body); history.ok()) runtimes[i] = RuntimeMs(*history, now);
      }
    }
    if (a->output == "json") {
      json list = json::array();
      for (size_t i = 0; i < jobs.size(); ++i) {
        json o = api::ToJson(jobs[i]);
        if (runtimes[i]) o["runtime_ms"] = *runtimes[i];
        list.push_back(std::move(o));
      }
      PrintJson({{"jobs", list}});
      return kExitOk;
    }
    if (jobs.empty()) {
      std::printf("no jobs\n");
      return kExitOk;
    }
    Table t({"ID", "NAME", "TEAM", "STATE", "GPUS", "SUBMITTED", "RUNTIME", "OUTCOME"});
    for (size_t i = 0; i < jobs.size(); ++i) {
      const api::JobSummary& j = jobs[i];
      const std::string state = api::JobStateName(j.state);
      std::string outcome = "-";
      if (IsTerminalState(state) || j.state == api::JobState::kPreempted) {
        outcome = j.reason;
        if (j.exit_code && outcome.find("code") == std::string::npos) {
          outcome = "exit " + std::to_string(*j.exit_code) + (outcome.empty() ? "" : ": " + outcome);
        }
      }
      t.Add({std::to_string(j.id.value()), j.name, j.team, state, GpuText(j), Ago(j.submitted.millis()),
             runtimes[i] ? Span(*runtimes[i]) : "?", outcome});
    }
    t.Print();
    return kExitOk;
  };
}

// --- cost, budget ---------------------------------------------------------------------------

}  // namespace

std::function<int()> SetupSubmitCommand(CLI::App& app) { return SetupSubmit(app); }
std::function<int()> SetupRunCommand(CLI::App& app) { return SetupRun(app); }
std::function<int()> SetupQueueCommand(CLI::App& app) { return SetupQueue(app); }
std::function<int()> SetupStatusCommand(CLI::App& app) { return SetupStatus(app); }
std::function<int()> SetupLogsCommand(CLI::App& app) { return SetupLogs(app); }
std::function<int()> SetupCancelCommand(CLI::App& app) { return SetupCancel(app); }
std::function<int()> SetupExplainCommand(CLI::App& app) { return SetupExplain(app); }
std::function<int()> SetupHistoryCommand(CLI::App& app) { return SetupHistory(app); }

}  // namespace gpufleet::cli
