#include "api/agent_protocol.h"

#include <cstdint>
#include <limits>
#include <type_traits>

#include "api/codec.h"

namespace gpufleet::api {

using nlohmann::json;

std::string PartKey::ToString() const {
  return "job-" + std::to_string(job.value()) + ".a" + std::to_string(attempt) + ".p" + std::to_string(part);
}

const char* PartEventKindName(PartEventKind k) {
  switch (k) {
    case PartEventKind::kStarted: return "started";
    case PartEventKind::kExited: return "exited";
    case PartEventKind::kCheckpointed: return "checkpointed";
  }
  return "?";
}

namespace {

// Runs `body`, turning a JSON type or missing-field error into InvalidArgument naming `what`.
template <typename T, typename F>
Result<T> Decode(const char* what, F body) {
  try {
    return body();
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string(what) + ": " + e.what());
  }
}

// An integer that fits T, else a json error (which Decode turns into InvalidArgument).
// nlohmann's own get<int64_t>() casts a float such as 4e70 to the integer type, which is
// undefined behaviour when it does not fit, and get<int>() wraps a large integer silently.
template <typename T>
T IntOf(const json& v) {
  static_assert(std::is_integral_v<T> && std::is_signed_v<T>);
  if (!v.is_number_integer()) {
    throw json::type_error::create(302, std::string("type must be an integer, but is ") + v.type_name(), &v);
  }
  bool fits;
  if (v.is_number_unsigned()) {
    fits = v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else {
    const int64_t x = v.get<int64_t>();
    fits = x >= std::numeric_limits<T>::min() && x <= std::numeric_limits<T>::max();
  }
  if (!fits) throw json::out_of_range::create(406, "integer " + v.dump() + " is out of range", &v);
  return static_cast<T>(v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>());
}

// v as T; integers go through IntOf.
template <typename T>
T As(const json& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return IntOf<T>(v);
  } else {
    return v.get<T>();
  }
}

template <typename T>
T Opt(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return As<T>(*it);
}

std::vector<int> IntsOf(const json& v) {
  if (!v.is_array()) throw json::type_error::create(302, std::string("type must be array, but is ") + v.type_name(), &v);
  std::vector<int> out;
  out.reserve(v.size());
  for (const json& e : v) out.push_back(IntOf<int>(e));
  return out;
}

}  // namespace

json ToJson(const PartKey& k) { return {{"job", k.job.value()}, {"attempt", k.attempt}, {"part", k.part}}; }

Result<PartKey> PartKeyFromJson(const json& j) {
  return Decode<PartKey>("part key", [&] {
    PartKey k;
    k.job = JobId(As<int64_t>(j.at("job")));
    k.attempt = As<int>(j.at("attempt"));
    k.part = As<int>(j.at("part"));
    return k;
  });
}

namespace {
json KeysToJson(const std::vector<PartKey>& keys) {
  json a = json::array();
  for (const auto& k : keys) a.push_back(ToJson(k));
  return a;
}
Result<std::vector<PartKey>> KeysFromJson(const json& j, const char* key) {
  std::vector<PartKey> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) return Status::InvalidArgument(std::string(key) + ": expected a list");
  for (const auto& e : *it) {
    GF_ASSIGN_OR_RETURN(PartKey k, PartKeyFromJson(e));
    out.push_back(k);
  }
  return out;
}
}  // namespace

json ToJson(const RegisterRequest& r) {
  json gpus = json::array();
  for (const auto& g : r.gpus) gpus.push_back(ToJson(g));
  json o = {{"name", r.name}, {"address", r.address}, {"spec", ToJson(r.spec)},
            {"gpus", gpus},   {"running", KeysToJson(r.running)}, {"version", r.version}};
  if (!r.driver_version.empty()) o["driver_version"] = r.driver_version;
  if (!r.cuda_version.empty()) o["cuda_version"] = r.cuda_version;
  if (!r.environments_ready.empty()) o["environments_ready"] = r.environments_ready;
  if (!r.storage_fault.empty()) o["storage_fault"] = r.storage_fault;
  if (!r.containment.empty()) o["containment"] = r.containment;
  if (r.limits) o["limits"] = {{"memory", r.limits->memory}, {"cpu", r.limits->cpu}};
  return o;
}

Result<RegisterRequest> RegisterRequestFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("register: expected a JSON object");
  RegisterRequest r;
  Status st = Decode<int>("register", [&] {
                r.name = j.at("name").get<std::string>();
                r.address = Opt<std::string>(j, "address", "");
                r.version = Opt<std::string>(j, "version", "");
                r.driver_version = Opt<std::string>(j, "driver_version", "");
                r.cuda_version = Opt<std::string>(j, "cuda_version", "");
                r.environments_ready = Opt<std::vector<std::string>>(j, "environments_ready", {});
                r.storage_fault = Opt<std::string>(j, "storage_fault", "");
                r.containment = Opt<std::string>(j, "containment", "");
                if (auto it = j.find("limits"); it != j.end() && !it->is_null()) {
                  r.limits = EnforcedLimits{it->at("memory").get<bool>(), it->at("cpu").get<bool>()};
                }
                return 0;
              }).status();
  GF_RETURN_IF_ERROR(st);
  if (!j.contains("spec")) return Status::InvalidArgument("register: spec: missing");
  GF_ASSIGN_OR_RETURN(r.spec, NodeSpecFromJson(j.at("spec")));
  if (auto it = j.find("gpus"); it != j.end() && it->is_array()) {
    for (const auto& g : *it) {
      GF_ASSIGN_OR_RETURN(GpuInfo info, GpuInfoFromJson(g));
      r.gpus.push_back(info);
    }
  }
  GF_ASSIGN_OR_RETURN(r.running, KeysFromJson(j, "running"));
  return r;
}

json ToJson(const RegisterReply& r) {
  return {{"node_id", r.node.value()},
          {"token", r.token},
          {"epoch", r.epoch},
          {"heartbeat_interval_ms", r.heartbeat_interval.millis()},
          {"lost_after_ms", r.lost_after.millis()},
          {"run_burn_in", r.run_burn_in},
          {"burn_in_request", r.burn_in_request},
          {"checkpoint_root", r.checkpoint_root}};
}

Result<RegisterReply> RegisterReplyFromJson(const json& j) {
  return Decode<RegisterReply>("register reply", [&] {
    RegisterReply r;
    r.node = NodeId(As<int64_t>(j.at("node_id")));
    r.token = j.at("token").get<std::string>();
    r.epoch = j.at("epoch").get<std::string>();
    r.heartbeat_interval = Duration::Millis(As<int64_t>(j.at("heartbeat_interval_ms")));
    r.lost_after = Duration::Millis(As<int64_t>(j.at("lost_after_ms")));
    r.run_burn_in = Opt<bool>(j, "run_burn_in", false);
    r.burn_in_request = Opt<int64_t>(j, "burn_in_request", 0);
    r.checkpoint_root = Opt<std::string>(j, "checkpoint_root", "");
    return r;
  });
}

json ToJson(const PartEvent& e) {
  json o = {{"seq", e.seq}, {"key", ToJson(e.key)}, {"kind", PartEventKindName(e.kind)}, {"at_ms", e.at.millis()}};
  if (e.kind == PartEventKind::kExited) {
    o["exit_code"] = e.exit_code;
    o["signal"] = e.signal;
    o["stopped"] = e.stopped;
    if (e.already_ran) o["already_ran"] = true;
    if (e.node_fault) o["node_fault"] = true;
  }
  if (!e.message.empty()) o["message"] = e.message;
  if (e.environment_took) {
    o["environment_took_ms"] = e.environment_took->millis();
    o["environment_warm"] = e.environment_warm;
  }
  return o;
}

Result<PartEvent> PartEventFromJson(const json& j) {
  PartEvent e;
  std::string kind;
  GF_RETURN_IF_ERROR(Decode<int>("event", [&] {
                       e.seq = As<int64_t>(j.at("seq"));
                       kind = j.at("kind").get<std::string>();
                       e.at = Time::FromMillis(As<int64_t>(j.at("at_ms")));
                       e.exit_code = Opt<int>(j, "exit_code", 0);
                       e.signal = Opt<int>(j, "signal", 0);
                       e.stopped = Opt<bool>(j, "stopped", false);
                       e.already_ran = Opt<bool>(j, "already_ran", false);
                       e.node_fault = Opt<bool>(j, "node_fault", false);
                       e.message = Opt<std::string>(j, "message", "");
                       if (j.contains("environment_took_ms")) {
                         e.environment_took = Duration::Millis(As<int64_t>(j.at("environment_took_ms")));
                         e.environment_warm = Opt<bool>(j, "environment_warm", false);
                       }
                       return 0;
                     }).status());
  if (kind == "started") {
    e.kind = PartEventKind::kStarted;
  } else if (kind == "exited") {
    e.kind = PartEventKind::kExited;
  } else if (kind == "checkpointed") {
    e.kind = PartEventKind::kCheckpointed;
  } else {
    return Status::InvalidArgument("event: kind must be started, exited or checkpointed, got '" + kind + "'");
  }
  if (!j.contains("key")) return Status::InvalidArgument("event: key: missing");
  GF_ASSIGN_OR_RETURN(e.key, PartKeyFromJson(j.at("key")));
  return e;
}

json ToJson(const SpotNotice& n) { return {{"action", n.action}, {"time_ms", n.time.millis()}}; }

Result<SpotNotice> SpotNoticeFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("notice: expected a JSON object");
  GF_ASSIGN_OR_RETURN(SpotNotice n, Decode<SpotNotice>("notice", [&] {
                        SpotNotice n;
                        n.action = j.at("action").get<std::string>();
                        n.time = Time::FromMillis(Opt<int64_t>(j, "time_ms", 0));
                        return n;
                      }));
  if (n.action.empty()) return Status::InvalidArgument("notice: action must not be empty");
  return n;
}

json ToJson(const Heartbeat& h) {
  json gpus = json::array();
  for (const auto& g : h.gpus) {
    gpus.push_back({{"util_pct", g.util_pct},
                    {"mem_used_mib", g.mem_used_mib},
                    {"temperature_c", g.temperature_c},
                    {"power_w", g.power_w}});
  }
  json events = json::array();
  for (const auto& e : h.events) events.push_back(ToJson(e));
  json o = {{"gpus", gpus}, {"events", events}, {"running", KeysToJson(h.running)}};
  if (h.notice) o["notice"] = ToJson(*h.notice);
  if (!h.storage_fault.empty()) o["storage_fault"] = h.storage_fault;
  if (!h.disks.empty()) {
    json disks = json::array();
    for (const auto& d : h.disks) {
      disks.push_back({{"dir", d.dir}, {"path", d.path}, {"free_bytes", d.free_bytes}, {"size_bytes", d.size_bytes}});
    }
    o["disks"] = std::move(disks);
  }
  if (h.burn_in) o["burn_in"] = ToJson(*h.burn_in);
  if (h.environments_ready) o["environments_ready"] = *h.environments_ready;
  if (!h.activity.empty()) {
    json act = json::array();
    for (const auto& a : h.activity) {
      json x = {{"key", ToJson(a.key)}};
      if (a.output_age) x["output_age_ms"] = a.output_age->millis();
      if (a.progress_age) x["progress_age_ms"] = a.progress_age->millis();
      if (a.step) x["step"] = *a.step;
      if (a.loss) x["loss"] = *a.loss;
      act.push_back(std::move(x));
    }
    o["activity"] = std::move(act);
  }
  return o;
}

Result<Heartbeat> HeartbeatFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("heartbeat: expected a JSON object");
  Heartbeat h;
  GF_RETURN_IF_ERROR(Decode<int>("heartbeat.gpus", [&] {
                       if (auto it = j.find("gpus"); it != j.end() && !it->is_null()) {
                         for (const auto& g : *it) {
                           GpuSampleReport s;
                           s.util_pct = Opt<int>(g, "util_pct", 0);
                           s.mem_used_mib = Opt<int64_t>(g, "mem_used_mib", 0);
                           s.temperature_c = Opt<int>(g, "temperature_c", 0);
                           s.power_w = Opt<int>(g, "power_w", 0);
                           h.gpus.push_back(s);
                         }
                       }
                       return 0;
                     }).status());
  if (auto it = j.find("events"); it != j.end() && it->is_array()) {
    for (const auto& e : *it) {
      GF_ASSIGN_OR_RETURN(PartEvent ev, PartEventFromJson(e));
      h.events.push_back(std::move(ev));
    }
  }
  GF_ASSIGN_OR_RETURN(h.running, KeysFromJson(j, "running"));
  if (auto it = j.find("notice"); it != j.end() && !it->is_null()) {
    GF_ASSIGN_OR_RETURN(SpotNotice n, SpotNoticeFromJson(*it));
    h.notice = std::move(n);
  }
  GF_ASSIGN_OR_RETURN(h.storage_fault, Decode<std::string>("heartbeat.storage_fault", [&] {
                        return Opt<std::string>(j, "storage_fault", "");
                      }));
  // Room on the agent's disks is for people to read: an entry this controller cannot use (a
  // directory it does not know, from a newer agent, or numbers that do not add up) is left out,
  // never a reason to refuse the heartbeat (the node would go lost over it).
  if (auto it = j.find("disks"); it != j.end() && it->is_array()) {
    for (const auto& x : *it) {
      auto d = Decode<DiskReport>("heartbeat.disks", [&] {
        DiskReport d;
        d.dir = x.at("dir").get<std::string>();
        d.path = Opt<std::string>(x, "path", "");
        d.free_bytes = IntOf<int64_t>(x.at("free_bytes"));
        d.size_bytes = IntOf<int64_t>(x.at("size_bytes"));
        return d;
      });
      if (!d.ok() || (d->dir != "data" && d->dir != "environments") || d->free_bytes < 0 || d->size_bytes < 0 ||
          d->free_bytes > d->size_bytes) {
        continue;
      }
      h.disks.push_back(std::move(*d));
    }
  }
  if (auto it = j.find("burn_in"); it != j.end() && !it->is_null()) {
    GF_ASSIGN_OR_RETURN(model::BurnInReport b, BurnInReportFromJson(*it));
    h.burn_in = std::move(b);
  }
  if (auto it = j.find("environments_ready"); it != j.end() && !it->is_null()) {
    GF_ASSIGN_OR_RETURN(auto names, Decode<std::vector<std::string>>("heartbeat.environments_ready", [&] {
                          return it->get<std::vector<std::string>>();
                        }));
    h.environments_ready = std::move(names);
  }
  if (auto it = j.find("activity"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return Status::InvalidArgument("heartbeat.activity: expected an array");
    for (const auto& x : *it) {
      if (!x.is_object() || !x.contains("key")) return Status::InvalidArgument("heartbeat.activity: each entry needs a key");
      PartActivity a;
      GF_ASSIGN_OR_RETURN(a.key, PartKeyFromJson(x.at("key")));
      // An age: a whole number of milliseconds, 0 .. 10 years (anything else is ignored).
      auto age = [&](const char* field) -> std::optional<Duration> {
        auto f = x.find(field);
        if (f == x.end() || !f->is_number_integer()) return std::nullopt;
        constexpr uint64_t kMax = uint64_t{10} * 365 * 24 * 3600 * 1000;
        if (f->is_number_unsigned()) {
          uint64_t ms = f->get<uint64_t>();
          return ms > kMax ? std::nullopt : std::optional<Duration>(Duration::Millis(static_cast<int64_t>(ms)));
        }
        return std::nullopt;  // a negative integer
      };
      a.output_age = age("output_age_ms");
      a.progress_age = age("progress_age_ms");
      if (auto f = x.find("step"); f != x.end() && f->is_number_integer()) a.step = f->get<int64_t>();
      if (auto f = x.find("loss"); f != x.end() && f->is_number()) a.loss = f->get<double>();
      h.activity.push_back(std::move(a));
    }
  }
  return h;
}

json ToJson(const HeartbeatReply& r) {
  json o = {{"acked", r.acked}, {"epoch", r.epoch}, {"reregister", r.reregister}};
  if (r.notice_acked) o["notice_acked"] = true;
  if (r.burn_in_acked) o["burn_in_acked"] = true;
  if (r.run_burn_in) {
    o["run_burn_in"] = true;
    o["burn_in_request"] = r.burn_in_request;
  }
  return o;
}

Result<HeartbeatReply> HeartbeatReplyFromJson(const json& j) {
  return Decode<HeartbeatReply>("heartbeat reply", [&] {
    HeartbeatReply r;
    r.acked = As<int64_t>(j.at("acked"));
    r.epoch = j.at("epoch").get<std::string>();
    r.reregister = Opt<bool>(j, "reregister", false);
    r.notice_acked = Opt<bool>(j, "notice_acked", false);
    r.burn_in_acked = Opt<bool>(j, "burn_in_acked", false);
    r.run_burn_in = Opt<bool>(j, "run_burn_in", false);
    r.burn_in_request = Opt<int64_t>(j, "burn_in_request", 0);
    return r;
  });
}

json ToJson(const Command& c) {
  json o = {{"seq", c.seq}};
  if (c.start) {
    const StartPart& s = *c.start;
    o["type"] = "start";
    o["key"] = ToJson(s.key);
    o["argv"] = s.argv;
    o["workdir"] = s.workdir;
    o["env"] = s.env;
    o["user"] = s.user;
    o["gpus"] = s.gpus;
    o["processes"] = s.processes;
    o["rank_base"] = s.rank_base;
    o["stop_signal"] = s.stop_signal;
    o["grace_ms"] = s.grace.millis();
    if (s.cpu_milli > 0) o["cpu_milli"] = s.cpu_milli;
    if (s.mem_mib > 0) o["mem_mib"] = s.mem_mib;
    if (!s.environment.empty()) o["environment"] = s.environment;
    if (s.verify_network) o["verify_network"] = true;
  } else if (c.stop) {
    o["type"] = "stop";
    o["key"] = ToJson(c.stop->key);
    o["signal"] = c.stop->signal;
    o["grace_ms"] = c.stop->grace.millis();
    o["reason"] = c.stop->reason;
  }
  return o;
}

Result<Command> CommandFromJson(const json& j) {
  Command c;
  std::string type;
  GF_RETURN_IF_ERROR(Decode<int>("command", [&] {
                       c.seq = As<int64_t>(j.at("seq"));
                       type = j.at("type").get<std::string>();
                       return 0;
                     }).status());
  if (!j.contains("key")) return Status::InvalidArgument("command: key: missing");
  GF_ASSIGN_OR_RETURN(PartKey key, PartKeyFromJson(j.at("key")));
  if (type == "start") {
    StartPart s;
    s.key = key;
    GF_RETURN_IF_ERROR(Decode<int>("start command", [&] {
                         s.argv = j.at("argv").get<std::vector<std::string>>();
                         s.workdir = Opt<std::string>(j, "workdir", "");
                         s.env = j.at("env").get<std::map<std::string, std::string>>();
                         s.user = Opt<std::string>(j, "user", "");
                         s.gpus = IntsOf(j.at("gpus"));
                         s.processes = Opt<int>(j, "processes", 1);
                         s.rank_base = Opt<int>(j, "rank_base", 0);
                         s.stop_signal = Opt<int>(j, "stop_signal", 15);
                         s.grace = Duration::Millis(Opt<int64_t>(j, "grace_ms", 30000));
                         s.cpu_milli = Opt<int64_t>(j, "cpu_milli", 0);
                         s.mem_mib = Opt<int64_t>(j, "mem_mib", 0);
                         s.environment = Opt<std::string>(j, "environment", "");
                         s.verify_network = Opt<bool>(j, "verify_network", false);
                         return 0;
                       }).status());
    if (s.cpu_milli < 0 || s.mem_mib < 0) {
      return Status::InvalidArgument("start command: cpu_milli and mem_mib must not be negative");
    }
    c.start = std::move(s);
  } else if (type == "stop") {
    StopPart s;
    s.key = key;
    GF_RETURN_IF_ERROR(Decode<int>("stop command", [&] {
                         s.signal = Opt<int>(j, "signal", 15);
                         s.grace = Duration::Millis(Opt<int64_t>(j, "grace_ms", 30000));
                         s.reason = Opt<std::string>(j, "reason", "");
                         return 0;
                       }).status());
    c.stop = std::move(s);
  } else {
    return Status::InvalidArgument("command: type must be start or stop, got '" + type + "'");
  }
  return c;
}

json ToJson(const CommandBatch& b) {
  json cmds = json::array();
  for (const auto& c : b.commands) cmds.push_back(ToJson(c));
  return {{"epoch", b.epoch}, {"commands", cmds}};
}

Result<CommandBatch> CommandBatchFromJson(const json& j) {
  CommandBatch b;
  GF_RETURN_IF_ERROR(Decode<int>("commands", [&] {
                       b.epoch = j.at("epoch").get<std::string>();
                       return 0;
                     }).status());
  if (auto it = j.find("commands"); it != j.end() && it->is_array()) {
    for (const auto& c : *it) {
      GF_ASSIGN_OR_RETURN(Command cmd, CommandFromJson(c));
      b.commands.push_back(std::move(cmd));
    }
  }
  return b;
}

json ToJson(const model::BurnInReport& r) {
  json tests = json::array();
  for (const auto& m : r.tests) {
    json t = {{"name", m.name}, {"gpu", m.gpu}};
    if (!m.skipped.empty()) t["skipped"] = m.skipped;
    if (!m.error.empty()) t["error"] = m.error;
    if (m.skipped.empty() && m.error.empty()) {
      t["value"] = m.value;
      t["unit"] = m.unit;
      t["ok"] = m.ok;
      if (m.reference > 0) {
        t["reference"] = m.reference;
        t["basis"] = m.basis;
      }
    }
    tests.push_back(std::move(t));
  }
  json health = json::array();
  for (const auto& h : r.health) {
    json x = {{"index", h.index}};
    auto put = [&](const char* key, int64_t v) {
      if (v >= 0) x[key] = v;
    };
    put("ecc_uncorrected", h.ecc_uncorrected);
    put("retired_pages", h.retired_pages);
    if (h.retirement_pending) x["retirement_pending"] = true;
    if (!h.xid_errors.empty()) x["xid_errors"] = h.xid_errors;
    put("pcie_gen", h.pcie_gen);
    put("pcie_width", h.pcie_width);
    put("pcie_max_gen", h.pcie_max_gen);
    put("pcie_max_width", h.pcie_max_width);
    put("nvlink_active", h.nvlink_active);
    put("nvlink_total", h.nvlink_total);
    put("max_temperature_c", h.max_temperature_c);
    put("max_power_w", h.max_power_w);
    put("min_sm_clock_mhz", h.min_sm_clock_mhz);
    put("max_sm_clock_mhz", h.max_sm_clock_mhz);
    if (!h.throttle_reasons.empty()) x["throttle_reasons"] = h.throttle_reasons;
    health.push_back(std::move(x));
  }
  return {{"request", r.request},
          {"at_ms", r.at.millis()},   {"took_ms", r.took.millis()}, {"gpu_model", r.gpu_model},
          {"gpus", r.gpus},           {"path", r.path},             {"torch", r.torch},
          {"backend", r.backend},     {"timed_out", r.timed_out},   {"tests", std::move(tests)},
          {"health", std::move(health)}, {"passed", r.passed},     {"problems", r.problems},
          {"speed_ratio", r.speed_ratio}, {"threshold", r.threshold}};
}

Result<model::BurnInReport> BurnInReportFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("burn_in: expected a JSON object");
  return Decode<model::BurnInReport>("burn_in", [&] {
    model::BurnInReport r;
    r.request = Opt<int64_t>(j, "request", 0);
    r.at = Time::FromMillis(Opt<int64_t>(j, "at_ms", 0));
    r.took = Duration::Millis(Opt<int64_t>(j, "took_ms", 0));
    r.gpu_model = Opt<std::string>(j, "gpu_model", "");
    r.gpus = Opt<int>(j, "gpus", 0);
    r.path = Opt<std::string>(j, "path", "");
    r.torch = Opt<std::string>(j, "torch", "");
    r.backend = Opt<std::string>(j, "backend", "");
    r.timed_out = Opt<bool>(j, "timed_out", false);
    for (const auto& t : j.at("tests")) {
      model::BurnInMeasurement m;
      m.name = t.at("name").get<std::string>();
      m.gpu = Opt<int>(t, "gpu", -1);
      m.skipped = Opt<std::string>(t, "skipped", "");
      m.error = Opt<std::string>(t, "error", "");
      m.value = Opt<double>(t, "value", 0);
      m.unit = Opt<std::string>(t, "unit", "");
      m.ok = Opt<bool>(t, "ok", true);
      m.reference = Opt<double>(t, "reference", 0);
      m.basis = Opt<std::string>(t, "basis", "");
      r.tests.push_back(std::move(m));
    }
    if (auto it = j.find("health"); it != j.end() && it->is_array()) {
      for (const auto& x : *it) {
        model::GpuHealth h;
        h.index = As<int>(x.at("index"));
        h.ecc_uncorrected = Opt<int64_t>(x, "ecc_uncorrected", -1);
        h.retired_pages = Opt<int64_t>(x, "retired_pages", -1);
        h.retirement_pending = Opt<bool>(x, "retirement_pending", false);
        h.xid_errors = Opt<std::vector<int>>(x, "xid_errors", {});
        h.pcie_gen = Opt<int>(x, "pcie_gen", -1);
        h.pcie_width = Opt<int>(x, "pcie_width", -1);
        h.pcie_max_gen = Opt<int>(x, "pcie_max_gen", -1);
        h.pcie_max_width = Opt<int>(x, "pcie_max_width", -1);
        h.nvlink_active = Opt<int>(x, "nvlink_active", -1);
        h.nvlink_total = Opt<int>(x, "nvlink_total", -1);
        h.max_temperature_c = Opt<int>(x, "max_temperature_c", -1);
        h.max_power_w = Opt<int>(x, "max_power_w", -1);
        h.min_sm_clock_mhz = Opt<int>(x, "min_sm_clock_mhz", -1);
        h.max_sm_clock_mhz = Opt<int>(x, "max_sm_clock_mhz", -1);
        h.throttle_reasons = Opt<std::vector<std::string>>(x, "throttle_reasons", {});
        r.health.push_back(std::move(h));
      }
    }
    r.passed = Opt<bool>(j, "passed", false);
    r.problems = Opt<std::vector<std::string>>(j, "problems", {});
    r.speed_ratio = Opt<double>(j, "speed_ratio", 0);
    r.threshold = Opt<double>(j, "threshold", 0);
    return r;
  });
}

}  // namespace gpufleet::api
