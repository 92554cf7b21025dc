// Agent: the node daemon (`gpufleet agent`). It registers the node with the controller, runs the
// job parts it is told to run as process groups (launcher.h), and reports back.
//
// Threads: one long-polls the controller for commands and applies them at once (so a start
// reaches exec within milliseconds of the scheduler's decision); the other ticks every 100 ms to
// reap exits, upload new log bytes, and send a heartbeat when one is due or an event is waiting.
// Events are resent until the controller acknowledges them, and an exit is reported only after
// the part's log has been uploaded, so `gpufleet logs` is complete once a job shows finished.
// After a request that got no answer, events and log uploads wait a while (EventRetryDelay) rather
// than go on every tick.
//
// The controller may go away: jobs keep running and events queue up; the agent re-registers (with
// the parts it still runs) when the controller answers again. An agent that has not heard from
// the controller for the controller's lost-after window (or `fence_after`) fences itself: it
// stops its jobs, because by then the controller has declared the node lost and requeued them
// elsewhere, and two copies of a job must not run. With `max_disconnected` set, an agent that
// cannot reach its controller for that long also exits.
//
// Isolation (docs/security.md): jobs run as an unprivileged user (`job_user`; nobody when the
// agent is root and none is set), never as root unless `allow_root_jobs`, in a clean environment,
// in their own cgroup when cgroup v2 is writable, and die with the agent (launcher.h). Parts are
// recorded under <data_dir>/parts, so that a restarted agent kills what a crash left behind. The
// agent token is kept in <data_dir>/agent.token (mode 0600): a restarted agent proves it is the
// same node with it, since a join token cannot take over a live node's name.
//
// With `spot_notice_url` set, a third thread polls the provider's spot interruption notice
// (spot_notice.h). A notice goes to the controller at once, in every heartbeat from then on,
// and in a heartbeat of its own (at most one per interval or 5 s, whichever is shorter) until the
// controller acknowledges it; the controller drains the node and stops its jobs with their
// checkpoint signal.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/gpu_probe.h"
#include "agent/launcher.h"
#include "agent/node_check.h"
#include "agent/spot_notice.h"
#include "api/agent_protocol.h"
#include "api/controller_list.h"
#include "common/fd.h"
#include "common/mutex.h"
#include "common/status.h"
#include "model/types.h"

namespace httplib {
class Client;
class Result;
class Server;
enum class Error;
}

namespace gpufleet::agent {

struct AgentOptions {
  // The controller's agent URL, or several controllers' on one store, comma-separated: the agent
  // follows the leader among them (api/controller_list.h), re-registering with a new leader as
  // after a controller restart.
  std::string server = "http://127.0.0.1:8471";
  // With an https:// server: the CA certificate (PEM) the controller's certificate must chain to,
  // and no other (a pinned CA). Empty: the system's trusted CAs.
  std::string ca_cert;
  std::string join_token;
  std::string name;                     // default: the host name
  std::string address = "127.0.0.1";    // how other nodes reach this one (MASTER_ADDR)
  std::string data_dir;                 // logs/ and work/ live here
  model::Labels labels;
  model::Market market = model::Market::kOnDemand;
  int64_t price_micros_per_hour = 0;    // what the node costs (its offer, or amortised reserved)
  int64_t cpu_milli = 0;                // CPUs jobs may use; 0: what the host offers (ProbeHostResources)
  int64_t mem_mib = 0;                  // memory jobs may use; 0: what the host offers
  Duration poll_wait = Duration::Seconds(20);
  // The read timeout of each registration, heartbeat or log upload (whole seconds, plus 5 s);
  // connecting (2 s) and sending (10 s) have fixed timeouts.
  Duration request_timeout = Duration::Seconds(10);
  Duration max_disconnected = Duration::Zero();  // zero: keep trying forever
  // The clock the agent's loops decide by: when to send a heartbeat, how long to hold events after
  // an unanswered one, when the controller has been away too long. Empty: the wall clock. (Tests
  // pass a fake one; the times in events and the launcher's grace always use the wall clock.)
  std::function<Time()> clock;
  std::string spot_notice_url;                    // empty: never poll (the default)
  SpotNoticeFormat spot_notice_format = SpotNoticeFormat::kAws;  // what the URL answers (spot_notice.h)
  Duration spot_notice_interval = Duration::Seconds(5);
  std::string job_user;          // empty: nobody when the agent runs as root, else the agent's own user
  bool allow_root_jobs = false;  // run a part as uid 0 (refused otherwise)
  std::vector<std::string> workdir_roots;  // empty: DefaultWorkdirRoots(data_dir)
  // Where jobs with no working directory of their own run (work/job-N) and report progress;
  // empty: <data_dir>/work, or DefaultWorkDir's fallback when the jobs' user cannot reach it.
  std::string work_dir;
  std::optional<Duration> fence_after;     // unset: the controller's lost-after; zero: never fence
  std::string cgroup_root;                 // empty: found under the agent's own cgroup; "off": none
  // GET /metrics (DCGM-exporter GPU series and the agent's own) on this host:port; empty: off.
  // Unauthenticated: a loopback address unless metrics_remote.
  std::string metrics_listen;
  bool metrics_remote = false;
  Duration metrics_interval = Duration::Seconds(1);  // GPU sampling while metrics are served
  // The acceptance burn-in, run when the controller asks (docs/nodes.md).
  NodeCheckOptions burn_in;
  // Prepared environments (warm starts, docs/nodes.md): one virtual environment per preset
  // under environments_dir (default <data_dir>/envs), made on first use from the preset's pip
  // line with env_python (default: burn_in.python), or ahead of time for `prewarm`.
  std::string environments_dir;
  std::string environments_file;  // the presets; empty: the shipped data/environments.yaml
  std::string env_python;
  std::vector<std::string> prewarm;
};

// Where job working directories may be: <data_dir>/work, /home, /srv, /mnt, /data, /scratch,
// /tmp and /var/tmp.
std::vector<std::string> DefaultWorkdirRoots(const std::string& data_dir);

// The folder for jobs' default working directories: <data_dir>/work when the jobs run as the
// agent's own user, or when every folder above data_dir lets other users through (o+x). Else
// (an agent run as root, its jobs as nobody, its data below a private home such as /root) jobs
// could not enter it, so /var/tmp/gpufleet-<name>-<hash of data_dir>/work, with `why` saying which
// folder is closed.
std::string DefaultWorkDir(const std::string& data_dir, const std::string& name, bool jobs_as_another_user,
                           std::string* why);

// How long an agent holds waiting events (exits, a spot notice) after `unanswered` requests in a
// row to its controller got no answer, before it tries again: 100 ms, doubled for each miss, at
// most `cap` (the heartbeat interval, at which heartbeats go anyway, or 5 s if that is shorter),
// times `spread` (0.5 to 1, drawn per miss) so that the agents of a fleet whose controller comes
// back do not all retry at one instant. Zero when the last request was answered.
Duration EventRetryDelay(int64_t unanswered, Duration cap, double spread);

class Agent {
 public:
  Agent(AgentOptions options, std::unique_ptr<GpuProbe> probe);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Registers and serves until `stop` becomes true (or the controller stayed away longer than
  // max_disconnected). Stops every running part (checkpoint signal, then its grace) before
  // returning: parts never outlive their agent. Their exits reach the controller (while it
  // answers) as stopped by the agent, so it requeues their jobs instead of failing them.
  // `stop_jobs_on_exit` is kept for callers and changes nothing.
  Status Run(const std::atomic<bool>& stop, bool stop_jobs_on_exit = false);

  // Passes the main loop has made (about ten a second), and a wait (up to `limit`) until it has
  // made `n`: a test with a fake clock waits on it to know that the loop had its chances to send.
  int64_t loop_passes() const;
  bool WaitForLoopPasses(int64_t n, std::chrono::milliseconds limit) const;

 private:
  mutable Mutex passes_mu_;
  mutable CondVar passed_;
  int64_t loop_passes_ GF_GUARDED_BY(passes_mu_) = 0;
  struct PartRun {
    api::StartPart start;
    std::vector<std::string> proc_keys;  // launcher keys, one per process
    std::string log_path;
    int64_t uploaded = 0;
    bool exited = false;
    int exit_code = 0;
    int signal = 0;
    bool stopped = false;
    bool start_failed = false;  // stopped because the part could not start: a failure, not a stop
    bool node_fault = false;    // ... because the node cannot keep its own files (storage_fault_)
    std::string message;
    int procs_left = 0;
    // A part of several processes (one per GPU): one of them failed, and the others were asked to
    // stop, so that the part (and its gang) ends at once, as torchrun ends its workers.
    bool siblings_stopped = false;
    // The exit, held back until the log is uploaded (or the upload gave up): a job shows finished
    // only when its log is complete or marked incomplete.
    std::optional<api::PartEvent> held_exit;
    Time held_since;
    std::string progress_path;  // GPUFLEET_PROGRESS
    // The log past the controller's cap: it keeps [0, cut_at) (the answer that said "cut" ended
    // there); what was sent beyond it is freed on this node as it goes (punched, up to `punched`).
    int64_t cut_at = -1;
    int64_t punched = 0;
    bool log_incomplete = false;  // its upload was given up or refused: the node keeps the file
    bool punch_unsupported = false;  // the log's filesystem cannot punch holes: not tried again
    int64_t job_id = 0;
    std::string team;
  };

  // One request to the controller the agent follows: on a connection failure or a standby's 503,
  // again to the leader the standby names or to the next URL, each about once. `send` makes the
  // request on the client it is given. The answer (or the last failure) and the URL it came from.
  struct Sent;  // {httplib::Result res; std::string server;}
  Sent SendToLeader(const std::function<httplib::Result(httplib::Client&)>& send) GF_EXCLUDES(mu_);
  // The controller URL requests go to now.
  std::string CurrentServer() const GF_EXCLUDES(mu_);
  Status Register();
  // Whether the agent can write its data directory (and its environments directory): 64 KiB
  // written, synced and removed in each. Empty when it can, else why not ("the node's data
  // directory D cannot be written (write): No space left on device").
  std::string ProbeStorage() const GF_EXCLUDES(mu_);
  // The folders ProbeStorage looks at: (what it is, path): the data directory, and the
  // environments directory once made (it may be on a disk of its own).
  std::vector<std::pair<std::string, std::string>> StorageDirs() const;
  // The room left in each of StorageDirs (api::Heartbeat::disks); a folder statvfs cannot read
  // is left out.
  std::vector<api::DiskReport> DiskRoom() const;
  static std::string ProbeDirectory(const std::string& name, const std::string& dir);
  // Whether the file system of a folder ProbeStorage looks at is read-only or nearly full
  // (statvfs: cheap), so that a failed part is worth a probe.
  bool StorageLooksFull() const GF_EXCLUDES(mu_);
  // Why `server` (empty: --server) could not be reached, with what to check for TLS failures.
  std::string Unreachable(const std::string& server, httplib::Error error) const;
  static api::PartEvent NotRunExit(const api::PartKey& key, std::string message);
  void Fence(Duration silent);
  // Stops every running part with its checkpoint signal, saying `why` in its exit.
  void StopAll(const std::string& why);
  void CommandLoop(const std::atomic<bool>& stop);
  void NoticeLoop(const std::atomic<bool>& stop);
  void Apply(const api::Command& cmd);
  void StartPart(const api::StartPart& s);
  void StopPart(const api::StopPart& s);
  // Reaps exits, uploads logs, and sends a heartbeat when `heartbeat_due` or events wait; with
  // `with_activity` the beat carries the running parts' activity (TakeActivityDue).
  void Tick(bool heartbeat_due, bool with_activity);
  // Whether the running parts' activity is due at `now` (the main loop's clock): once per
  // heartbeat interval; marks it taken.
  bool TakeActivityDue(Time now) GF_REQUIRES(mu_);
  // Tick with the activity when it is due; a beat that carried it and was not answered makes it
  // due again soon. Whether a heartbeat went out.
  bool Beat(bool heartbeat_due, Time now) GF_EXCLUDES(mu_);
  // One part's log upload in a tick: what it starts from, and how it went.
  struct LogUpload {
    api::PartKey key;   // the run's key in runs_
    api::PartKey part;  // the part the controller files the log under
    std::string log_path;
    int64_t uploaded = 0;  // bytes the controller has: from the run, then as it answered
    bool all = false;      // the part has exited: all of it, in up to 64 rounds
    enum class Outcome { kNotTried, kComplete, kPartial, kMissed, kRedirect } outcome = Outcome::kNotTried;
    std::string leader;     // kRedirect: where a standby said the leader is ("" when no answer)
    bool answered = false;  // kRedirect: a standby answered (not a miss)
    int64_t cut_at = -1;    // where the first answer that said the controller cut the log ended
    bool refused = false;   // the controller would not take the log (403/404): the node keeps it
  };
  // Frees the part of a cut log this node no longer needs (PartRun's cut_at, punched).
  void FreeLogPastCut(PartRun& run) GF_REQUIRES(mu_);
  void UploadLog(LogUpload& u, const std::string& token, const std::string& server) GF_EXCLUDES(mu_);
  void PushEvent(api::PartEvent e);
  std::vector<api::PartKey> RunningKeys() const GF_REQUIRES(mu_);
  // Samples the GPUs into last_samples_ (caller does not hold mu_).
  void SampleGpus();
  // The /metrics text: DCGM series of the last sample, labelled with the jobs holding the GPUs.
  std::string MetricsText() const;
  Status StartMetricsServer();
  // Starts the burn-in on a thread of its own unless one runs; its report goes out with the
  // heartbeats until the controller acknowledges it.
  void StartBurnIn(int64_t request);
  // Whether a reply's burn-in request needs a new run (not running; not holding its report).
  bool WantsBurnIn(int64_t request) const GF_REQUIRES(mu_);
  // Makes the environment ready (a venv under environments_dir) unless it is; the time it took.
  // A build that fails on a disk without room says which way: *storage_fault when the disk has
  // no room even without the partial build (a node fault), *too_big when the build itself took
  // the last of it (the environment does not fit there; its room comes back once removed).
  Result<Duration> PrepareEnvironment(const std::string& name, std::string* storage_fault = nullptr,
                                      std::string* too_big = nullptr);
  std::vector<std::string> ReadyEnvironments() const;

  AgentOptions options_;
  std::unique_ptr<GpuProbe> probe_;
  std::unique_ptr<ProcessLauncher> launcher_;
  model::NodeSpec spec_;
  std::vector<api::GpuInfo> gpus_;

  // Lock order: env_mu_, then probe_mu_, then mu_. Under mu_ the agent does no network I/O. The
  // launcher's own lock is a leaf, taken under none of these.
  mutable Mutex mu_;
  CondVar wake_;
  std::string token_ GF_GUARDED_BY(mu_);
  std::string epoch_ GF_GUARDED_BY(mu_);
  bool registered_ GF_GUARDED_BY(mu_) = false;
  int64_t after_ GF_GUARDED_BY(mu_) = 0;
  int64_t next_event_seq_ GF_GUARDED_BY(mu_) = 1;
  std::deque<api::PartEvent> events_ GF_GUARDED_BY(mu_);
  std::map<api::PartKey, PartRun> runs_ GF_GUARDED_BY(mu_);
  // Reaped before StartPart (on the command thread) recorded the process in its run: kept by
  // Tick until the run names it.
  std::vector<Exit> unclaimed_exits_ GF_GUARDED_BY(mu_);
  std::set<api::PartKey> seen_ GF_GUARDED_BY(mu_);  // every key ever started or refused here: started at most once
  Duration heartbeat_interval_ GF_GUARDED_BY(mu_) = Duration::Seconds(5);
  Time last_contact_ GF_GUARDED_BY(mu_);
  std::unique_ptr<httplib::Client> poll_client_ GF_GUARDED_BY(mu_);  // the command thread's; stop() cuts its poll
  // The controllers (options_.server) and the one followed now; unset when the option is not a
  // valid list (Run says so).
  std::optional<api::ControllerList> controllers_ GF_GUARDED_BY(mu_);
  std::unique_ptr<SpotNoticePoller> notice_poller_;  // set before the threads start
  std::optional<api::SpotNotice> notice_ GF_GUARDED_BY(mu_);  // the provider takes this node back
  bool notice_acked_ GF_GUARDED_BY(mu_) = false;
  Time notice_retry_at_ GF_GUARDED_BY(mu_);  // an unacknowledged notice is not sent again before
  Duration lost_after_ GF_GUARDED_BY(mu_) = Duration::Seconds(30);  // the controller's, from registration
  std::string checkpoint_root_ GF_GUARDED_BY(mu_);                  // the controller's, from registration
  bool fenced_ GF_GUARDED_BY(mu_) = false;                          // jobs stopped for lack of contact
  // Why this node cannot keep its own files (ProbeStorage), found when a part could not start;
  // empty when it can. Sent with every registration and heartbeat (the controller gives the node
  // no work while it is set), and looked at again before each heartbeat until it clears.
  std::string storage_fault_ GF_GUARDED_BY(mu_);
  int64_t storage_fault_sets_ GF_GUARDED_BY(mu_) = 0;  // faults found by failed parts: a probe meanwhile is stale
  bool quit_commands_ GF_GUARDED_BY(mu_) = false;                   // the command thread may end
  Mutex probe_mu_ GF_ACQUIRED_AFTER(env_mu_);  // the probe is used by one thread at a time
  std::vector<GpuSample> last_samples_ GF_GUARDED_BY(mu_);
  Time last_sample_at_;  // the main loop's
  // The main loop's connection to the controller it follows (registration, heartbeats, log
  // uploads), kept alive between requests instead of a new connection (and TLS handshake) each;
  // made again when the URL changes or after a failed request. The main loop's thread only (the
  // command thread's long poll has its own, poll_client_).
  httplib::Client& MainClient(const std::string& server);
  std::unique_ptr<httplib::Client> main_client_;
  std::string main_client_server_;
  // When (by the main loop's clock) a heartbeat last carried the running parts' activity (log and
  // progress ages). The beats sent for events in between leave it out: reading it costs a stat
  // and a file read per running part.
  Time activity_at_ GF_GUARDED_BY(mu_);
  int64_t heartbeats_ok_ GF_GUARDED_BY(mu_) = 0;
  int64_t heartbeats_failed_ GF_GUARDED_BY(mu_) = 0;
  int64_t failed_in_a_row_ GF_GUARDED_BY(mu_) = 0;
  // Requests in a row (registrations, heartbeats and log uploads of the main loop) that got no answer, and
  // until when waiting events are held (EventRetryDelay) rather than sent on every pass.
  void NoteAnswer(bool answered, Time now) GF_REQUIRES(mu_);
  Time LoopNow() const { return options_.clock ? options_.clock() : WallNow(); }
  int64_t unanswered_ GF_GUARDED_BY(mu_) = 0;
  Time events_retry_at_ GF_GUARDED_BY(mu_);
  bool rejected_last_ GF_GUARDED_BY(mu_) = false;  // the last heartbeat got 401 or 409
  std::minstd_rand retry_spread_ GF_GUARDED_BY(mu_);
  std::unique_ptr<httplib::Server> metrics_server_;
  // <data-dir>/agent.lock, held (flock) while the agent runs: a second agent on the same data
  // directory would kill this one's parts as leftovers and take over its node's token.
  std::optional<UniqueFd> data_lock_;
  std::thread metrics_thread_;
  std::thread burn_in_thread_;
  bool burn_in_running_ GF_GUARDED_BY(mu_) = false;
  std::optional<model::BurnInReport> burn_in_report_ GF_GUARDED_BY(mu_);  // sent until acknowledged
  std::string driver_version_, cuda_version_;  // set before the threads start
  Mutex env_mu_;                                // one environment is prepared at a time
  std::vector<std::string> envs_reported_ GF_GUARDED_BY(mu_);  // what the controller last heard
};

}  // namespace gpufleet::agent
