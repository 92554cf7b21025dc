#include "provider/local_provider.h"

#include <sys/stat.h>

#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/mutex.h"
#include "common/nesting.h"
#include "common/strings.h"
#include "model/capacity.h"
#include "model/types.h"
#include "provider/instance_json.h"
#include "common/process.h"

namespace gpufleet::provider {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kNoticePathSuffix = "/latest/meta-data/spot/instance-action";

// Everything the provider keeps about an instance; one JSON file each.
struct Record {
  Instance instance;
  uint64_t seq = 0;          // creation order
  int64_t spot_index = -1;   // 0-based among spot instances; -1 when not spot
  ProcessHandle process;     // pid 0 until booted
  std::optional<Time> interrupt_at;  // planned spot interruption
  std::optional<Time> notice_at;     // notice published
  std::optional<Time> reclaim_at;    // when the interruption takes the instance
  std::optional<Time> kill_at;       // Delete: SIGKILL when still there
  bool killed = false;               // SIGKILL sent to the group
};

json RecordToJson(const Record& r) {
  json j;
  j["instance"] = json::parse(InstanceToJson(r.instance));
  // Exact times beside the readable ones in "instance".
  j["created_ms"] = r.instance.created.millis();
  j["seq"] = r.seq;
  j["spot_index"] = r.spot_index;
  j["pid"] = r.process.pid;
  j["start_ticks"] = r.process.start_ticks;
  auto put = [&j](const char* key, const std::optional<Time>& t) {
    if (t) j[key] = t->millis();
  };
  put("started_ms", r.instance.started);
  put("ended_ms", r.instance.ended);
  put("interrupt_at_ms", r.interrupt_at);
  put("notice_at_ms", r.notice_at);
  put("reclaim_at_ms", r.reclaim_at);
  put("kill_at_ms", r.kill_at);
  j["killed"] = r.killed;
  return j;
}

// The state files are gpufleet's own, but they sit on disk: a damaged or planted one must not
// take the controller down in nlohmann's recursive parser.
Result<Record> RecordFromJson(const std::string& text) {
  GF_RETURN_IF_ERROR(CheckNestingDepth(text, NestingSyntax::kJson).WithContext("bad instance record"));
  try {
    json j = json::parse(text);
    Record r;
    GF_ASSIGN_OR_RETURN(r.instance, InstanceFromJson(j.at("instance").dump(), nullptr));
    r.instance.created = Time::FromMillis(j.at("created_ms").get<int64_t>());
    r.seq = j.at("seq").get<uint64_t>();
    r.spot_index = j.at("spot_index").get<int64_t>();
    r.process.pid = j.at("pid").get<int>();
    r.process.start_ticks = j.at("start_ticks").get<uint64_t>();
    auto get = [&j](const char* key) -> std::optional<Time> {
      auto it = j.find(key);
      if (it == j.end()) return std::nullopt;
      return Time::FromMillis(it->get<int64_t>());
    };
    r.instance.started = get("started_ms");
    r.instance.ended = get("ended_ms");
    r.interrupt_at = get("interrupt_at_ms");
    r.notice_at = get("notice_at_ms");
    r.reclaim_at = get("reclaim_at_ms");
    r.kill_at = get("kill_at_ms");
    r.killed = j.value("killed", false);
    return r;
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("bad instance record: ") + e.what());
  }
}

Status WriteFileAtomically(const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return Status::Unavailable("write " + tmp.string() + " failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::Unavailable("rename " + tmp.string() + ": " + ec.message());
  return Status::Ok();
}

Result<std::string> ReadWholeFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Status::Unavailable("read " + path.string() + " failed");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A stable hash of the name. Its basis is one digit short of FNV's standard one, as it always
// was here: a seeded run's preemption times depend on it.
uint64_t StableHash(const std::string& s) { return Fnv1a64(s, 1469598103934665603ULL); }

// The exponential draw of one instance: the same seed and name give the same delay.
Duration HazardDelay(uint64_t seed, const std::string& name, double per_hour) {
  std::mt19937_64 gen(seed ^ StableHash(name));
  // 53 random bits -> u in [0, 1); std::exponential_distribution is not the same everywhere.
  double u = static_cast<double>(gen() >> 11) * (1.0 / 9007199254740992.0);
  double hours = -std::log1p(-u) / per_hour;
  double ms = hours * 3'600'000.0;
  if (ms > static_cast<double>(Duration::Max().millis())) return Duration::Max();
  return Duration::Millis(static_cast<int64_t>(std::llround(ms)));
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

class LocalProvider : public Provider {
 public:
  explicit LocalProvider(LocalConfig config) : config_(std::move(config)) {}

  ~LocalProvider() override {
    if (server_) {
      server_->stop();
      if (server_thread_.joinable()) server_thread_.join();
    }
  }

  Status Open() {
    GF_RETURN_IF_ERROR(CheckAgentCommand(config_.agent_command));
    if (config_.state_dir.empty()) return Status::InvalidArgument("local provider: state_dir is required");
    dir_ = config_.state_dir;
    std::error_code ec;
    fs::create_directories(dir_ / "instances", ec);
    if (!ec) fs::create_directories(dir_ / "logs", ec);
    if (ec) return Status::Unavailable("local provider: create " + dir_.string() + ": " + ec.message());
    // The emulated machines keep their data below it ({state_dir}/agents/NAME in the examples):
    // jobs running as another user pass through it, as through a real machine's root. Made
    // passable, nothing more (its instances/ and logs/ stay private).
    struct stat st {};
    if (::stat(dir_.c_str(), &st) == 0 && (st.st_mode & (S_IXGRP | S_IXOTH)) != (S_IXGRP | S_IXOTH)) {
      ::chmod(dir_.c_str(), (st.st_mode & 07777) | S_IXGRP | S_IXOTH);
    }
    GF_RETURN_IF_ERROR(LoadCounters());
    for (const auto& entry : fs::directory_iterator(dir_ / "instances", ec)) {
      if (entry.path().extension() != ".json") continue;
      GF_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(entry.path()));
      auto record = RecordFromJson(text);
      if (!record.ok()) return record.status().WithContext(entry.path().string());
      records_[record->instance.id] = std::move(record).value();
    }
    if (ec) return Status::Unavailable("local provider: list " + dir_.string() + ": " + ec.message());
    return StartNoticeEndpoint();
  }

  std::string Kind() const override { return "local"; }

  Result<Instance> Create(const InstanceRequest& request, Time now) override {
    if (request.name.empty()) return Status::InvalidArgument("create: the instance name must not be empty");
    auto market = model::ParseMarket(request.market);
    if (!market.ok()) return market.status().WithContext("create " + request.name);
    if (request.gpus < 0) return Status::InvalidArgument("create " + request.name + ": gpus must not be negative");
    if (*market == model::Market::kSpot && config_.capacity_outage > Duration::Zero()) {
      auto [it, fresh] = capacity_.try_emplace(request.offer);
      if (fresh) {
        it->second = model::CapacityProcess(config_.capacity_available, config_.capacity_outage,
                                            config_.seed ^ StableHash("capacity:" + request.offer));
      }
      if (!it->second.Available(now)) {
        return Status::ResourceExhausted("create " + request.name + ": no spot capacity for offer " + request.offer +
                                         " now (emulated by the local provider's spot_capacity)");
      }
    }
    for (const auto& [id, r] : records_) {
      if (r.instance.name == request.name && r.instance.state != kTerminated) {
        return Status::AlreadyExists("create " + request.name + ": instance " + id + " has this name");
      }
    }
    Record r;
    r.seq = next_seq_++;
    char id[32];
    std::snprintf(id, sizeof id, "i-%08llx", static_cast<unsigned long long>(r.seq));
    Instance& in = r.instance;
    in.id = id;
    in.name = request.name;
    in.offer = request.offer;
    in.gpu_model = request.gpu_model;
    in.gpus = request.gpus;
    in.market = model::MarketName(*market);
    in.price_micros_per_hour = request.price_micros_per_hour;
    in.zone = request.zone;
    in.labels = request.labels;
    in.state = kBooting;
    in.created = now;
    in.notice_url = NoticeUrl(in.id);
    if (*market == model::Market::kSpot) r.spot_index = next_spot_index_++;
    GF_RETURN_IF_ERROR(SaveCounters());
    GF_RETURN_IF_ERROR(Save(r));
    records_[in.id] = r;
    return in;
  }

  Status Delete(const std::string& id, Time now) override {
    auto it = records_.find(id);
    if (it == records_.end()) return Status::Ok();
    Record& r = it->second;
    if (r.instance.state == kBooting || r.instance.state == kTerminated) return Remove(id);
    if (r.instance.state == kRunning) {
      SignalGroup(r.process.pid, SIGTERM);
      r.instance.state = kTerminating;
      r.kill_at = now + config_.stop_grace;
      return Save(r);
    }
    return Status::Ok();  // terminating already
  }

  Result<std::vector<Instance>> List() override {
    std::vector<Instance> out;
    for (const Record* r : InOrder()) {
      Instance in = r->instance;
      if (in.state == kRunning && !ProcessAlive(r->process)) {
        in.state = kTerminated;
        in.end_reason = "process exited";
      }
      out.push_back(std::move(in));
    }
    return out;
  }

  std::vector<ProviderEvent> Poll(Time now) override {
    std::vector<ProviderEvent> events;
    std::vector<std::string> gone;
    for (Record* r : InOrder()) {
      Instance& in = r->instance;
      const std::string before = RecordToJson(*r).dump();
      auto emit = [&](ProviderEventKind kind, std::string detail) {
        ProviderEvent e;
        e.kind = kind;
        e.instance_id = in.id;
        e.name = in.name;
        e.at = now;
        e.detail = std::move(detail);
        if (kind == ProviderEventKind::kSpotNotice) e.deadline = r->reclaim_at;
        events.push_back(std::move(e));
      };
      auto end = [&](std::string reason) {
        in.state = kTerminated;
        in.ended = now;
        in.end_reason = std::move(reason);
      };

      if (in.state == kBooting && now >= in.created + config_.boot_delay) {
        auto spawned = SpawnDetached(ExpandCommand(in), (dir_ / "logs" / (in.id + ".log")).string());
        if (!spawned.ok()) {
          end("failed to boot: " + spawned.status().message());
          emit(ProviderEventKind::kDied, in.end_reason);
        } else {
          r->process = *spawned;
          in.state = kRunning;
          in.started = now;
          PlanInterruption(*r);
          emit(ProviderEventKind::kStarted, "pid " + std::to_string(r->process.pid));
        }
      }
      if (in.state == kRunning && !ProcessAlive(r->process)) {
        SignalGroup(r->process.pid, SIGKILL);  // whatever it left behind in its group
        end("process exited");
        emit(ProviderEventKind::kDied, in.end_reason);
      }
      if (in.state == kRunning && r->interrupt_at && !r->notice_at && now >= *r->interrupt_at) {
        r->notice_at = now;
        r->reclaim_at = now + config_.notice_lead;
        PublishNotice(*r);
        emit(ProviderEventKind::kSpotNotice, "reclaimed at " + FormatIso8601(*r->reclaim_at));
      }
      if (in.state == kRunning && r->reclaim_at && now >= *r->reclaim_at) {
        SignalGroup(r->process.pid, SIGKILL);
        ProcessAlive(r->process);  // reaps the leader when it is already gone
        end("spot interruption");
        emit(ProviderEventKind::kInterrupted, in.end_reason);
      }
      if (in.state == kTerminating) {
        if (!r->killed && r->kill_at && now >= *r->kill_at) {
          SignalGroup(r->process.pid, SIGKILL);
          r->killed = true;
        }
        // Gone once the leader is reaped and its group is empty (or was sent SIGKILL: a member
        // reparented to an init that does not reap would otherwise hold it forever).
        if (!ProcessAlive(r->process) && (r->killed || !GroupAlive(r->process.pid))) {
          emit(ProviderEventKind::kTerminated, r->killed ? "killed after the stop grace" : "stopped");
          gone.push_back(in.id);
          continue;
        }
      }
      if (RecordToJson(*r).dump() != before) {
        Status saved = Save(*r);
        (void)saved;  // the memory copy is right; the next change writes the file again
      }
    }
    for (const auto& id : gone) {
      Status removed = Remove(id);
      (void)removed;
    }
    return events;
  }

 private:
  std::vector<Record*> InOrder() {
    std::vector<Record*> out;
    for (auto& [id, r] : records_) out.push_back(&r);
    std::sort(out.begin(), out.end(), [](const Record* a, const Record* b) { return a->seq < b->seq; });
    return out;
  }

  std::string NoticeUrl(const std::string& id) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + id + kNoticePathSuffix;
  }

  std::vector<std::string> ExpandCommand(const Instance& in) const {
    const std::map<std::string, std::string> values = {
        {"{name}", in.name},
        {"{gpus}", std::to_string(in.gpus)},
        {"{gpu_model}", in.gpu_model},
        {"{market}", in.market},
        {"{price_per_hour}", FormatPricePerHour(in.price_micros_per_hour)},
        {"{zone}", in.zone},
        {"{notice_url}", NoticeUrl(in.id)},
        {"{instance_id}", in.id},
        {"{state_dir}", dir_.string()},
    };
    std::vector<std::string> argv;
    for (std::string arg : config_.agent_command) {
      for (const auto& [key, value] : values) arg = ReplaceAll(arg, key, value);
      argv.push_back(std::move(arg));
    }
    return argv;
  }

  void PlanInterruption(Record& r) const {
    if (r.spot_index < 0 || !r.instance.started) return;
    const Time start = *r.instance.started;
    std::optional<Time> at;
    if (config_.interruptions_per_hour > 0) {
      at = start + HazardDelay(config_.seed, r.instance.name, config_.interruptions_per_hour);
    }
    for (const ScheduledInterruption& s : config_.schedule) {
      if (s.instance != r.instance.name && s.instance != std::to_string(r.spot_index)) continue;
      Time t = start + s.after;
      if (!at || t < *at) at = t;
    }
    r.interrupt_at = at;
  }

  void PublishNotice(const Record& r) {
    // Second precision: the agent's reader (and AWS) use "2026-12-02T15:04:05Z".
    Time when = Time::FromSeconds(r.reclaim_at->seconds());
    json body = {{"action", "terminate"}, {"time", FormatIso8601(when)}};
    MutexLock lock(notices_mu_);
    notices_[r.instance.id] = body.dump();
  }

  Status StartNoticeEndpoint() {
    for (const auto& [id, r] : records_) {
      if (r.notice_at && r.instance.state == kRunning) PublishNotice(r);
    }
    server_ = std::make_unique<httplib::Server>();
    server_->Get(R"(/([^/]+)/latest/meta-data/spot/instance-action)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   MutexLock lock(notices_mu_);
                   auto it = notices_.find(req.matches[1].str());
                   if (it == notices_.end()) {
                     res.status = 404;
                     res.set_content("no notice\n", "text/plain");
                     return;
                   }
                   res.status = 200;
                   res.set_content(it->second, "application/json");
                 });
    if (config_.notice_port == 0) {
      port_ = server_->bind_to_any_port("127.0.0.1");
      if (port_ <= 0) return Status::Unavailable("local provider: cannot bind the notice endpoint on 127.0.0.1");
    } else {
      if (!server_->bind_to_port("127.0.0.1", config_.notice_port)) {
        return Status::Unavailable("local provider: cannot bind the notice endpoint on 127.0.0.1:" +
                                   std::to_string(config_.notice_port) + " (in use?)");
      }
      port_ = config_.notice_port;
    }
    // The socket listens from the bind on, so requests made before the thread runs wait in
    // the backlog rather than fail.
    server_thread_ = std::thread([this] { server_->listen_after_bind(); });
    // httplib's stop() does nothing before the loop runs, so a provider destroyed at once would
    // wait forever on the thread: wait for the loop first.
    for (int i = 0; i < 10'000 && !server_->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!server_->is_running()) return Status::Unavailable("local provider: the notice endpoint did not start");
    for (auto& [id, r] : records_) r.instance.notice_url = NoticeUrl(id);
    return Status::Ok();
  }

  Status LoadCounters() {
    fs::path path = dir_ / "counters.json";
    if (!fs::exists(path)) return Status::Ok();
    GF_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
    GF_RETURN_IF_ERROR(CheckNestingDepth(text, NestingSyntax::kJson).WithContext(path.string()));
    try {
      json j = json::parse(text);
      next_seq_ = j.at("next_seq").get<uint64_t>();
      next_spot_index_ = j.at("next_spot_index").get<int64_t>();
    } catch (const json::exception& e) {
      return Status::InvalidArgument(path.string() + ": " + e.what());
    }
    return Status::Ok();
  }

  Status SaveCounters() {
    json j = {{"next_seq", next_seq_}, {"next_spot_index", next_spot_index_}};
    return WriteFileAtomically(dir_ / "counters.json", j.dump());
  }

  Status Save(const Record& r) {
    return WriteFileAtomically(dir_ / "instances" / (r.instance.id + ".json"), RecordToJson(r).dump(2));
  }

  Status Remove(const std::string& id) {
    records_.erase(id);
    {
      MutexLock lock(notices_mu_);
      notices_.erase(id);
    }
    std::error_code ec;
    fs::remove(dir_ / "instances" / (id + ".json"), ec);
    if (ec) return Status::Unavailable("remove the record of " + id + ": " + ec.message());
    return Status::Ok();
  }

  const LocalConfig config_;
  fs::path dir_;
  std::map<std::string, Record> records_;
  std::map<std::string, model::CapacityProcess> capacity_;  // by offer
  uint64_t next_seq_ = 1;
  int64_t next_spot_index_ = 0;

  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread server_thread_;
  // The notice endpoint's thread reads notices_; everything else is the caller's (one thread).
  Mutex notices_mu_;
  std::map<std::string, std::string> notices_ GF_GUARDED_BY(notices_mu_);  // instance id -> instance-action body
};

}  // namespace

const std::vector<std::string>& LocalPlaceholders() {
  static const std::vector<std::string> kNames = {"name",  "gpus",       "gpu_model",   "market",   "price_per_hour",
                                                  "zone",  "notice_url", "instance_id", "state_dir"};
  return kNames;
}

Status CheckAgentCommand(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0].empty()) return Status::InvalidArgument("agent_command must name a program");
  for (const std::string& arg : argv) {
    for (size_t open = arg.find('{'); open != std::string::npos; open = arg.find('{', open + 1)) {
      size_t close = arg.find('}', open);
      if (close == std::string::npos) break;
      std::string word = arg.substr(open + 1, close - open - 1);
      bool identifier = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      });
      if (!identifier) continue;  // literal braces, JSON and the like
      const auto& names = LocalPlaceholders();
      if (std::find(names.begin(), names.end(), word) == names.end()) {
        std::string known;
        for (const auto& n : names) known += (known.empty() ? "{" : ", {") + n + "}";
        return Status::InvalidArgument("agent_command: unknown placeholder {" + word + "} in '" + arg +
                                       "' (known: " + known + ")");
      }
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<Provider>> OpenLocalProvider(const LocalConfig& config) {
  auto p = std::make_unique<LocalProvider>(config);
  GF_RETURN_IF_ERROR(p->Open());
  return std::unique_ptr<Provider>(std::move(p));
}

}  // namespace gpufleet::provider
