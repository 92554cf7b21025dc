// ParseProviderConfig: the provider mapping of a YAML file, with errors that name the field.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/source_location.h"
#include "common/strings.h"
#include "provider/local_provider.h"
#include "provider/provider.h"

namespace gpufleet::provider {
namespace {

std::string Describe(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

class Reader {
 public:
  Reader(std::string where, std::string prefix) : where_(std::move(where)), prefix_(std::move(prefix)) {}

  Result<ProviderConfig> Read(const YAML::Node& root) {
    if (!root.IsDefined() || root.IsNull()) return Error(root, "", "a provider mapping is required ({kind: local, ...})");
    if (!root.IsMap()) return Error(root, "", "must be a mapping such as {kind: local, ...}, got " + Describe(root));
    ProviderConfig c;
    const YAML::Node kind = root["kind"];
    if (!kind) return Error(root, "kind", "is required (one of " + Join(ProviderKinds(), ", ") + ")");
    GF_ASSIGN_OR_RETURN(c.kind, Scalar(kind, "kind"));
    const auto kinds = ProviderKinds();
    if (std::find(kinds.begin(), kinds.end(), c.kind) == kinds.end()) {
      return Error(kind, "kind", "must be one of " + Join(kinds, ", ") + ", got '" + c.kind + "'");
    }
    if (c.kind == "static") {
      GF_RETURN_IF_ERROR(CheckKeys(root, {"kind"}));
    } else if (c.kind == "local") {
      GF_RETURN_IF_ERROR(CheckKeys(root, {"kind", "state_dir", "agent_command", "boot_delay", "stop_grace",
                                          "notice_port", "notice_lead", "interruptions", "spot_capacity"}));
      GF_RETURN_IF_ERROR(ReadLocal(root, c.local));
    } else {
      GF_RETURN_IF_ERROR(CheckKeys(root, {"kind", "create", "delete", "list", "timeout", "env"}));
      GF_RETURN_IF_ERROR(ReadExec(root, c.exec));
    }
    return c;
  }

 private:
  Status ReadLocal(const YAML::Node& root, LocalConfig& l) {
    const YAML::Node dir = root["state_dir"];
    if (!dir) return Error(root, "state_dir", "is required (where instance records and logs live)");
    GF_ASSIGN_OR_RETURN(l.state_dir, Scalar(dir, "state_dir"));
    if (l.state_dir.empty()) return Error(dir, "state_dir", "must not be empty");
    const YAML::Node cmd = root["agent_command"];
    if (!cmd) return Error(root, "agent_command", "is required (the argv that starts an instance's agent)");
    GF_ASSIGN_OR_RETURN(l.agent_command, Argv(cmd, "agent_command"));
    Status placeholders = CheckAgentCommand(l.agent_command);
    if (!placeholders.ok()) {
      std::string msg = placeholders.message();
      const std::string own = "agent_command: ";
      if (StartsWith(msg, own)) msg = msg.substr(own.size());
      return Error(cmd, "agent_command", msg);
    }
    if (const YAML::Node n = root["boot_delay"]) {
      GF_ASSIGN_OR_RETURN(l.boot_delay, ReadDuration(n, "boot_delay"));
    }
    if (const YAML::Node n = root["stop_grace"]) {
      GF_ASSIGN_OR_RETURN(l.stop_grace, ReadDuration(n, "stop_grace"));
    }
    if (const YAML::Node n = root["notice_lead"]) {
      GF_ASSIGN_OR_RETURN(l.notice_lead, ReadDuration(n, "notice_lead"));
    }
    if (const YAML::Node n = root["notice_port"]) {
      GF_ASSIGN_OR_RETURN(std::string s, Scalar(n, "notice_port"));
      auto port = ParseInt(s);
      if (!port || *port < 0 || *port > 65535) {
        return Error(n, "notice_port", "must be a port number (0 for any free port), got '" + s + "'");
      }
      l.notice_port = static_cast<int>(*port);
    }
    if (const YAML::Node cap = root["spot_capacity"]) {
      if (!cap.IsMap()) {
        return Error(cap, "spot_capacity", "must be a mapping {available: 104m, outage: 74m}, got " + Describe(cap));
      }
      GF_RETURN_IF_ERROR(CheckKeys(cap, {"available", "outage"}, "spot_capacity."));
      if (!cap["available"] || !cap["outage"]) {
        return Error(cap, "spot_capacity", "needs both available and outage (mean periods with and without capacity)");
      }
      GF_ASSIGN_OR_RETURN(l.capacity_available, ReadDuration(cap["available"], "spot_capacity.available"));
      GF_ASSIGN_OR_RETURN(l.capacity_outage, ReadDuration(cap["outage"], "spot_capacity.outage"));
      if (l.capacity_available <= Duration::Zero() || l.capacity_outage <= Duration::Zero()) {
        return Error(cap, "spot_capacity", "available and outage must be positive durations");
      }
    }
    if (const YAML::Node in = root["interruptions"]) {
      if (!in.IsMap()) return Error(in, "interruptions", "must be a mapping, got " + Describe(in));
      GF_RETURN_IF_ERROR(CheckKeys(in, {"per_hour", "seed", "schedule"}, "interruptions."));
      if (const YAML::Node n = in["per_hour"]) {
        GF_ASSIGN_OR_RETURN(std::string s, Scalar(n, "interruptions.per_hour"));
        auto rate = ParseDouble(s);
        if (!rate || !std::isfinite(*rate) || *rate < 0) {
          return Error(n, "interruptions.per_hour",
                       "must be a rate per hour of each spot instance (0.5, 0 for none), got '" + s + "'");
        }
        l.interruptions_per_hour = *rate;
      }
      if (const YAML::Node n = in["seed"]) {
        GF_ASSIGN_OR_RETURN(std::string s, Scalar(n, "interruptions.seed"));
        auto seed = ParseInt(s);
        if (!seed || *seed < 0) return Error(n, "interruptions.seed", "must be a non-negative integer, got '" + s + "'");
        l.seed = static_cast<uint64_t>(*seed);
      }
      if (const YAML::Node list = in["schedule"]) {
        if (!list.IsSequence()) {
          return Error(list, "interruptions.schedule", "must be a list of {after: 30s, instance: NAME}, got " +
                                                           Describe(list));
        }
        for (size_t i = 0; i < list.size(); ++i) {
          const std::string path = "interruptions.schedule[" + std::to_string(i) + "]";
          const YAML::Node e = list[i];
          if (!e.IsMap()) return Error(e, path, "must be a mapping {after: 30s, instance: NAME}, got " + Describe(e));
          GF_RETURN_IF_ERROR(CheckKeys(e, {"after", "instance"}, path + "."));
          ScheduledInterruption s;
          if (!e["after"]) return Error(e, path + ".after", "is required (time after the instance starts)");
          GF_ASSIGN_OR_RETURN(s.after, ReadDuration(e["after"], path + ".after"));
          if (!e["instance"]) return Error(e, path + ".instance", "is required (a name or a spot instance index)");
          GF_ASSIGN_OR_RETURN(s.instance, Scalar(e["instance"], path + ".instance"));
          if (s.instance.empty()) return Error(e["instance"], path + ".instance", "must not be empty");
          l.schedule.push_back(std::move(s));
        }
      }
    }
    return Status::Ok();
  }

  Status ReadExec(const YAML::Node& root, ExecConfig& e) {
    struct Script {
      const char* key;
      std::vector<std::string>* argv;
    };
    for (const Script& s : {Script{"create", &e.create}, Script{"delete", &e.del}, Script{"list", &e.list}}) {
      const YAML::Node n = root[s.key];
      if (!n) return Error(root, s.key, "is required (the argv of the " + std::string(s.key) + " script)");
      GF_ASSIGN_OR_RETURN(*s.argv, Argv(n, s.key));
    }
    if (const YAML::Node n = root["timeout"]) {
      GF_ASSIGN_OR_RETURN(e.timeout, ReadDuration(n, "timeout"));
      if (e.timeout <= Duration::Zero()) return Error(n, "timeout", "must be positive");
    }
    if (const YAML::Node env = root["env"]) {
      if (!env.IsMap()) return Error(env, "env", "must be a mapping of NAME: value, got " + Describe(env));
      for (auto it = env.begin(); it != env.end(); ++it) {
        const std::string key = it->first.Scalar();
        GF_ASSIGN_OR_RETURN(e.env[key], Scalar(it->second, "env." + key));
      }
    }
    return Status::Ok();
  }

  // "<where>:LINE:COL: <prefix><field>: msg", at the node that is wrong: a bad value's own
  // position, an unknown field's key, the provider mapping for a missing field.
  Status Error(const YAML::Node& at, const std::string& field, const std::string& msg) const {
    std::string path = field.empty() ? (prefix_.empty() ? "" : prefix_.substr(0, prefix_.size() - 1)) : prefix_ + field;
    if (!path.empty() && path.back() == '.') path.pop_back();
    return Status::InvalidArgument(SourcePrefixAt(where_, at.Mark()) + (path.empty() ? "" : path + ": ") + msg);
  }

  Result<std::string> Scalar(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar()) return Error(n, field, "must be a single value, got " + Describe(n));
    return n.Scalar();
  }

  Result<Duration> ReadDuration(const YAML::Node& n, const std::string& field) const {
    GF_ASSIGN_OR_RETURN(std::string s, Scalar(n, field));
    auto d = ParseDuration(s);
    if (!d) return Error(n, field, "must be a duration such as 500ms, 30s or 2m, got '" + s + "'");
    return *d;
  }

  Result<std::vector<std::string>> Argv(const YAML::Node& n, const std::string& field) const {
    if (!n.IsSequence() || n.size() == 0) {
      return Error(n, field, "must be a non-empty list of arguments such as [/path/to/script, --flag], got " +
                                 Describe(n));
    }
    std::vector<std::string> argv;
    for (size_t i = 0; i < n.size(); ++i) {
      GF_ASSIGN_OR_RETURN(std::string a, Scalar(n[i], field + "[" + std::to_string(i) + "]"));
      argv.push_back(std::move(a));
    }
    if (argv[0].empty()) return Error(n[0], field, "must name a program first");
    return argv;
  }

  // Unknown keys are mistakes (a misspelt notice_lead would silently keep the default).
  Status CheckKeys(const YAML::Node& map, const std::set<std::string>& known, const std::string& sub = "") const {
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (known.count(key)) continue;
      std::string best;
      size_t best_d = 3;
      for (const auto& k : known) {
        size_t d = EditDistance(key, k);
        if (d < best_d) best = k, best_d = d;
      }
      std::string hint = best.empty() ? "" : " (did you mean '" + best + "'?)";
      return Error(it->first, sub + key, "unknown field" + hint + "; known here: " +
                                             Join(std::vector<std::string>(known.begin(), known.end()), ", "));
    }
    return Status::Ok();
  }

  const std::string where_, prefix_;
};

}  // namespace

Result<ProviderConfig> ParseProviderConfig(const YAML::Node& node, const std::string& where,
                                           const std::string& field_prefix) {
  try {
    return Reader(where, field_prefix).Read(node);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(SourcePrefixAt(where, e.mark) + e.msg);
  }
}

}  // namespace gpufleet::provider
