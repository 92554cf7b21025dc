#include "api/codec.h"

#include "api/agent_protocol.h"
#include "api/job_summary.h"
#include "api/node_summary.h"
#include "api/token_summary.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/nesting.h"

namespace gpufleet::api {
namespace {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// "string \"eight\"", "number 1.5", "null": what a message says was found instead.
std::string Describe(const json& v) {
  if (v.is_null()) return "null";
  std::string text = Dump(v);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(v.type_name()) + " " + text;
}

std::string Join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}
std::string Index(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// Reads the fields of one JSON object and keeps the first error. A getter that fails returns a
// default value, so a decoder reads every field in a row and checks status() once at the end.
class Fields {
 public:
  Fields(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) Fail(path_, "expected an object, got " + Describe(j_));
  }

  Status status() const { return status_; }
  bool ok() const { return status_.ok(); }

  int64_t Int64(std::string_view key) { return IntIn(Required(key), Join(path_, key), kMin64, kMax64); }
  int Int(std::string_view key) { return static_cast<int>(IntIn(Required(key), Join(path_, key), kMinInt, kMaxInt)); }
  const json* OptionalValue(std::string_view key) { return Optional(key); }
  std::optional<int> OptionalInt(std::string_view key) {
    const json* v = Optional(key);
    if (v == nullptr) return std::nullopt;
    return static_cast<int>(IntIn(v, Join(path_, key), kMinInt, kMaxInt));
  }
  bool Bool(std::string_view key) {
    const json* v = Required(key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) {
      Fail(Join(path_, key), "expected true or false, got " + Describe(*v));
      return false;
    }
    return v->get<bool>();
  }
  std::string String(std::string_view key) { return StringAt(Required(key), Join(path_, key)); }
  std::string OptionalString(std::string_view key) {
    const json* v = Optional(key);
    return v == nullptr ? std::string() : StringAt(v, Join(path_, key));
  }
  Time TimeMs(std::string_view key) { return Time::FromMillis(Int64(key)); }
  Duration DurationMs(std::string_view key) { return Duration::Millis(Int64(key)); }
  std::optional<Duration> OptionalDurationMs(std::string_view key) {
    const json* v = Optional(key);
    if (v == nullptr) return std::nullopt;
    return Duration::Millis(IntIn(v, Join(path_, key), kMin64, kMax64));
  }

  std::vector<std::string> Strings(std::string_view key) {
    std::vector<std::string> out;
    const std::string path = Join(path_, key);
    const json* v = Array(Required(key), path);
    if (v == nullptr) return out;
    for (size_t i = 0; i < v->size() && ok(); ++i) out.push_back(StringAt(&(*v)[i], Index(path, i)));
    return out;
  }
  std::vector<int> Ints(std::string_view key) {
    std::vector<int> out;
    const std::string path = Join(path_, key);
    const json* v = Array(Required(key), path);
    if (v == nullptr) return out;
    for (size_t i = 0; i < v->size() && ok(); ++i) {
      out.push_back(static_cast<int>(IntIn(&(*v)[i], Index(path, i), kMinInt, kMaxInt)));
    }
    return out;
  }
  std::map<std::string, std::string> StringMap(std::string_view key) {
    std::map<std::string, std::string> out;
    const json* v = Required(key);
    if (v == nullptr) return out;
    const std::string path = Join(path_, key);
    if (!v->is_object()) {
      Fail(path, "expected an object of strings, got " + Describe(*v));
      return out;
    }
    for (const auto& [k, value] : v->items()) {
      out[k] = StringAt(&value, Join(path, k));
      if (!ok()) break;
    }
    return out;
  }

  // An enum written by name; `parse` is the enum's Parse function.
  template <typename E>
  E Enum(std::string_view key, Result<E> (*parse)(const std::string&), E fallback) {
    const std::string path = Join(path_, key);
    const json* v = Required(key);
    if (v == nullptr) return fallback;
    std::string name = StringAt(v, path);
    if (!ok()) return fallback;
    Result<E> e = parse(name);
    if (!e.ok()) {
      Fail(path, e.status().message());
      return fallback;
    }
    return *e;
  }

  // A nested object decoded by `decode(json, path)`.
  template <typename T>
  T Object(std::string_view key, Result<T> (*decode)(const json&, const std::string&)) {
    const json* v = Required(key);
    if (v == nullptr) return T{};
    return Nested(*v, Join(path_, key), decode);
  }
  template <typename T>
  std::optional<T> OptionalObject(std::string_view key, Result<T> (*decode)(const json&, const std::string&)) {
    const json* v = Optional(key);
    if (v == nullptr) return std::nullopt;
    return Nested(*v, Join(path_, key), decode);
  }
  template <typename T>
  std::vector<T> Objects(std::string_view key, Result<T> (*decode)(const json&, const std::string&)) {
    std::vector<T> out;
    const std::string path = Join(path_, key);
    const json* v = Array(Required(key), path);
    if (v == nullptr) return out;
    for (size_t i = 0; i < v->size() && ok(); ++i) out.push_back(Nested((*v)[i], Index(path, i), decode));
    return out;
  }

 private:
  static constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  static constexpr int64_t kMinInt = std::numeric_limits<int>::min();
  static constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

  void Fail(const std::string& path, const std::string& msg) {
    if (!status_.ok()) return;
    status_ = Status::InvalidArgument(path.empty() ? msg : path + ": " + msg);
  }

  // The value of a field that must be there (not null), or nullptr after recording the error.
  const json* Required(std::string_view key) {
    if (!ok()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      Fail(Join(path_, key), it == j_.end() ? "missing field" : "must not be null");
      return nullptr;
    }
    return &*it;
  }
  // The value of an optional field, or nullptr when it is absent or null.
  const json* Optional(std::string_view key) {
    if (!ok()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  const json* Array(const json* v, const std::string& path) {
    if (v == nullptr) return nullptr;
    if (!v->is_array()) {
      Fail(path, "expected an array, got " + Describe(*v));
      return nullptr;
    }
    return v;
  }
  int64_t IntIn(const json* v, const std::string& path, int64_t lo, int64_t hi) {
    if (v == nullptr || !ok()) return 0;
    if (!v->is_number_integer()) {
      Fail(path, "expected an integer, got " + Describe(*v));
      return 0;
    }
    bool in_range;
    int64_t x = 0;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      in_range = u <= static_cast<uint64_t>(hi);
      if (in_range) x = static_cast<int64_t>(u);
    } else {
      x = v->get<int64_t>();
      in_range = x >= lo && x <= hi;
    }
    if (!in_range) {
      Fail(path, "integer " + Dump(*v) + " is out of range [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
      return 0;
    }
    return x;
  }
  std::string StringAt(const json* v, const std::string& path) {
    if (v == nullptr || !ok()) return {};
    if (!v->is_string()) {
      Fail(path, "expected a string, got " + Describe(*v));
      return {};
    }
    return v->get<std::string>();
  }
  template <typename T>
  T Nested(const json& v, const std::string& path, Result<T> (*decode)(const json&, const std::string&)) {
    if (!ok()) return T{};
    Result<T> r = decode(v, path);
    if (!r.ok()) {
      if (status_.ok()) status_ = r.status();  // already carries the full path
      return T{};
    }
    return std::move(r).value();
  }

  const json& j_;
  std::string path_;
  Status status_;
};

// Decoders that know where they are; the public XFromJson functions start them at the root.

Result<model::JobSpec> DecodeJobSpec(const json& j, const std::string& path) {
  Fields f(j, path);
  model::JobSpec s;
  s.name = f.String("name");
  s.team = f.String("team");
  s.priority = f.Int("priority");
  s.submit = f.TimeMs("submit_ms");
  s.gpus_per_node = f.Int("gpus_per_node");
  s.nodes = f.Int("nodes");
  s.gpu_milli = f.Int64("gpu_milli");
  s.gpu_models = f.Strings("gpu_models");
  s.cpu_milli = f.Int64("cpu_milli");
  s.mem_mib = f.Int64("mem_mib");
  s.duration_estimate = f.OptionalDurationMs("duration_estimate_ms");
  s.checkpoint_interval = f.DurationMs("checkpoint_interval_ms");
  s.constraints = f.StringMap("constraints");
  s.market = f.Enum("market", &model::ParseMarketPreference, model::MarketPreference::kAny);
  if (const json* v = f.OptionalValue("max_cost_micros")) {  // added later: optional
    s.max_cost_micros = v->is_number_integer() ? v->get<int64_t>() : 0;
  }
  if (const json* v = f.OptionalValue("environment"); v && v->is_string()) s.environment = v->get<std::string>();
  if (!f.ok()) return f.status();
  return s;
}

Result<model::NodeSpec> DecodeNodeSpec(const json& j, const std::string& path) {
  Fields f(j, path);
  model::NodeSpec s;
  s.name = f.String("name");
  s.gpu_model = f.String("gpu_model");
  s.gpus = f.Int("gpus");
  s.nvlink_domain = f.Ints("nvlink_domain");
  s.cpu_milli = f.Int64("cpu_milli");
  s.mem_mib = f.Int64("mem_mib");
  s.labels = f.StringMap("labels");
  s.market = f.Enum("market", &model::ParseMarket, model::Market::kOnDemand);
  // Optional: records written before nodes had prices lack it.
  if (const json* v = f.OptionalValue("price_micros_per_hour")) {
    s.price_micros_per_hour = v->is_number_integer() ? v->get<int64_t>() : 0;
  }
  // Optional: from agents and records older than environment presets.
  auto names = [&](const char* key) {
    std::vector<std::string> out;
    if (const json* v = f.OptionalValue(key); v && v->is_array()) {
      for (const auto& e : *v) {
        if (e.is_string()) out.push_back(e.get<std::string>());
      }
    }
    return out;
  };
  s.environments = names("environments");
  s.warm_environments = names("warm_environments");
  if (!f.ok()) return f.status();
  return s;
}

Result<model::NodeAssignment> DecodeNodeAssignment(const json& j, const std::string& path) {
  Fields f(j, path);
  model::NodeAssignment a;
  a.node = NodeId(f.Int64("node"));
  a.gpus = f.Ints("gpus");
  a.gpu_milli = f.Int64("gpu_milli");
  a.cpu_milli = f.Int64("cpu_milli");
  a.mem_mib = f.Int64("mem_mib");
  if (!f.ok()) return f.status();
  return a;
}

Result<model::Placement> DecodePlacement(const json& j, const std::string& path) {
  Fields f(j, path);
  model::Placement p;
  p.gpu_model = f.String("gpu_model");
  p.parts = f.Objects("parts", &DecodeNodeAssignment);
  if (!f.ok()) return f.status();
  return p;
}

Result<CheckpointPolicy> DecodeCheckpointPolicy(const json& j, const std::string& path) {
  Fields f(j, path);
  CheckpointPolicy c;
  c.dir = f.String("dir");
  c.signal = f.Int("signal");
  c.grace = f.DurationMs("grace_ms");
  if (!f.ok()) return f.status();
  return c;
}

Result<RestartPolicy> DecodeRestartPolicy(const json& j, const std::string& path) {
  Fields f(j, path);
  RestartPolicy r;
  r.on_preemption = f.Bool("on_preemption");
  r.max_restarts_on_errors = f.Int("max_restarts_on_errors");
  r.recover_on_exit_codes = f.Ints("recover_on_exit_codes");
  if (!f.ok()) return f.status();
  return r;
}

Result<JobRequest> DecodeJobRequest(const json& j, const std::string& path) {
  Fields f(j, path);
  JobRequest r;
  r.spec = f.Object("spec", &DecodeJobSpec);
  r.argv = f.Strings("argv");
  r.workdir = f.String("workdir");
  r.env = f.StringMap("env");
  r.user = f.String("user");
  r.process_per_gpu = f.Bool("process_per_gpu");
  if (const json* v = f.OptionalValue("verify_network"); v && v->is_boolean()) r.verify_network = v->get<bool>();
  r.checkpoint = f.Object("checkpoint", &DecodeCheckpointPolicy);
  r.restart = f.Object("restart", &DecodeRestartPolicy);
  if (const json* v = f.OptionalValue("watchdog")) {  // added later: optional
    if (!v->is_object()) return Status::InvalidArgument(path + ".watchdog: must be an object");
    Fields w(*v, path + ".watchdog");
    r.watchdog.stall_timeout = w.DurationMs("stall_timeout_ms");
    r.watchdog.restart_on_stall = w.Bool("restart_on_stall");
    if (!w.ok()) return w.status();
  }
  // The cost hints sit beside the other request fields (a record's shape since the first
  // version); workload, step_seconds, clouds and restart_overhead_ms were added later.
  model::JobCostHints& c = r.cost;
  c.profile = f.Enum("profile", &model::ParseBoundness, model::Boundness::kBalanced);
  c.estimate_model = f.String("estimate_model");
  c.deadline = f.OptionalDurationMs("deadline_ms");
  c.max_hourly_cost_micros = f.Int64("max_hourly_cost_micros");
  c.regions = f.Strings("regions");
  if (const json* v = f.OptionalValue("workload"); v && v->is_string()) c.workload = v->get<std::string>();
  if (const json* v = f.OptionalValue("clouds"); v && v->is_array()) c.clouds = f.Strings("clouds");
  if (const json* v = f.OptionalValue("step_seconds")) {
    if (!v->is_object()) return Status::InvalidArgument(path + ".step_seconds: must be an object of numbers");
    for (const auto& [model, seconds] : v->items()) {
      if (!seconds.is_number() || !(seconds.get<double>() > 0)) {
        return Status::InvalidArgument(path + ".step_seconds." + model + ": must be a positive number, got " +
                                       Describe(seconds));
      }
      c.step_seconds[model] = seconds.get<double>();
    }
  }
  if (f.OptionalValue("restart_overhead_ms") != nullptr) c.restart_overhead = f.DurationMs("restart_overhead_ms");
  // Records written before max_cost moved into the spec carry it here only.
  if (r.spec.max_cost_micros == 0) {
    if (const json* v = f.OptionalValue("max_cost_micros"); v && v->is_number_integer()) {
      r.spec.max_cost_micros = v->get<int64_t>();
    }
  }
  r.array_params = f.StringMap("array_params");
  if (!f.ok()) return f.status();
  return r;
}

Result<JobSummary> DecodeJobSummary(const json& j, const std::string& path) {
  Fields f(j, path);
  JobSummary s;
  s.id = JobId(f.Int64("id"));
  s.name = f.String("name");
  s.team = f.String("team");
  s.priority = f.Int("priority");
  s.state = f.Enum("state", &ParseJobState, JobState::kPending);
  s.reason = f.String("reason");
  if (!f.ok()) return f.status();
  // Whole GPUs per node, or a slice of one GPU as a fraction below 1.
  if (const json* g = f.OptionalValue("gpus"); g == nullptr || !g->is_number() || g->get<double>() < 0) {
    return Status::InvalidArgument(Join(path, "gpus") + ": expected a number of GPUs, got " +
                                   (g == nullptr ? std::string("nothing") : Describe(*g)));
  } else if (g->is_number_float() && g->get<double>() < 1 && g->get<double>() > 0) {
    s.gpus_per_node = 1;
    s.gpu_milli = static_cast<int64_t>(g->get<double>() * 1000.0 + 0.5);
  } else {
    s.gpus_per_node = static_cast<int>(g->get<double>());
  }
  s.nodes = f.Int("nodes");
  s.gpu_models = f.Strings("gpu_type");
  s.submitted = f.TimeMs("submitted_ms");
  s.updated = f.TimeMs("updated_ms");
  s.attempt = f.Int("attempt");
  s.exit_code = f.OptionalInt("exit_code");
  s.placement = f.OptionalObject("placement", &DecodePlacement);
  if (const json* p = f.OptionalValue("position"); p != nullptr && !p->is_null()) s.position = f.Int64("position");
  if (!f.ok()) return f.status();
  return s;
}

Result<JobRecord> DecodeJobRecord(const json& j, const std::string& path) {
  Fields f(j, path);
  JobRecord r;
  r.id = JobId(f.Int64("id"));
  r.request_id = f.String("request_id");
  r.array_index = f.Int("array_index");
  r.request = f.Object("request", &DecodeJobRequest);
  r.state = f.Enum("state", &ParseJobState, JobState::kPending);
  r.reason = f.String("reason");
  r.submitted = f.TimeMs("submitted_ms");
  r.updated = f.TimeMs("updated_ms");
  r.attempt = f.Int("attempt");
  r.error_restarts = f.Int("error_restarts");
  r.placement = f.OptionalObject("placement", &DecodePlacement);
  r.exit_code = f.OptionalInt("exit_code");
  if (const json* v = f.OptionalValue("cost_micros")) r.cost_micros = v->is_number_integer() ? v->get<int64_t>() : 0;
  if (const json* v = f.OptionalValue("stop_intent")) {  // added later: optional
    if (!v->is_string()) return Status::InvalidArgument(Join(path, "stop_intent") + ": must be a string");
    r.stop_intent = v->get<std::string>();
  }
  if (!f.ok()) return f.status();
  return r;
}

Result<Transition> DecodeTransition(const json& j, const std::string& path) {
  Fields f(j, path);
  Transition t;
  t.at = f.TimeMs("at_ms");
  t.from = f.Enum("from", &ParseJobState, JobState::kPending);
  t.to = f.Enum("to", &ParseJobState, JobState::kPending);
  t.reason = f.String("reason");
  if (!f.ok()) return f.status();
  return t;
}

Result<GpuInfo> DecodeGpuInfo(const json& j, const std::string& path) {
  Fields f(j, path);
  GpuInfo g;
  g.index = f.Int("index");
  g.uuid = f.String("uuid");
  g.name = f.String("name");
  g.memory_mib = f.Int64("memory_mib");
  if (const json* cc = f.OptionalValue("compute_capability"); cc && cc->is_string()) {
    g.compute_capability = cc->get<std::string>();
  }
  if (!f.ok()) return f.status();
  return g;
}

Result<NodeRecord> DecodeNodeRecord(const json& j, const std::string& path) {
  Fields f(j, path);
  NodeRecord n;
  n.id = NodeId(f.Int64("id"));
  n.name = f.String("name");
  n.spec = f.Object("spec", &DecodeNodeSpec);
  n.gpus = f.Objects("gpus", &DecodeGpuInfo);
  n.address = f.String("address");
  n.state = f.Enum("state", &ParseNodeState, NodeState::kUp);
  n.registered = f.TimeMs("registered_ms");
  n.last_heartbeat = f.TimeMs("last_heartbeat_ms");
  auto opt_string = [&](const char* key) -> std::string {
    const json* v = f.OptionalValue(key);
    return v && v->is_string() ? v->get<std::string>() : std::string();
  };
  n.driver_version = opt_string("driver_version");
  n.cuda_version = opt_string("cuda_version");
  n.acceptance = opt_string("acceptance");
  n.acceptance_reason = opt_string("acceptance_reason");
  if (const json* v = f.OptionalValue("drained")) n.drained = v->is_boolean() && v->get<bool>();  // added later
  if (const json* v = f.OptionalValue("environments_ready"); v && v->is_array()) {
    for (const auto& e : *v) {
      if (e.is_string()) n.environments_ready.push_back(e.get<std::string>());
    }
  }
  if (!f.ok()) return f.status();
  if (const json* v = f.OptionalValue("burn_in"); v && v->is_object()) {
    auto b = BurnInReportFromJson(*v);
    if (!b.ok()) return Status::InvalidArgument(path + ".burn_in: " + b.status().message());
    n.burn_in = std::move(*b);
  }
  return n;
}

// The fields a token record and its summary share (TokenRecord, TokenSummary).
template <typename Token>
void DecodeTokenFields(Fields& f, Token& t) {
  t.kind = f.Enum("kind", &ParseTokenKind, TokenKind::kUser);
  t.subject = f.String("subject");
  t.role = f.String("role");
  t.team = f.String("team");
  t.created = f.TimeMs("created_ms");
  t.revoked = f.Bool("revoked");
  // Added later: optional.
  if (auto v = f.OptionalDurationMs("expires_ms")) t.expires = Time::FromMillis(v->millis());
  if (auto v = f.OptionalDurationMs("last_used_ms")) t.last_used = Time::FromMillis(v->millis());
  t.made_by = f.OptionalString("made_by");
}

Result<TokenRecord> DecodeTokenRecord(const json& j, const std::string& path) {
  Fields f(j, path);
  TokenRecord t;
  t.hash = f.String("hash");
  DecodeTokenFields(f, t);
  if (!f.ok()) return f.status();
  return t;
}

Result<AuditRecord> DecodeAuditRecord(const json& j, const std::string& path) {
  Fields f(j, path);
  AuditRecord a;
  a.seq = f.Int64("seq");
  a.at = f.TimeMs("at_ms");
  a.subject = f.String("subject");
  a.role = f.String("role");
  a.team = f.String("team");
  a.source = f.String("source");
  a.verb = f.String("verb");
  a.object = f.String("object");
  a.outcome = f.String("outcome");
  a.reason = f.String("reason");
  a.request_id = f.String("request_id");
  if (!f.ok()) return f.status();
  return a;
}

Result<GpuSampleReport> DecodeGpuSample(const json& j, const std::string& path) {
  Fields f(j, path);
  GpuSampleReport g;
  g.util_pct = f.Int("util_pct");
  g.mem_used_mib = f.Int64("mem_used_mib");
  g.temperature_c = f.Int("temperature_c");
  g.power_w = f.Int("power_w");
  if (!f.ok()) return f.status();
  return g;
}

Result<DiskReport> DecodeDisk(const json& j, const std::string& path) {
  Fields f(j, path);
  DiskReport d;
  d.dir = f.String("dir");
  d.path = f.String("path");
  d.free_bytes = f.Int64("free_bytes");
  d.size_bytes = f.Int64("size_bytes");
  if (!f.ok()) return f.status();
  return d;
}

// The agent protocol's decoders, with the field's path in front of their errors.
template <typename T>
Result<T> WithPath(Result<T> r, const std::string& path) {
  if (r.ok()) return r;
  return Status::InvalidArgument(path + ": " + r.status().message());
}
Result<model::BurnInReport> DecodeBurnIn(const json& j, const std::string& path) {
  return WithPath(BurnInReportFromJson(j), path);
}
Result<SpotNotice> DecodeNotice(const json& j, const std::string& path) {
  return WithPath(SpotNoticeFromJson(j), path);
}

Result<NodeSummary> DecodeNodeSummary(const json& j, const std::string& path) {
  Fields f(j, path);
  NodeSummary n;
  n.id = NodeId(f.Int64("id"));
  n.name = f.String("name");
  n.state = f.Enum("state", &ParseNodeState, NodeState::kUp);
  n.gpu_model = f.String("gpu_model");
  n.gpus = f.Int("gpus");
  n.gpus_used = f.Int("gpus_used");
  n.address = f.String("address");
  n.market = f.Enum("market", &model::ParseMarket, model::Market::kOnDemand);
  n.labels = f.StringMap("labels");
  n.last_heartbeat = f.TimeMs("last_heartbeat_ms");
  if (const json* heard = f.OptionalValue("heard_since_start"); heard != nullptr && heard->is_boolean()) {
    n.heard_since_start = heard->get<bool>();  // (absent from older controllers: heard)
  }
  n.telemetry = f.Objects("telemetry", &DecodeGpuSample);
  for (int64_t id : [&] {
         std::vector<int64_t> ids;
         const json* v = f.OptionalValue("jobs");
         if (v == nullptr) return ids;
         if (!v->is_array()) {
           ids.push_back(-1);
           return ids;
         }
         for (const auto& x : *v) ids.push_back(x.is_number_integer() ? x.get<int64_t>() : -1);
         return ids;
       }()) {
    if (id < 0) return Status::InvalidArgument(Join(path, "jobs") + ": expected an array of job ids");
    n.jobs.push_back(JobId(id));
  }
  n.acceptance = f.String("acceptance");
  n.acceptance_reason = f.String("acceptance_reason");
  n.driver_version = f.String("driver_version");
  n.cuda_version = f.String("cuda_version");
  n.environments = f.Strings("environments");
  n.environments_ready = f.Strings("environments_ready");
  n.burn_in = f.OptionalObject("burn_in", &DecodeBurnIn);
  n.notice = f.OptionalObject("notice", &DecodeNotice);
  n.storage_fault = f.OptionalString("storage_fault");
  if (f.OptionalValue("disks") != nullptr) n.disks = f.Objects("disks", &DecodeDisk);  // (absent from older controllers)
  n.containment = f.OptionalString("containment");
  if (const json* v = f.OptionalValue("limits"); v != nullptr && v->is_object()) {
    const auto m = v->find("memory"), c = v->find("cpu");
    if (m != v->end() && m->is_boolean() && c != v->end() && c->is_boolean()) n.limits = EnforcedLimits{m->get<bool>(), c->get<bool>()};
  }
  if (!f.ok()) return f.status();
  return n;
}

Result<TokenSummary> DecodeTokenSummary(const json& j, const std::string& path) {
  Fields f(j, path);
  TokenSummary t;
  t.id = f.String("id");
  DecodeTokenFields(f, t);
  if (!f.ok()) return f.status();
  return t;
}

// The decoders above do not throw; this is the last line in case a library call does.
template <typename T>
Result<T> Decode(const json& j, Result<T> (*decode)(const json&, const std::string&)) {
  try {
    return decode(j, "");
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("malformed JSON value: ") + e.what());
  }
}

json OptionalMillis(const std::optional<Duration>& d) { return d ? json(d->millis()) : json(nullptr); }

}  // namespace

json ToJson(const model::JobSpec& s) {
  return json{
      {"name", s.name},
      {"team", s.team},
      {"priority", s.priority},
      {"submit_ms", s.submit.millis()},
      {"gpus_per_node", s.gpus_per_node},
      {"nodes", s.nodes},
      {"gpu_milli", s.gpu_milli},
      {"gpu_models", s.gpu_models},
      {"cpu_milli", s.cpu_milli},
      {"mem_mib", s.mem_mib},
      {"duration_estimate_ms", OptionalMillis(s.duration_estimate)},
      {"checkpoint_interval_ms", s.checkpoint_interval.millis()},
      {"constraints", s.constraints},
      {"market", model::MarketPreferenceName(s.market)},
      {"max_cost_micros", s.max_cost_micros},
      {"environment", s.environment},
  };
}

json ToJson(const model::NodeSpec& s) {
  return json{
      {"name", s.name},
      {"gpu_model", s.gpu_model},
      {"gpus", s.gpus},
      {"nvlink_domain", s.nvlink_domain},
      {"cpu_milli", s.cpu_milli},
      {"mem_mib", s.mem_mib},
      {"labels", s.labels},
      {"market", model::MarketName(s.market)},
      {"price_micros_per_hour", s.price_micros_per_hour},
      {"environments", s.environments},
      {"warm_environments", s.warm_environments},
  };
}

json ToJson(const model::NodeAssignment& a) {
  return json{
      {"node", a.node.value()},
      {"gpus", a.gpus},
      {"gpu_milli", a.gpu_milli},
      {"cpu_milli", a.cpu_milli},
      {"mem_mib", a.mem_mib},
  };
}

json ToJson(const model::Placement& p) {
  json parts = json::array();
  for (const auto& a : p.parts) parts.push_back(ToJson(a));
  return json{{"gpu_model", p.gpu_model}, {"parts", std::move(parts)}};
}

json ToJson(const CheckpointPolicy& c) {
  return json{{"dir", c.dir}, {"signal", c.signal}, {"grace_ms", c.grace.millis()}};
}

json ToJson(const RestartPolicy& r) {
  return json{
      {"on_preemption", r.on_preemption},
      {"max_restarts_on_errors", r.max_restarts_on_errors},
      {"recover_on_exit_codes", r.recover_on_exit_codes},
  };
}

json ToJson(const JobRequest& r) {
  return json{
      {"spec", ToJson(r.spec)},
      {"argv", r.argv},
      {"workdir", r.workdir},
      {"env", r.env},
      {"user", r.user},
      {"process_per_gpu", r.process_per_gpu},
      {"verify_network", r.verify_network},
      {"checkpoint", ToJson(r.checkpoint)},
      {"restart", ToJson(r.restart)},
      {"watchdog", {{"stall_timeout_ms", r.watchdog.stall_timeout.millis()}, {"restart_on_stall", r.watchdog.restart_on_stall}}},
      {"profile", model::BoundnessName(r.cost.profile)},
      {"estimate_model", r.cost.estimate_model},
      {"deadline_ms", OptionalMillis(r.cost.deadline)},
      {"max_hourly_cost_micros", r.cost.max_hourly_cost_micros},
      {"regions", r.cost.regions},
      {"workload", r.cost.workload},
      {"step_seconds", r.cost.step_seconds},
      {"clouds", r.cost.clouds},
      {"restart_overhead_ms", r.cost.restart_overhead.millis()},
      {"array_params", r.array_params},
  };
}

JobSummary SummaryOf(const JobRecord& r) {
  const model::JobSpec& s = r.request.spec;
  JobSummary o;
  o.id = r.id;
  o.name = s.name;
  o.team = s.team;
  o.priority = s.priority;
  o.state = r.state;
  o.reason = r.reason;
  o.gpus_per_node = s.gpus_per_node;
  o.gpu_milli = s.gpu_milli;
  o.nodes = s.nodes;
  o.gpu_models = s.gpu_models;
  o.submitted = r.submitted;
  o.updated = r.updated;
  o.attempt = r.attempt;
  o.exit_code = r.exit_code;
  o.placement = r.placement;
  return o;
}

json ToJson(const JobSummary& s) {
  json o = {{"id", s.id.value()},
            {"name", s.name},
            {"team", s.team},
            {"priority", s.priority},
            {"state", JobStateName(s.state)},
            {"reason", s.reason},
            {"gpus", s.fractional() ? json(static_cast<double>(s.gpu_milli) / 1000.0) : json(s.gpus_per_node)},
            {"nodes", s.nodes},
            {"gpu_type", s.gpu_models},
            {"submitted_ms", s.submitted.millis()},
            {"updated_ms", s.updated.millis()},
            {"attempt", s.attempt}};
  if (s.exit_code) o["exit_code"] = *s.exit_code;
  if (s.placement) o["placement"] = ToJson(*s.placement);
  if (s.position) o["position"] = *s.position;
  return o;
}

json ToJson(const JobRecord& r) {
  return json{
      {"id", r.id.value()},
      {"request_id", r.request_id},
      {"array_index", r.array_index},
      {"request", ToJson(r.request)},
      {"state", JobStateName(r.state)},
      {"reason", r.reason},
      {"submitted_ms", r.submitted.millis()},
      {"updated_ms", r.updated.millis()},
      {"attempt", r.attempt},
      {"error_restarts", r.error_restarts},
      {"placement", r.placement ? ToJson(*r.placement) : json(nullptr)},
      {"exit_code", r.exit_code ? json(*r.exit_code) : json(nullptr)},
      {"cost_micros", r.cost_micros},
      {"stop_intent", r.stop_intent},
  };
}

json ToJson(const Transition& t) {
  return json{
      {"at_ms", t.at.millis()},
      {"from", JobStateName(t.from)},
      {"to", JobStateName(t.to)},
      {"reason", t.reason},
  };
}

json ToJson(const GpuInfo& g) {
  return json{{"index", g.index},
              {"uuid", g.uuid},
              {"name", g.name},
              {"memory_mib", g.memory_mib},
              {"compute_capability", g.compute_capability}};
}

json ToJson(const NodeRecord& n) {
  json gpus = json::array();
  for (const auto& g : n.gpus) gpus.push_back(ToJson(g));
  json o{
      {"id", n.id.value()},
      {"name", n.name},
      {"spec", ToJson(n.spec)},
      {"gpus", std::move(gpus)},
      {"address", n.address},
      {"state", NodeStateName(n.state)},
      {"registered_ms", n.registered.millis()},
      {"last_heartbeat_ms", n.last_heartbeat.millis()},
  };
  o["driver_version"] = n.driver_version;
  o["cuda_version"] = n.cuda_version;
  o["environments_ready"] = n.environments_ready;
  o["acceptance"] = n.acceptance;
  o["acceptance_reason"] = n.acceptance_reason;
  o["drained"] = n.drained;
  o["burn_in"] = n.burn_in ? ToJson(*n.burn_in) : json(nullptr);
  return o;
}

json ToJson(const TokenRecord& t) {
  json o{
      {"hash", t.hash},
      {"kind", TokenKindName(t.kind)},
      {"subject", t.subject},
      {"role", t.role},
      {"team", t.team},
      {"created_ms", t.created.millis()},
      {"revoked", t.revoked},
  };
  if (t.expires) o["expires_ms"] = t.expires->millis();
  if (t.last_used) o["last_used_ms"] = t.last_used->millis();
  o["made_by"] = t.made_by;  // empty: made at a start
  return o;
}

Result<model::JobSpec> JobSpecFromJson(const json& j) { return Decode(j, &DecodeJobSpec); }
Result<model::NodeSpec> NodeSpecFromJson(const json& j) { return Decode(j, &DecodeNodeSpec); }
Result<model::NodeAssignment> NodeAssignmentFromJson(const json& j) { return Decode(j, &DecodeNodeAssignment); }
Result<model::Placement> PlacementFromJson(const json& j) { return Decode(j, &DecodePlacement); }
Result<CheckpointPolicy> CheckpointPolicyFromJson(const json& j) { return Decode(j, &DecodeCheckpointPolicy); }
Result<RestartPolicy> RestartPolicyFromJson(const json& j) { return Decode(j, &DecodeRestartPolicy); }
Result<JobRequest> JobRequestFromJson(const json& j) { return Decode(j, &DecodeJobRequest); }
Result<JobRecord> JobRecordFromJson(const json& j) { return Decode(j, &DecodeJobRecord); }
Result<JobSummary> JobSummaryFromJson(const json& j) { return Decode(j, &DecodeJobSummary); }
Result<Transition> TransitionFromJson(const json& j) { return Decode(j, &DecodeTransition); }
Result<GpuInfo> GpuInfoFromJson(const json& j) { return Decode(j, &DecodeGpuInfo); }
Result<NodeRecord> NodeRecordFromJson(const json& j) { return Decode(j, &DecodeNodeRecord); }
Result<TokenRecord> TokenRecordFromJson(const json& j) { return Decode(j, &DecodeTokenRecord); }

NodeSummary SummaryOf(const NodeRecord& r) {
  NodeSummary n;
  n.id = r.id;
  n.name = r.name;
  n.state = r.state;
  n.gpu_model = r.spec.gpu_model;
  n.gpus = r.spec.gpus;
  n.address = r.address;
  n.market = r.spec.market;
  n.labels = r.spec.labels;
  n.last_heartbeat = r.last_heartbeat;
  n.acceptance = r.acceptance;
  n.acceptance_reason = r.acceptance_reason;
  n.driver_version = r.driver_version;
  n.cuda_version = r.cuda_version;
  n.environments = r.spec.environments;
  n.environments_ready = r.spec.warm_environments;
  n.burn_in = r.burn_in;
  return n;
}

json ToJson(const NodeSummary& n) {
  json tel = json::array();
  for (const auto& g : n.telemetry) {
    tel.push_back({{"util_pct", g.util_pct},
                   {"mem_used_mib", g.mem_used_mib},
                   {"temperature_c", g.temperature_c},
                   {"power_w", g.power_w}});
  }
  json jobs = json::array();
  for (JobId j : n.jobs) jobs.push_back(j.value());
  json o = {{"id", n.id.value()},
            {"name", n.name},
            {"state", NodeStateName(n.state)},
            {"gpu_model", n.gpu_model},
            {"gpus", n.gpus},
            {"gpus_used", n.gpus_used},
            {"address", n.address},
            {"market", model::MarketName(n.market)},
            {"labels", n.labels},
            {"last_heartbeat_ms", n.last_heartbeat.millis()},
            {"heard_since_start", n.heard_since_start},
            {"telemetry", tel},
            {"jobs", jobs},
            {"acceptance", n.acceptance},
            {"acceptance_reason", n.acceptance_reason},
            {"driver_version", n.driver_version},
            {"cuda_version", n.cuda_version},
            {"environments", n.environments},
            {"environments_ready", n.environments_ready},
            {"burn_in", n.burn_in ? ToJson(*n.burn_in) : json(nullptr)}};
  if (n.notice) o["notice"] = ToJson(*n.notice);
  if (!n.storage_fault.empty()) o["storage_fault"] = n.storage_fault;
  json disks = json::array();
  for (const auto& d : n.disks) {
    disks.push_back({{"dir", d.dir}, {"path", d.path}, {"free_bytes", d.free_bytes}, {"size_bytes", d.size_bytes}});
  }
  o["disks"] = std::move(disks);
  if (!n.containment.empty()) o["containment"] = n.containment;
  o["limits"] = n.limits ? json{{"memory", n.limits->memory}, {"cpu", n.limits->cpu}} : json(nullptr);
  return o;
}

Result<NodeSummary> NodeSummaryFromJson(const json& j) { return Decode(j, &DecodeNodeSummary); }

TokenSummary SummaryOf(const TokenRecord& r) {
  TokenSummary t;
  t.id = r.Id();
  t.kind = r.kind;
  t.subject = r.subject;
  // A join token is stored with the agent role (it may register a machine) but shown as what it
  // is, as its creation's answer and the audit name it.
  t.role = r.kind == TokenKind::kJoin ? "join" : r.role;
  t.team = r.team;
  t.created = r.created;
  t.revoked = r.revoked;
  t.expires = r.expires;
  t.last_used = r.last_used;
  t.made_by = r.made_by;
  return t;
}

json ToJson(const TokenSummary& t) {
  json o = {{"id", t.id},     {"kind", TokenKindName(t.kind)}, {"subject", t.subject},
            {"role", t.role}, {"team", t.team},                {"created_ms", t.created.millis()},
            {"revoked", t.revoked}};
  if (t.expires) o["expires_ms"] = t.expires->millis();
  if (t.last_used) o["last_used_ms"] = t.last_used->millis();
  o["made_by"] = t.made_by;  // empty: made at a start
  return o;
}

Result<TokenSummary> TokenSummaryFromJson(const json& j) { return Decode(j, &DecodeTokenSummary); }

json ToJson(const AuditRecord& a) {
  return json{{"seq", a.seq},         {"at_ms", a.at.millis()}, {"subject", a.subject}, {"role", a.role},
              {"team", a.team},       {"source", a.source},     {"verb", a.verb},       {"object", a.object},
              {"outcome", a.outcome}, {"reason", a.reason},     {"request_id", a.request_id}};
}

Result<AuditRecord> AuditRecordFromJson(const json& j) { return Decode(j, &DecodeAuditRecord); }

namespace {
// ParseJson, with nlohmann's callback when one is given (it sees each event; the value is kept).
Result<json> ParseJsonWith(std::string_view text, const json::parser_callback_t& callback) {
  // nlohmann's tree, and every dump or walk of it, recurses once per level.
  Status depth = CheckNestingDepth(text, NestingSyntax::kJson);
  if (!depth.ok()) return Status::InvalidArgument("invalid JSON: " + depth.message());
  try {
    return callback ? json::parse(text, callback) : json::parse(text);
  } catch (const std::exception& e) {  // json::parse_error says where: "at line 1, column 9"
    return Status::InvalidArgument(std::string("invalid JSON: ") + e.what());
  }
}
}  // namespace

Result<json> ParseJson(std::string_view text) { return ParseJsonWith(text, nullptr); }

namespace {
bool HasNulByte(const std::string& s) { return s.find('\0') != std::string::npos; }

// Where the first string or key holding a NUL byte lies under `j`, relative to it: "" for `j`
// itself, ".events[2].message", " (a key)" for a key of `j`. The path is put together only on
// the way back from the one that holds it (a body of millions of values is walked once).
std::optional<std::string> NulPath(const json& j) {
  if (j.is_string()) return HasNulByte(j.get_ref<const std::string&>()) ? std::optional<std::string>("") : std::nullopt;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (HasNulByte(it.key())) return std::string(" (a key)");
      if (auto inner = NulPath(it.value())) return "." + it.key() + *inner;
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      if (auto inner = NulPath(j[i])) return "[" + std::to_string(i) + "]" + *inner;
    }
  }
  return std::nullopt;
}

}  // namespace

void ReplaceNul(std::string& s) {
  for (size_t at = s.find('\0'); at != std::string::npos; at = s.find('\0', at + 3)) s.replace(at, 1, "\xEF\xBF\xBD");
}

Result<json> ParseRequestJson(std::string_view text, bool refuse_nul) {
  // A key given twice in one object: nlohmann keeps the last, where a YAML job file is refused
  // for it; a body is refused too, naming where ("job.name").
  struct Frame {
    bool object = false;
    std::string label;  // its key in the object above, "[]" in an array, "" at the top
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  std::string pending_label;  // the key just read, for the value after it
  std::string duplicate;
  auto path_to = [&](const std::string& key) {
    std::string out;
    for (const Frame& f : frames) {
      if (f.label.empty()) continue;
      if (!out.empty() && f.label != "[]") out += '.';
      out += f.label;
    }
    return out.empty() ? key : out + "." + key;
  };
  json::parser_callback_t callback = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start: {
        Frame f;
        f.object = event == json::parse_event_t::object_start;
        f.label = frames.empty() ? "" : frames.back().object ? pending_label : "[]";
        frames.push_back(std::move(f));
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case json::parse_event_t::key: {
        pending_label = parsed.get<std::string>();
        if (duplicate.empty() && !frames.empty() && !frames.back().keys.insert(pending_label).second) {
          duplicate = path_to(pending_label);
        }
        break;
      }
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  GF_ASSIGN_OR_RETURN(json j, ParseJsonWith(text, callback));
  if (!duplicate.empty()) {
    return Status::InvalidArgument(duplicate + ": given twice; give each key once (only the last would count)");
  }
  if (!refuse_nul) return j;
  if (auto path = NulPath(j)) {
    std::string where = *path;
    if (where.empty()) {
      where = "the body";
    } else if (where == " (a key)") {
      where = "a key of the body";
    } else if (where[0] == '.') {
      where.erase(0, 1);
    }
    return Status::InvalidArgument(where + ": a NUL byte (\\u0000) is not accepted in any text");
  }
  return j;
}

void ReplaceNulBytes(json& j) {
  if (j.is_string()) {
    ReplaceNul(j.get_ref<std::string&>());
  } else if (j.is_object()) {
    std::vector<std::string> odd_keys;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (HasNulByte(it.key())) odd_keys.push_back(it.key());
      ReplaceNulBytes(it.value());
    }
    for (const std::string& key : odd_keys) {
      std::string clean = key;
      ReplaceNul(clean);
      json value = std::move(j[key]);
      j.erase(key);
      j[clean] = std::move(value);
    }
  } else if (j.is_array()) {
    for (json& e : j) ReplaceNulBytes(e);
  }
}

std::string WithoutNulEscapes(std::string text) {
  // An escape starts at a backslash that follows an even run of them (an odd run ends in one).
  size_t at = text.find("\\u0000");
  while (at != std::string::npos) {
    size_t run = 0;
    while (run < at && text[at - 1 - run] == '\\') ++run;
    if (run % 2 == 0) text.replace(at + 2, 4, "fffd");
    at = text.find("\\u0000", at + 6);
  }
  return text;
}

std::string DumpJson(const json& j) { return Dump(j); }

}  // namespace gpufleet::api

namespace gpufleet::api {
namespace {

// Appends compact JSON text as Dump() writes it. Keys are written by the caller in the order a
// json object keeps them (std::map: byte-wise ascending).
class TextWriter {
 public:
  explicit TextWriter(std::string& out) : out_(out) {}

  // Opens `{` or `[`, closes `}` or `]`; Key writes `"key":` after a comma when needed.
  void Open(char c) {
    Separate();
    out_ += c;
    first_ = true;
  }
  void Close(char c) {
    out_ += c;
    first_ = false;
  }
  void Key(std::string_view key) {
    Separate();
    out_ += '"';
    out_ += key;  // the callers' keys are plain ASCII
    out_ += "\":";
    first_ = true;  // the value follows without a comma
  }
  void String(std::string_view s) {
    Separate();
    AppendJsonString(out_, s);
  }
  void Int(int64_t v) {
    Separate();
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, end);
  }
  void Double(double v) {
    Separate();
    out_ += Dump(json(v));
  }
  void Bool(bool v) {
    Separate();
    out_ += v ? "true" : "false";
  }
  void Null() {
    Separate();
    out_ += "null";
  }
  void Strings(const std::vector<std::string>& v) {
    Open('[');
    for (const auto& s : v) String(s);
    Close(']');
  }
  void StringMap(const std::map<std::string, std::string>& m) {
    Open('{');
    for (const auto& [k, v] : m) {
      KeyString(k);
      String(v);
    }
    Close('}');
  }
  void DoubleMap(const std::map<std::string, double>& m) {
    Open('{');
    for (const auto& [k, v] : m) {
      KeyString(k);
      Double(v);
    }
    Close('}');
  }

 private:
  void Separate() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  // A key from the data (a map's), escaped as a string.
  void KeyString(const std::string& key) {
    String(key);
    out_ += ':';
    first_ = true;
  }

  std::string& out_;
  bool first_ = true;
};

void WriteSpec(TextWriter& w, const model::JobSpec& s) {
  w.Open('{');
  w.Key("checkpoint_interval_ms");
  w.Int(s.checkpoint_interval.millis());
  w.Key("constraints");
  w.StringMap(s.constraints);
  w.Key("cpu_milli");
  w.Int(s.cpu_milli);
  w.Key("duration_estimate_ms");
  if (s.duration_estimate) {
    w.Int(s.duration_estimate->millis());
  } else {
    w.Null();
  }
  w.Key("environment");
  w.String(s.environment);
  w.Key("gpu_milli");
  w.Int(s.gpu_milli);
  w.Key("gpu_models");
  w.Strings(s.gpu_models);
  w.Key("gpus_per_node");
  w.Int(s.gpus_per_node);
  w.Key("market");
  w.String(model::MarketPreferenceName(s.market));
  w.Key("max_cost_micros");
  w.Int(s.max_cost_micros);
  w.Key("mem_mib");
  w.Int(s.mem_mib);
  w.Key("name");
  w.String(s.name);
  w.Key("nodes");
  w.Int(s.nodes);
  w.Key("priority");
  w.Int(s.priority);
  w.Key("submit_ms");
  w.Int(s.submit.millis());
  w.Key("team");
  w.String(s.team);
  w.Close('}');
}

void WriteRequest(TextWriter& w, const JobRequest& r) {
  w.Open('{');
  w.Key("argv");
  w.Strings(r.argv);
  w.Key("array_params");
  w.StringMap(r.array_params);
  w.Key("checkpoint");
  w.Open('{');
  w.Key("dir");
  w.String(r.checkpoint.dir);
  w.Key("grace_ms");
  w.Int(r.checkpoint.grace.millis());
  w.Key("signal");
  w.Int(r.checkpoint.signal);
  w.Close('}');
  w.Key("clouds");
  w.Strings(r.cost.clouds);
  w.Key("deadline_ms");
  if (r.cost.deadline) {
    w.Int(r.cost.deadline->millis());
  } else {
    w.Null();
  }
  w.Key("env");
  w.StringMap(r.env);
  w.Key("estimate_model");
  w.String(r.cost.estimate_model);
  w.Key("max_hourly_cost_micros");
  w.Int(r.cost.max_hourly_cost_micros);
  w.Key("process_per_gpu");
  w.Bool(r.process_per_gpu);
  w.Key("profile");
  w.String(model::BoundnessName(r.cost.profile));
  w.Key("regions");
  w.Strings(r.cost.regions);
  w.Key("restart");
  w.Open('{');
  w.Key("max_restarts_on_errors");
  w.Int(r.restart.max_restarts_on_errors);
  w.Key("on_preemption");
  w.Bool(r.restart.on_preemption);
  w.Key("recover_on_exit_codes");
  w.Open('[');
  for (int code : r.restart.recover_on_exit_codes) w.Int(code);
  w.Close(']');
  w.Close('}');
  w.Key("restart_overhead_ms");
  w.Int(r.cost.restart_overhead.millis());
  w.Key("spec");
  WriteSpec(w, r.spec);
  w.Key("step_seconds");
  w.DoubleMap(r.cost.step_seconds);
  w.Key("user");
  w.String(r.user);
  w.Key("verify_network");
  w.Bool(r.verify_network);
  w.Key("watchdog");
  w.Open('{');
  w.Key("restart_on_stall");
  w.Bool(r.watchdog.restart_on_stall);
  w.Key("stall_timeout_ms");
  w.Int(r.watchdog.stall_timeout.millis());
  w.Close('}');
  w.Key("workdir");
  w.String(r.workdir);
  w.Key("workload");
  w.String(r.cost.workload);
  w.Close('}');
}

void WritePlacement(TextWriter& w, const model::Placement& p) {
  w.Open('{');
  w.Key("gpu_model");
  w.String(p.gpu_model);
  w.Key("parts");
  w.Open('[');
  for (const model::NodeAssignment& a : p.parts) {
    w.Open('{');
    w.Key("cpu_milli");
    w.Int(a.cpu_milli);
    w.Key("gpu_milli");
    w.Int(a.gpu_milli);
    w.Key("gpus");
    w.Open('[');
    for (int g : a.gpus) w.Int(g);
    w.Close(']');
    w.Key("mem_mib");
    w.Int(a.mem_mib);
    w.Key("node");
    w.Int(a.node.value());
    w.Close('}');
  }
  w.Close(']');
  w.Close('}');
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view s) {
  // Printable ASCII is written as is, escaping only quotes and backslashes; anything else
  // (control characters, UTF-8, bytes that are not UTF-8) goes through the json library so that
  // its escapes and replacements are the same.
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      out += Dump(json(std::string(s)));
      return;
    }
  }
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

std::string DumpJobRecord(const JobRecord& r) {
  std::string out;
  out.reserve(1024);
  TextWriter w(out);
  w.Open('{');
  w.Key("array_index");
  w.Int(r.array_index);
  w.Key("attempt");
  w.Int(r.attempt);
  w.Key("cost_micros");
  w.Int(r.cost_micros);
  w.Key("error_restarts");
  w.Int(r.error_restarts);
  w.Key("exit_code");
  if (r.exit_code) {
    w.Int(*r.exit_code);
  } else {
    w.Null();
  }
  w.Key("id");
  w.Int(r.id.value());
  w.Key("placement");
  if (r.placement) {
    WritePlacement(w, *r.placement);
  } else {
    w.Null();
  }
  w.Key("reason");
  w.String(r.reason);
  w.Key("request");
  WriteRequest(w, r.request);
  w.Key("request_id");
  w.String(r.request_id);
  w.Key("state");
  w.String(JobStateName(r.state));
  w.Key("stop_intent");
  w.String(r.stop_intent);
  w.Key("submitted_ms");
  w.Int(r.submitted.millis());
  w.Key("updated_ms");
  w.Int(r.updated.millis());
  w.Close('}');
  return out;
}

std::string DumpArrayTasks(const std::vector<JobRecord>& jobs, size_t begin, size_t end) {
  std::string out;
  out.reserve((end - begin) * 128);
  TextWriter w(out);
  w.Open('[');
  for (size_t i = begin; i < end; ++i) {
    const JobRecord& r = jobs[i];
    w.Open('{');
    w.Key("argv");
    w.Strings(r.request.argv);
    w.Key("array_index");
    w.Int(r.array_index);
    w.Key("array_params");
    w.StringMap(r.request.array_params);
    w.Key("env");
    w.StringMap(r.request.env);
    w.Key("name");
    w.String(r.request.spec.name);
    w.Key("workdir");
    w.String(r.request.workdir);
    w.Close('}');
  }
  w.Close(']');
  return out;
}

Status ApplyArrayTask(const json& element, const std::string& path, JobRecord& job) {
  Fields f(element, path);
  int index = f.Int("array_index");
  std::string name = f.String("name");
  std::vector<std::string> argv = f.Strings("argv");
  std::string workdir = f.String("workdir");
  std::map<std::string, std::string> env = f.StringMap("env");
  std::map<std::string, std::string> params = f.StringMap("array_params");
  if (!f.ok()) return f.status();
  job.array_index = index;
  job.request.spec.name = std::move(name);
  job.request.argv = std::move(argv);
  job.request.workdir = std::move(workdir);
  job.request.env = std::move(env);
  job.request.array_params = std::move(params);
  return Status::Ok();
}

}  // namespace gpufleet::api
