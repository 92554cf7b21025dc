#include "api/job_yaml.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "common/nesting.h"
#include "common/source_location.h"
#include "common/strings.h"

namespace gpufleet::api {
namespace {

constexpr int kMaxGpusPerNode = 1024;
constexpr int kMaxNodes = 4096;
constexpr int64_t kMaxCpuMilli = 100'000'000;          // 100k cores per node
constexpr int64_t kMaxMemMib = 64LL * 1024 * 1024;      // 64 TiB per node
constexpr size_t kMaxTextField = 64 * 1024;
// A job's command and environment together (exec takes about 2 MiB of both on Linux).
constexpr size_t kMaxJobText = 1024 * 1024;
// All the text one file's fields hold, each use of a YAML alias counted again: a small file
// of aliases to one long value would otherwise expand to gigabytes as it is read.
constexpr size_t kMaxFileText = 16 * 1024 * 1024;
// The command and environment of every job an array expands to, together.
constexpr size_t kMaxArrayText = 256 * 1024 * 1024;
constexpr int64_t kMaxDollars = 1'000'000'000;

std::string Suggest(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = 3;
  for (const auto& k : known) {
    size_t d = EditDistance(ToLower(word), k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

// Walks one document, remembering the source for error messages.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status Error(const YAML::Node& at, const std::string& field, const std::string& msg) const {
    std::string where = source_;
    if (at.IsDefined() && at.Mark().line >= 0) {
      where += ":" + std::to_string(at.Mark().line + 1) + ":" + std::to_string(at.Mark().column + 1);
    }
    return Status::InvalidArgument(where + ": " + (field.empty() ? "" : field + ": ") + msg);
  }

  // Checks that `node` is a map whose keys are all in `known`.
  Status Fields(const YAML::Node& node, const std::string& field, const std::vector<std::string>& known) const {
    if (!node.IsMap()) return Error(node, field, "must be a mapping (key: value lines)");
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) return Error(it->first, field, "keys must be plain names");
      std::string key = it->first.Scalar();
      std::string path = field.empty() ? key : field + "." + key;
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string hint = Suggest(key, known);
        return Error(it->first, path,
                     "unknown field" + (hint.empty() ? "; known fields: " + Join(known, ", ")
                                                     : " (did you mean '" + hint + "'?)"));
      }
      if (!seen.insert(key).second) return Error(it->first, path, "given twice");
    }
    return Status::Ok();
  }

  // Every text field goes through here, so none can carry a NUL byte ("\0" in YAML, "\u0000" in
  // JSON): argv, the environment and paths end at the first NUL in the C strings the agent
  // passes to exec, so what ran would differ from what was shown and checked.
  Result<std::string> String(const YAML::Node& n, const std::string& field) const {
    if (n.IsNull()) return Error(n, field, "is empty (null); give a value or leave the field out");
    if (!n.IsScalar()) return Error(n, field, "must be a single value, not a list or mapping");
    if (n.Scalar().size() > kMaxTextField) {
      return Error(n, field, "is longer than " + std::to_string(kMaxTextField) + " characters");
    }
    if (n.Scalar().find('\0') != std::string::npos) return Error(n, field, "must not contain a NUL byte");
    text_read_ += n.Scalar().size();
    if (text_read_ > kMaxFileText) {
      return Error(n, field,
                   "the file's values come to more than " + std::to_string(kMaxFileText / (1024 * 1024)) +
                       " MiB (each use of a YAML alias counts again)");
    }
    return n.Scalar();
  }

  Result<int64_t> Int(const YAML::Node& n, const std::string& field, int64_t lo, int64_t hi) const {
    GF_ASSIGN_OR_RETURN(std::string s, String(n, field));
    auto v = ParseInt(Trim(s));
    if (!v) return Error(n, field, "must be a whole number, got '" + s + "'");
    if (*v < lo || *v > hi) {
      return Error(n, field, "must be from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got " + s);
    }
    return *v;
  }

  Result<bool> Bool(const YAML::Node& n, const std::string& field) const {
    GF_ASSIGN_OR_RETURN(std::string s, String(n, field));
    std::string l = ToLower(s);
    if (l == "true" || l == "yes" || l == "on") return true;
    if (l == "false" || l == "no" || l == "off") return false;
    return Error(n, field, "must be true or false, got '" + s + "'");
  }

  // `max` and its words (a year unless said): the limit an error names.
  Result<Duration> Dur(const YAML::Node& n, const std::string& field, bool allow_zero,
                       Duration max = Duration::Hours(24 * 366), const char* max_text = "a year") const {
    GF_ASSIGN_OR_RETURN(std::string s, String(n, field));
    auto d = ParseDuration(Trim(s));
    if (!d) return Error(n, field, "must be a duration like 90s, 15m, 1h30m or 2d, got '" + s + "'");
    if (*d < Duration::Zero() || (!allow_zero && *d == Duration::Zero())) {
      return Error(n, field, std::string("must be ") + (allow_zero ? "zero or more" : "positive") + ", got '" + s + "'");
    }
    if (*d > max) return Error(n, field, std::string("must be at most ") + max_text + ", got '" + s + "'");
    return *d;
  }

  Result<std::vector<std::string>> StringList(const YAML::Node& n, const std::string& field,
                                              bool allow_scalar) const {
    std::vector<std::string> out;
    if (n.IsScalar() && allow_scalar) {
      GF_ASSIGN_OR_RETURN(std::string s, String(n, field));
      out.push_back(s);
      return out;
    }
    if (!n.IsSequence()) return Error(n, field, "must be a list like [a, b]");
    for (size_t i = 0; i < n.size(); ++i) {
      GF_ASSIGN_OR_RETURN(std::string s, String(n[i], field + "[" + std::to_string(i) + "]"));
      out.push_back(s);
    }
    return out;
  }

  Result<std::map<std::string, std::string>> StringMap(const YAML::Node& n, const std::string& field) const {
    if (!n.IsMap()) return Error(n, field, "must be a mapping of names to values");
    std::map<std::string, std::string> out;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar() || it->first.Scalar().empty()) return Error(it->first, field, "keys must be non-empty names");
      std::string key = it->first.Scalar();
      if (key.find('\0') != std::string::npos) return Error(it->first, field, "a key contains a NUL byte");
      GF_ASSIGN_OR_RETURN(std::string v, String(it->second, field + "." + key));
      if (!out.emplace(key, v).second) return Error(it->first, field + "." + key, "given twice");
    }
    return out;
  }

 private:
  std::string source_;
  mutable size_t text_read_ = 0;  // bytes of every value read so far (see kMaxFileText)
};

// The bytes a job's command and environment take (what its exec is handed).
size_t JobText(const JobRequest& j) {
  size_t n = 0;
  for (const std::string& a : j.argv) n += a.size() + 1;
  for (const auto& [k, v] : j.env) n += k.size() + v.size() + 2;
  return n;
}

// A refused name as an error shows it: control characters (terminal escapes) as '?', and at most
// 64 characters of it.
std::string Shown(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 64)) out += std::iscntrl(static_cast<unsigned char>(c)) ? '?' : c;
  return s.size() > 64 ? out + "... (" + std::to_string(s.size()) + " bytes)" : out;
}

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

// What gpufleet sets in the environment of every part of a job (engine.cc, agent.cc): a job
// that set them itself would see its GPUs, rendezvous or rank silently replaced, or, where a
// launcher kept the job's value, run on GPUs or ranks it was not given.
const std::vector<std::string> kReservedEnv = {"CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT",
                                               "WORLD_SIZE",           "RANK",        "LOCAL_RANK",
                                               "NODE_RANK",            "NNODES",      "NPROC_PER_NODE"};

bool ReservedEnvName(const std::string& s) {
  return StartsWith(s, "GPUFLEET_") || std::find(kReservedEnv.begin(), kReservedEnv.end(), s) != kReservedEnv.end();
}

bool ValidEnvName(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

const std::vector<std::string> kTopFields = {
    "name",     "team",        "priority", "resources",       "run",      "workdir", "env",
    "user",     "process_per_gpu", "market", "estimate",      "profile",  "deadline", "max_hourly_cost",
    "max_cost", "regions",     "constraints", "checkpoint",   "restart",  "array", "watchdog",
    "environment", "network", "workload", "step_time", "clouds"};

struct ArrayAxis {
  std::string name;
  std::vector<std::string> values;
};

std::string Substitute(const std::string& text, const std::map<std::string, std::string>& params) {
  if (params.empty() || text.find("{{") == std::string::npos) return text;
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t open = text.find("{{", i);
    if (open == std::string::npos) break;
    size_t close = text.find("}}", open + 2);
    if (close == std::string::npos) break;
    std::string key(Trim(std::string_view(text).substr(open + 2, close - open - 2)));
    auto it = params.find(key);
    out.append(text, i, open - i);
    if (it != params.end()) {
      out += it->second;
    } else {
      out.append(text, open, close + 2 - open);
    }
    i = close + 2;
  }
  out.append(text, i, std::string::npos);
  return out;
}

std::string EnvKey(const std::string& param) {
  std::string k = "GPUFLEET_PARAM_";
  for (char c : param) k += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  return k;
}

// Parses one document into a request plus its array axes (not yet expanded).
Status ParseOne(const Reader& r, const YAML::Node& doc, const model::GpuCatalog& catalog,
                const JobParseOptions& options, JobRequest& out, std::vector<ArrayAxis>& axes) {
  GF_RETURN_IF_ERROR(r.Fields(doc, "", kTopFields));
  model::JobSpec& spec = out.spec;
  spec.name = "job";
  spec.team = options.default_team;

  if (auto n = doc["name"]) {
    GF_ASSIGN_OR_RETURN(spec.name, r.String(n, "name"));
    // A name with "{{param}}" is checked once the array's values are filled in.
    if (spec.name.find("{{") == std::string::npos && !ValidName(spec.name)) {
      return r.Error(n, "name", "use 1-128 letters, digits, '-', '_' or '.', got '" + Shown(spec.name) + "'");
    }
  }
  if (auto n = doc["team"]) {
    GF_ASSIGN_OR_RETURN(spec.team, r.String(n, "team"));
    if (!ValidName(spec.team)) return r.Error(n, "team", "use 1-128 letters, digits, '-', '_' or '.', got '" + Shown(spec.team) + "'");
  }
  if (auto n = doc["priority"]) {
    GF_ASSIGN_OR_RETURN(int64_t p, r.Int(n, "priority", -1000, 1000));
    spec.priority = static_cast<int>(p);
  }

  // Resources.
  spec.gpus_per_node = 1;
  spec.nodes = 1;
  if (auto res = doc["resources"]) {
    GF_RETURN_IF_ERROR(r.Fields(res, "resources", {"gpus", "gpu_type", "nodes", "cpus", "memory"}));
    if (auto n = res["gpus"]) {
      GF_ASSIGN_OR_RETURN(std::string s, r.String(n, "resources.gpus"));
      auto v = ParseDouble(Trim(s));
      if (!v || !std::isfinite(*v)) return r.Error(n, "resources.gpus", "must be a number, got '" + s + "'");
      if (*v < 0 || *v > kMaxGpusPerNode) {
        return r.Error(n, "resources.gpus",
                       "must be from 0 to " + std::to_string(kMaxGpusPerNode) + " per node, got " + s);
      }
      if (*v > 0 && *v < 1) {
        int64_t milli = std::llround(*v * 1000);
        if (milli < 1) return r.Error(n, "resources.gpus", "a GPU slice must be at least 0.001, got " + s);
        spec.gpus_per_node = 1;
        spec.gpu_milli = milli;
      } else {
        if (*v != std::floor(*v)) {
          return r.Error(n, "resources.gpus", "must be a whole number of GPUs, or a fraction below 1 for a slice; got " + s);
        }
        spec.gpus_per_node = static_cast<int>(*v);
      }
    }
    if (auto n = res["gpu_type"]) {
      GF_ASSIGN_OR_RETURN(auto names, r.StringList(n, "resources.gpu_type", true));
      for (size_t i = 0; i < names.size(); ++i) {
        const model::GpuModel* m = catalog.Find(names[i]);
        if (!m) {
          std::vector<std::string> known;
          for (const auto& gm : catalog.models()) known.push_back(gm.name);
          return r.Error(n.IsSequence() ? n[i] : n, "resources.gpu_type",
                         "unknown GPU model '" + names[i] + "'; known models: " + Join(known, ", "));
        }
        if (std::find(spec.gpu_models.begin(), spec.gpu_models.end(), m->name) != spec.gpu_models.end()) {
          return r.Error(n, "resources.gpu_type", "'" + names[i] + "' is listed twice");
        }
        spec.gpu_models.push_back(m->name);
      }
    }
    if (auto n = res["nodes"]) {
      GF_ASSIGN_OR_RETURN(int64_t v, r.Int(n, "resources.nodes", 1, kMaxNodes));
      spec.nodes = static_cast<int>(v);
    }
    if (auto n = res["cpus"]) {
      GF_ASSIGN_OR_RETURN(std::string s, r.String(n, "resources.cpus"));
      auto v = ParseDouble(Trim(s));
      if (!v || !std::isfinite(*v) || *v < 0 || *v * 1000 > kMaxCpuMilli) {
        return r.Error(n, "resources.cpus", "must be a number of cores from 0 to 100000, got '" + s + "'");
      }
      spec.cpu_milli = std::llround(*v * 1000);
      if (*v > 0 && spec.cpu_milli == 0) {
        // (0 means no CPU limit: a tiny request must not turn into none.)
        return r.Error(n, "resources.cpus", "the smallest share is 0.001 cores, got '" + s + "'");
      }
    }
    if (auto n = res["memory"]) {
      GF_ASSIGN_OR_RETURN(std::string s, r.String(n, "resources.memory"));
      auto v = ParseMemoryMib(s);
      if (!v.ok()) return r.Error(n, "resources.memory", v.status().message());
      spec.mem_mib = *v;
    }
    if (spec.fractional() && spec.nodes != 1) {
      return r.Error(res, "resources", "a GPU slice (gpus below 1) runs on one node; remove nodes or ask for whole GPUs");
    }
  }

  // The command.
  if (auto n = doc["run"]) {
    if (n.IsNull()) {
      return r.Error(n, "run", "is empty: give a shell command (run: python3 train.py) or a list used as argv "
                               "(run: [python3, train.py])");
    }
    if (n.IsScalar()) {
      GF_ASSIGN_OR_RETURN(std::string cmd, r.String(n, "run"));
      if (Trim(cmd).empty()) return r.Error(n, "run", "must not be empty");
      out.argv = {"/bin/sh", "-c", cmd};
    } else {
      GF_ASSIGN_OR_RETURN(out.argv, r.StringList(n, "run", false));
      if (out.argv.empty() || out.argv[0].empty()) return r.Error(n, "run", "must name a program");
    }
  } else if (options.require_run) {
    return r.Error(doc, "run", "missing: say what to run, e.g. run: python3 train.py");
  }
  if (auto n = doc["workdir"]) {
    GF_ASSIGN_OR_RETURN(out.workdir, r.String(n, "workdir"));
    if (!out.workdir.empty() && out.workdir[0] != '/' && out.workdir.find("{{") != 0) {
      return r.Error(n, "workdir", "must be an absolute path, got '" + out.workdir + "'");
    }

  }
  if (auto n = doc["env"]) {
    // Only names the user wrote are checked: an array's GPUFLEET_* variables are added later.
    GF_ASSIGN_OR_RETURN(out.env, r.StringMap(n, "env"));
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string k = it->first.Scalar();
      if (k.find('=') != std::string::npos) {
        return r.Error(it->first, "env." + k, "must not contain '=' (the environment holds NAME=value)");
      }
      if (!ValidEnvName(k)) return r.Error(it->first, "env." + k, "is not a valid environment variable name (letters, digits and _, not starting with a digit)");
      if (ReservedEnvName(k)) {
        return r.Error(it->first, "env." + k, "is set by gpufleet for each part and cannot be overridden");
      }
    }
  }
  if (const size_t text = JobText(out); text > kMaxJobText) {
    return r.Error(doc["run"] ? doc["run"] : doc, "run",
                   "the command and environment come to " + std::to_string(text) + " bytes, more than " +
                       std::to_string(kMaxJobText) + " (exec takes about 2 MiB of both); put long settings in a file");
  }
  if (auto n = doc["environment"]) {
    // Only the shape is checked here: whether the name is one of the presets is the
    // controller's to say (its table, not this client's, decides where the job can run).
    GF_ASSIGN_OR_RETURN(spec.environment, r.String(n, "environment"));
    if (!ValidName(spec.environment)) {
      return r.Error(n, "environment",
                     "must name an environment preset such as pytorch-2.5-cu124 (`gpufleet environments` lists "
                     "them; leave the field out to use the node's own software), got '" +
                         spec.environment + "'");
    }
    if (options.check_environment) {
      if (Status st = options.check_environment(spec.environment); !st.ok()) {
        return r.Error(n, "environment", st.message());
      }
    }
  }
  if (auto n = doc["user"]) {
    GF_ASSIGN_OR_RETURN(out.user, r.String(n, "user"));
    if (!ValidName(out.user)) return r.Error(n, "user", "is not a valid user name");
    if (out.user == "root" || out.user == "0") {
      return r.Error(n, "user",
                     "jobs cannot run as root; leave user: out (the agent runs jobs as its job user, docs/security.md)");
    }
  }
  if (auto n = doc["process_per_gpu"]) {
    GF_ASSIGN_OR_RETURN(out.process_per_gpu, r.Bool(n, "process_per_gpu"));
  }
  if (auto n = doc["network"]) {
    GF_ASSIGN_OR_RETURN(std::string s, r.String(n, "network"));
    if (s != "verified" && s != "any") {
      return r.Error(n, "network", "must be verified (check the gang's nodes reach each other first) or any, got '" + s + "'");
    }
    out.verify_network = s == "verified";
  }
  if (auto n = doc["market"]) {
    GF_ASSIGN_OR_RETURN(std::string s, r.String(n, "market"));
    auto m = model::ParseMarketPreference(s);
    if (!m.ok()) return r.Error(n, "market", "must be any, spot or on-demand, got '" + s + "'");
    spec.market = *m;
  }
  if (auto n = doc["estimate"]) {
    GF_ASSIGN_OR_RETURN(std::string s, r.String(n, "estimate"));
    std::string dur = s;
    size_t on = s.find(" on ");
    if (on != std::string::npos) {
      dur = s.substr(0, on);
      std::string model(Trim(s.substr(on + 4)));
      const model::GpuModel* m = catalog.Find(model);
      if (!m) return r.Error(n, "estimate", "unknown GPU model '" + model + "' (write e.g. '10h on A100')");
      out.cost.estimate_model = m->name;
    }
    const std::string_view amount = Trim(dur);
    if (!amount.empty() && amount.find_first_not_of("0123456789.") == std::string_view::npos) {
      // A bare number would be read as seconds: "10 on A100" meant hours far more often.
      return r.Error(n, "estimate", "'" + std::string(amount) + "' has no unit; say which, e.g. '" +
                                        std::string(amount) + "h" + (on == std::string::npos ? "" : s.substr(on)) +
                                        "' (s, m, h, d or w)");
    }
    auto d = ParseDuration(amount);
    if (!d || *d <= Duration::Zero()) {
      return r.Error(n, "estimate", "must be a positive duration, optionally with a GPU model: '10h' or '10h on A100'; got '" + s + "'");
    }
    if (*d > Duration::Hours(24 * 366)) {
      return r.Error(n, "estimate", "must be at most a year (366d); got '" + s + "'");
    }
    spec.duration_estimate = *d;
  } else if (options.require_estimate) {
    return r.Error(doc, "estimate", "missing: say how long the job runs on one GPU model, e.g. estimate: 10h on A100");
  }
  if (auto n = doc["profile"]) {
    GF_ASSIGN_OR_RETURN(std::string p, r.String(n, "profile"));
    auto b = model::ParseBoundness(p);
    if (!b.ok() || p != Trim(p) || p != ToLower(p)) {
      return r.Error(n, "profile", "must be compute, memory or balanced, got '" + p + "'");
    }
    out.cost.profile = *b;
  }
  if (auto n = doc["workload"]) {
    GF_ASSIGN_OR_RETURN(out.cost.workload, r.String(n, "workload"));
    if (!ValidName(out.cost.workload)) {
      return r.Error(n, "workload", "must name a workload class such as training-vision, got '" + out.cost.workload + "'");
    }
    if (options.speeds != nullptr) {
      if (Status known = options.speeds->CheckClass(out.cost.workload); !known.ok()) {
        return r.Error(n, "workload", known.message());
      }
    }
  }
  if (auto st = doc["step_time"]) {
    if (!st.IsMap()) return r.Error(st, "step_time", "must be a mapping of GPU: time per step such as {A100: 0.42s}");
    for (auto it = st.begin(); it != st.end(); ++it) {
      GF_ASSIGN_OR_RETURN(std::string name, r.String(it->first, "step_time"));
      const model::GpuModel* m = catalog.Find(name);
      if (m == nullptr) return r.Error(it->first, "step_time", "unknown GPU model '" + name + "'");
      GF_ASSIGN_OR_RETURN(std::string v, r.String(it->second, "step_time." + name));
      auto seconds = model::ParseStepSeconds(v);
      if (!seconds) {
        return r.Error(it->second, "step_time." + name,
                       "must be a positive time per step such as 0.42s or 420ms, got '" + v + "'");
      }
      if (!out.cost.step_seconds.emplace(m->name, *seconds).second) {
        return r.Error(it->first, "step_time." + name, "names " + m->name + " twice");
      }
    }
  }
  if (auto n = doc["deadline"]) {
    GF_ASSIGN_OR_RETURN(Duration d, r.Dur(n, "deadline", false));
    out.cost.deadline = d;
  }
  if (auto n = doc["max_hourly_cost"]) {
    GF_ASSIGN_OR_RETURN(std::string s, r.String(n, "max_hourly_cost"));
    auto v = ParseDollars(s);
    if (!v.ok()) return r.Error(n, "max_hourly_cost", v.status().message());
    // Zero is not "no cap" (that is leaving the field out) nor a cap anything could meet.
    if (*v == 0) {
      return r.Error(n, "max_hourly_cost",
                     "must be more than 0 (USD per hour for the whole job), got '" + s + "'; leave max_hourly_cost out for no cap");
    }
    out.cost.max_hourly_cost_micros = *v;
  }
  if (auto n = doc["max_cost"]) {
    GF_ASSIGN_OR_RETURN(std::string s, r.String(n, "max_cost"));
    auto v = ParseDollars(s);
    if (!v.ok()) return r.Error(n, "max_cost", v.status().message());
    spec.max_cost_micros = *v;
  }
  if (auto n = doc["regions"]) {
    GF_ASSIGN_OR_RETURN(out.cost.regions, r.StringList(n, "regions", true));
  }
  if (auto n = doc["clouds"]) {
    GF_ASSIGN_OR_RETURN(out.cost.clouds, r.StringList(n, "clouds", true));
    for (size_t i = 0; i < out.cost.clouds.size(); ++i) {
      if (!ValidName(out.cost.clouds[i])) {
        return r.Error(n.IsSequence() ? n[i] : n, "clouds", "must name a cloud such as aws or gcp, got '" + out.cost.clouds[i] + "'");
      }
    }
  }
  if (auto n = doc["constraints"]) {
    GF_ASSIGN_OR_RETURN(spec.constraints, r.StringMap(n, "constraints"));
  }
  if (auto ck = doc["checkpoint"]) {
    GF_RETURN_IF_ERROR(r.Fields(ck, "checkpoint", {"dir", "signal", "grace", "interval", "restart_overhead"}));
    if (auto n = ck["dir"]) {
      GF_ASSIGN_OR_RETURN(out.checkpoint.dir, r.String(n, "checkpoint.dir"));
      if (!out.checkpoint.dir.empty() && out.checkpoint.dir[0] != '/') {
        return r.Error(n, "checkpoint.dir", "must be an absolute path, got '" + out.checkpoint.dir + "'");
      }
    }
    if (auto n = ck["signal"]) {
      GF_ASSIGN_OR_RETURN(std::string s, r.String(n, "checkpoint.signal"));
      auto sig = ParseSignal(s);
      if (!sig.ok()) return r.Error(n, "checkpoint.signal", sig.status().message());
      out.checkpoint.signal = *sig;
    }
    if (auto n = ck["grace"]) {
      GF_ASSIGN_OR_RETURN(out.checkpoint.grace, r.Dur(n, "checkpoint.grace", true, Duration::Hours(1), "1h"));
    }
    if (auto n = ck["interval"]) {
      // Zero is refused, not read as "never": `plan --checkpoint-interval` is the same quantity,
      // and a job that never checkpoints says so by giving no interval.
      GF_ASSIGN_OR_RETURN(spec.checkpoint_interval, r.Dur(n, "checkpoint.interval", true));
      if (spec.checkpoint_interval == Duration::Zero()) {
        return r.Error(n, "checkpoint.interval",
                       "must be positive, got '" + n.Scalar() +
                           "'; for a job that never checkpoints, leave interval out (an interruption then "
                           "loses all the work done)");
      }
    }
    if (auto n = ck["restart_overhead"]) {
      GF_ASSIGN_OR_RETURN(out.cost.restart_overhead, r.Dur(n, "checkpoint.restart_overhead", true));
    }
  }
  if (auto rs = doc["restart"]) {
    GF_RETURN_IF_ERROR(r.Fields(rs, "restart", {"on_preemption", "max_restarts_on_errors", "recover_on_exit_codes"}));
    if (auto n = rs["on_preemption"]) {
      GF_ASSIGN_OR_RETURN(out.restart.on_preemption, r.Bool(n, "restart.on_preemption"));
    }
    if (auto n = rs["max_restarts_on_errors"]) {
      GF_ASSIGN_OR_RETURN(int64_t v, r.Int(n, "restart.max_restarts_on_errors", 0, 1000));
      out.restart.max_restarts_on_errors = static_cast<int>(v);
    }
    if (auto n = rs["recover_on_exit_codes"]) {
      if (!n.IsSequence()) return r.Error(n, "restart.recover_on_exit_codes", "must be a list like [75, 143]");
      for (size_t i = 0; i < n.size(); ++i) {
        GF_ASSIGN_OR_RETURN(int64_t v, r.Int(n[i], "restart.recover_on_exit_codes", 1, 255));
        out.restart.recover_on_exit_codes.push_back(static_cast<int>(v));
      }
    }
  }
  if (auto wd = doc["watchdog"]) {
    GF_RETURN_IF_ERROR(r.Fields(wd, "watchdog", {"stall_timeout", "on_stall"}));
    if (auto n = wd["stall_timeout"]) {
      GF_ASSIGN_OR_RETURN(out.watchdog.stall_timeout, r.Dur(n, "watchdog.stall_timeout", false));
      if (out.watchdog.stall_timeout < Duration::Seconds(10)) {
        return r.Error(n, "watchdog.stall_timeout", "must be at least 10s (the watchdog checks every few seconds)");
      }
    }
    if (auto n = wd["on_stall"]) {
      GF_ASSIGN_OR_RETURN(std::string v, r.String(n, "watchdog.on_stall"));
      if (v != "alert" && v != "restart") {
        return r.Error(n, "watchdog.on_stall", "must be alert or restart, got '" + v + "'");
      }
      out.watchdog.restart_on_stall = v == "restart";
    }
    if (out.watchdog.restart_on_stall && out.watchdog.stall_timeout <= Duration::Zero()) {
      return r.Error(wd, "watchdog", "on_stall: restart needs a stall_timeout");
    }
  }
  if (auto n = doc["array"]) {
    if (!n.IsMap() || n.size() == 0) {
      return r.Error(n, "array", "must map parameter names to lists of values, e.g. array: {lr: [0.1, 0.01]}");
    }
    int64_t total = 1;
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string name = it->first.Scalar();
      if (!ValidEnvName(name)) return r.Error(it->first, "array." + name, "parameter names use letters, digits and '_'");
      for (const ArrayAxis& earlier : axes) {
        if (earlier.name == name) return r.Error(it->first, "array." + name, "given twice");
        if (EnvKey(earlier.name) == EnvKey(name)) {
          return r.Error(it->first, "array." + name,
                         "differs from the parameter " + earlier.name + " only in case; both would be " +
                             EnvKey(name) + " in the job's environment");
        }
      }
      GF_ASSIGN_OR_RETURN(auto values, r.StringList(it->second, "array." + name, false));
      if (values.empty()) return r.Error(it->second, "array." + name, "needs at least one value");
      total *= static_cast<int64_t>(values.size());
      if (total > kMaxArrayJobs) {
        return r.Error(n, "array", "expands to more than " + std::to_string(kMaxArrayJobs) + " jobs");
      }
      axes.push_back({name, std::move(values)});
    }
    // A placeholder that names none of the parameters (a typo: {{lrr}}) would reach every job
    // as literal text; text between braces that is no parameter-like name ({{.State}}) is left.
    std::vector<std::string> names;
    for (const ArrayAxis& axis : axes) names.push_back(axis.name);
    auto check = [&](const std::string& text, const char* field) -> Status {
      for (size_t open = text.find("{{"); open != std::string::npos; open = text.find("{{", open + 2)) {
        // A parameter's name right after "{{" that is not closed by "}}" ({{lr} or {{lr): a typo
        // that would reach every job as literal text.
        size_t at = open + 2;
        while (at < text.size() && text[at] == ' ') ++at;
        size_t end = at;
        while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
        const std::string word = text.substr(at, end - at);
        if (std::find(names.begin(), names.end(), word) != names.end()) {
          size_t after = end;
          while (after < text.size() && text[after] == ' ') ++after;
          if (text.compare(after, 2, "}}") != 0) {
            return r.Error(doc[field] ? doc[field] : doc, field,
                           "{{" + word + " is not closed: write {{" + word + "}}");
          }
        }
        size_t close = text.find("}}", open + 2);
        if (close == std::string::npos) break;
        std::string key(Trim(std::string_view(text).substr(open + 2, close - open - 2)));
        if (!ValidEnvName(key) || std::find(names.begin(), names.end(), key) != names.end()) continue;
        return r.Error(doc[field] ? doc[field] : doc, field,
                       "{{" + key + "}} is not one of the array's parameters (" + Join(names, ", ") + ")");
      }
      return Status::Ok();
    };
    GF_RETURN_IF_ERROR(check(spec.name, "name"));
    for (const std::string& a : out.argv) GF_RETURN_IF_ERROR(check(a, "run"));
    GF_RETURN_IF_ERROR(check(out.workdir, "workdir"));
    for (const auto& [k, v] : out.env) GF_RETURN_IF_ERROR(check(v, "env"));
  }
  Status valid = spec.Validate();
  if (!valid.ok()) return r.Error(doc["resources"] ? doc["resources"] : doc, "resources", valid.message());
  return Status::Ok();
}

// Takes yaml-cpp's parse events and keeps nothing.
class IgnoreEvents : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Whether `text` is one JSON object (after any white space), which YAML reads as one document.
bool IsJsonObject(std::string_view text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '{' && nlohmann::json::accept(text);
}

// yaml-cpp's LoadAll never returns on some malformed text (",", or "\"a\" b\n? x": a document
// that starts with a token its parser does not consume, jbeder/yaml-cpp#1040, fixed after 0.8):
// it adds empty documents until memory runs out. This pass counts the documents with a bounded
// loop and builds nothing, so LoadAll only ever sees text whose documents come to an end.
// Throws what the parser throws.
Status CheckDocumentsEnd(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  IgnoreEvents events;
  for (int docs = 0; parser.HandleNextDocument(events);) {
    if (++docs > kMaxArrayJobs) {
      return Status::InvalidArgument(source + ": holds more than " + std::to_string(kMaxArrayJobs) +
                                     " YAML documents, or text that yaml-cpp reads as endless empty ones");
    }
  }
  return Status::Ok();
}

JobRequest Expand(const JobRequest& base, const std::map<std::string, std::string>& params, int index) {
  JobRequest j = base;
  j.array_params = params;
  bool named = base.spec.name.find("{{") != std::string::npos;
  j.spec.name = named ? Substitute(base.spec.name, params) : base.spec.name + "-" + std::to_string(index);
  for (auto& a : j.argv) a = Substitute(a, params);
  j.workdir = Substitute(j.workdir, params);
  for (auto& [k, v] : j.env) v = Substitute(v, params);
  j.env["GPUFLEET_ARRAY_INDEX"] = std::to_string(index);
  for (const auto& [k, v] : params) j.env[EnvKey(k)] = v;
  return j;
}

}  // namespace

bool ValidTeamName(const std::string& s) { return ValidName(s); }

Status CheckName(const std::string& field, const std::string& value) {
  if (ValidName(value)) return Status::Ok();
  return Status::InvalidArgument(field + ": use 1-128 letters, digits, '-', '_' or '.', got '" + value + "'");
}

bool ValidNodeName(const std::string& name) {
  return !name.empty() && name.size() <= 253 &&
         name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
             std::string::npos;
}

Result<int64_t> ParseMemoryMib(std::string_view text) {
  std::string s(Trim(text));
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  auto num = ParseDouble(s.substr(0, i));
  std::string unit = s.substr(i);
  double mult = 0;
  if (unit.empty() || unit == "Mi" || unit == "M" || unit == "MiB" || unit == "MB") mult = 1;
  if (unit == "Gi" || unit == "G" || unit == "GiB" || unit == "GB") mult = 1024;
  if (unit == "Ti" || unit == "T" || unit == "TiB" || unit == "TB") mult = 1024.0 * 1024;
  if (!num || mult == 0 || !std::isfinite(*num)) {
    return Status::InvalidArgument("must be an amount like 512Mi, 64Gi or 1Ti, got '" + s + "'");
  }
  double mib = *num * mult;
  if (mib < 0 || mib > static_cast<double>(kMaxMemMib)) {
    return Status::InvalidArgument("must be from 0 to 64Ti per node, got '" + s + "'");
  }
  return static_cast<int64_t>(std::llround(mib));
}

namespace {
const std::vector<std::pair<std::string, int>> kSignals = {
    {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"ALRM", SIGALRM}, {"CONT", SIGCONT},
};
}  // namespace

Result<int> ParseSignal(std::string_view text) {
  std::string s(Trim(text));
  std::string name = s;
  for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (StartsWith(name, "SIG")) name = name.substr(3);
  if (auto v = ParseInt(name)) {
    for (const auto& [n, sig] : kSignals) {
      if (sig == *v) return sig;
    }
  }
  for (const auto& [n, sig] : kSignals) {
    if (n == name) return sig;
  }
  return Status::InvalidArgument("must be one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCONT; got '" + s + "'");
}

std::string SignalName(int sig) {
  for (const auto& [n, s] : kSignals) {
    if (s == sig) return "SIG" + n;
  }
  return std::to_string(sig);
}

Result<int64_t> ParseDollars(std::string_view text) {
  std::string s(Trim(text));
  if (!s.empty() && s[0] == '$') s = s.substr(1);
  auto v = ParseDouble(s);
  if (!v || !std::isfinite(*v) || *v < 0 || *v > kMaxDollars) {
    return Status::InvalidArgument("must be an amount of dollars like 40 or 12.50, got '" + std::string(text) + "'");
  }
  return static_cast<int64_t>(std::llround(*v * 1e6));
}

Result<std::vector<JobRequest>> ParseJobs(std::string_view text, const JobParseOptions& options) {
  const model::GpuCatalog& catalog = options.catalog ? *options.catalog : model::GpuCatalog::BuiltIn();
  Reader r(options.source);
  // yaml-cpp parses recursively: bound the depth first (a job nests about 5 levels).
  Status depth = CheckNestingDepth(text, NestingSyntax::kYaml);
  if (!depth.ok()) return InSource(options.source, depth);
  std::vector<YAML::Node> docs;
  try {
    // A JSON object (the API's body) is one document that comes to an end: the counting pass is
    // for other text, and would parse a 100,000-task array once more.
    if (!IsJsonObject(text)) GF_RETURN_IF_ERROR(CheckDocumentsEnd(std::string(text), options.source));
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    // A tab in a line's indentation (YAML indents with spaces) is what most often breaks a hand
    // written file, and yaml-cpp says only "illegal map value" somewhere after it: name it.
    if (!IsJsonObject(text)) {
      size_t line = 1;
      // (Only the line yaml-cpp stopped at: a tab on an earlier line may be inside a block
      // scalar or a flow collection, where it is no indentation.)
      for (size_t at = 0; at < text.size() && e.mark.line >= 0 && line <= static_cast<size_t>(e.mark.line) + 1; ++line) {
        size_t end = text.find('\n', at);
        if (end == std::string_view::npos) end = text.size();
        const size_t indent = text.find_first_not_of(" \t", at);
        const size_t stop = indent == std::string_view::npos ? end : std::min(indent, end);
        const size_t tab = text.substr(at, stop - at).find('\t');
        if (line == static_cast<size_t>(e.mark.line) + 1 && tab != std::string_view::npos && stop < end) {
          return Status::InvalidArgument(options.source + ":" + std::to_string(line) + ":" + std::to_string(tab + 1) +
                                         ": a tab in the indentation; YAML indents with spaces only");
        }
        at = end + 1;
      }
    }
    std::string where = options.source;
    if (e.mark.line >= 0) where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    return Status::InvalidArgument(where + ": not valid YAML or JSON: " + e.msg);
  }
  std::vector<JobRequest> out;
  for (const auto& doc : docs) {
    if (doc.IsNull()) continue;
    JobRequest base;
    std::vector<ArrayAxis> axes;
    try {
      GF_RETURN_IF_ERROR(ParseOne(r, doc, catalog, options, base, axes));
    } catch (const YAML::Exception& e) {
      return r.Error(doc, "", std::string("cannot read: ") + e.what());
    }
    if (axes.empty()) {
      // "{{x}}" in a name or at a workdir's start waits for an array's values; without an array
      // the name must be valid as it is and the workdir stays a relative path.
      if (!ValidName(base.spec.name)) {
        return r.Error(doc["name"], "name", "use 1-128 letters, digits, '-', '_' or '.', got '" + Shown(base.spec.name) +
                                                "' ({{...}} is filled in only by an array's values)");
      }
      if (!base.workdir.empty() && base.workdir[0] != '/') {
        return r.Error(doc["workdir"], "workdir", "must be an absolute path, got '" + base.workdir +
                                                      "' ({{...}} is filled in only by an array's values)");
      }
      out.push_back(std::move(base));
    } else {
      // Cartesian product, the last axis varying fastest. Room for all of it first: a JobRequest
      // is copied, not moved, when the vector grows.
      size_t product = 1;
      for (const ArrayAxis& axis : axes) product = std::min(product * axis.values.size(), size_t{kMaxArrayJobs} + 1);
      // Each task is a copy of the job (its parameters filled in): bound what the copies hold.
      size_t per_task = JobText(base) + base.workdir.size() + base.spec.name.size();
      for (const ArrayAxis& axis : axes) {
        size_t longest = 0;
        for (const std::string& v : axis.values) longest = std::max(longest, v.size());
        per_task += axis.name.size() + longest + 32;  // its GPUFLEET_PARAM_ variable
      }
      if (per_task * product > kMaxArrayText) {
        return r.Error(doc["array"], "array",
                       "expands to " + std::to_string(product) + " jobs of about " + std::to_string(per_task) +
                           " bytes of command and environment each, more than " +
                           std::to_string(kMaxArrayText / (1024 * 1024)) +
                           " MiB in all; shorten the command (long settings in a file) or split the array");
      }
      // Grown at least twofold, so that a file of many small arrays does not reallocate (and
      // copy every job so far) at each document.
      if (out.size() + product > out.capacity()) out.reserve(std::max(out.size() + product, 2 * out.capacity()));
      std::vector<size_t> idx(axes.size(), 0);
      for (int index = 0;; ++index) {
        std::map<std::string, std::string> params;
        for (size_t a = 0; a < axes.size(); ++a) params[axes[a].name] = axes[a].values[idx[a]];
        JobRequest j = Expand(base, params, index);
        if (!ValidName(j.spec.name)) {
          return r.Error(doc["name"], "name", "element " + std::to_string(index) + " is named '" + j.spec.name +
                                                  "': use letters, digits, '-', '_' or '.'");
        }
        if (!j.workdir.empty() && j.workdir[0] != '/') {
          return r.Error(doc["workdir"], "workdir", "element " + std::to_string(index) + " runs in '" + j.workdir +
                                                        "': must be an absolute path");
        }
        out.push_back(std::move(j));
        size_t a = axes.size();
        while (a > 0) {
          --a;
          if (++idx[a] < axes[a].values.size()) break;
          idx[a] = 0;
          if (a == 0) a = SIZE_MAX;
          if (a == SIZE_MAX) break;
        }
        if (a == SIZE_MAX) break;
      }
    }
    if (out.size() > static_cast<size_t>(kMaxArrayJobs)) {
      return Status::InvalidArgument(options.source + ": holds more than " + std::to_string(kMaxArrayJobs) + " jobs");
    }
  }
  if (out.empty()) return Status::InvalidArgument(options.source + ": holds no job (is the file empty?)");
  return out;
}

namespace {
// Seconds per step as ParseStepSeconds reads them back exactly: "0.42s".
std::string FormatSeconds(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", seconds);
  if (std::strtod(buf, nullptr) != seconds) std::snprintf(buf, sizeof buf, "%.17g", seconds);
  return std::string(buf) + "s";
}
}  // namespace

nlohmann::json ToJobJson(const JobRequest& j) {
  using nlohmann::json;
  const model::JobSpec& s = j.spec;
  json o;
  o["name"] = s.name;
  o["team"] = s.team;
  o["priority"] = s.priority;
  json res;
  if (s.fractional()) {
    res["gpus"] = static_cast<double>(s.gpu_milli) / 1000.0;
  } else {
    res["gpus"] = s.gpus_per_node;
  }
  if (!s.gpu_models.empty()) res["gpu_type"] = s.gpu_models;
  res["nodes"] = s.nodes;
  if (s.cpu_milli) res["cpus"] = static_cast<double>(s.cpu_milli) / 1000.0;
  if (s.mem_mib) res["memory"] = std::to_string(s.mem_mib) + "Mi";
  o["resources"] = res;
  if (j.argv.size() == 3 && j.argv[0] == "/bin/sh" && j.argv[1] == "-c") {
    o["run"] = j.argv[2];
  } else {
    o["run"] = j.argv;
  }
  if (!j.workdir.empty()) o["workdir"] = j.workdir;
  json env = json::object();
  for (const auto& [k, v] : j.env) {
    if (!StartsWith(k, "GPUFLEET_")) env[k] = v;  // set by gpufleet (array elements); not user input
  }
  if (!env.empty()) o["env"] = env;
  if (!j.user.empty()) o["user"] = j.user;
  if (!s.environment.empty()) o["environment"] = s.environment;
  if (j.process_per_gpu) o["process_per_gpu"] = true;
  if (j.verify_network) o["network"] = "verified";
  o["market"] = model::MarketPreferenceName(s.market);
  if (s.duration_estimate) {
    std::string e = std::to_string(s.duration_estimate->millis() / 1000) + "s";
    if (s.duration_estimate->millis() % 1000) e = std::to_string(s.duration_estimate->millis()) + "ms";
    if (!j.cost.estimate_model.empty()) e += " on " + j.cost.estimate_model;
    o["estimate"] = e;
  }
  const model::JobCostHints& c = j.cost;
  if (c.profile != model::Boundness::kBalanced) o["profile"] = model::BoundnessName(c.profile);
  if (!c.workload.empty()) o["workload"] = c.workload;
  if (!c.step_seconds.empty()) {
    json steps;
    for (const auto& [gpu, seconds] : c.step_seconds) steps[gpu] = FormatSeconds(seconds);
    o["step_time"] = steps;
  }
  if (c.deadline) o["deadline"] = std::to_string(c.deadline->millis()) + "ms";
  auto dollars = [](int64_t micros) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%lld.%06lld", static_cast<long long>(micros / 1000000),
                  static_cast<long long>(micros % 1000000));
    return std::string(buf);
  };
  if (c.max_hourly_cost_micros) o["max_hourly_cost"] = dollars(c.max_hourly_cost_micros);
  if (s.max_cost_micros) o["max_cost"] = dollars(s.max_cost_micros);
  if (!c.regions.empty()) o["regions"] = c.regions;
  if (!c.clouds.empty()) o["clouds"] = c.clouds;
  if (!s.constraints.empty()) o["constraints"] = s.constraints;
  json ck;
  if (!j.checkpoint.dir.empty()) ck["dir"] = j.checkpoint.dir;
  ck["signal"] = SignalName(j.checkpoint.signal);
  ck["grace"] = std::to_string(j.checkpoint.grace.millis()) + "ms";
  if (s.checkpoint_interval > Duration::Zero()) ck["interval"] = std::to_string(s.checkpoint_interval.millis()) + "ms";
  if (c.restart_overhead != model::JobCostHints{}.restart_overhead) {
    ck["restart_overhead"] = std::to_string(c.restart_overhead.millis()) + "ms";
  }
  o["checkpoint"] = ck;
  json rs;
  rs["on_preemption"] = j.restart.on_preemption;
  rs["max_restarts_on_errors"] = j.restart.max_restarts_on_errors;
  if (!j.restart.recover_on_exit_codes.empty()) rs["recover_on_exit_codes"] = j.restart.recover_on_exit_codes;
  o["restart"] = rs;
  if (j.watchdog.stall_timeout > Duration::Zero()) {
    o["watchdog"] = {{"stall_timeout", std::to_string(j.watchdog.stall_timeout.millis()) + "ms"},
                     {"on_stall", j.watchdog.restart_on_stall ? "restart" : "alert"}};
  }
  return o;
}

}  // namespace gpufleet::api
