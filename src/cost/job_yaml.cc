#include "cost/job_yaml.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "common/nesting.h"
#include "common/source_location.h"
#include "common/strings.h"

namespace gpufleet::cost {

namespace {

std::string Describe(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

class Reader {
 public:
  Reader(const std::string& source, const model::GpuCatalog& gpus, const model::GpuSpeeds* speeds)
      : source_(source), gpus_(gpus), speeds_(speeds) {}

  Result<CostJob> Read(const YAML::Node& root) {
    if (!root.IsDefined() || root.IsNull()) return Status::InvalidArgument(source_ + ":1: the job file is empty");
    if (!root.IsMap()) return Error(root, "", "the job must be a mapping, got " + Describe(root));
    CostJob job;
    const YAML::Node resources = root["resources"];
    if (!resources) return Error(root, "resources", "is required (resources: {gpus: N})");
    if (!resources.IsMap()) return Error(resources, "resources", "must be a mapping, got " + Describe(resources));
    const YAML::Node gpus = resources["gpus"];
    if (!gpus) return Error(resources, "resources.gpus", "is required");
    GF_ASSIGN_OR_RETURN(job.gpus_per_node, ReadCount(gpus, "resources.gpus"));
    if (const YAML::Node nodes = resources["nodes"]) {
      GF_ASSIGN_OR_RETURN(job.nodes, ReadCount(nodes, "resources.nodes"));
    }
    if (const YAML::Node types = resources["gpu_type"]) {
      GF_ASSIGN_OR_RETURN(job.gpu_types, ReadStrings(types, "resources.gpu_type"));
      for (const std::string& t : job.gpu_types) {
        if (gpus_.Find(t) == nullptr) return Error(types, "resources.gpu_type", "unknown GPU model '" + t + "'");
      }
    }

    const YAML::Node estimate = root["estimate"];
    if (!estimate) return Error(root, "estimate", "is required (estimate: \"10h on A100\")");
    GF_RETURN_IF_ERROR(ReadEstimate(estimate, job));

    if (const YAML::Node p = root["profile"]) {
      GF_ASSIGN_OR_RETURN(std::string s, ReadScalar(p, "profile"));
      auto b = model::ParseBoundness(s);
      if (!b.ok()) return Error(p, "profile", "must be compute, memory or balanced, got '" + s + "'");
      job.profile = *b;
    }
    if (const YAML::Node w = root["workload"]) {
      GF_ASSIGN_OR_RETURN(job.workload_class, ReadScalar(w, "workload"));
      if (job.workload_class.empty()) return Error(w, "workload", "must name a workload class");
      if (speeds_ != nullptr) {
        if (Status s = speeds_->CheckClass(job.workload_class); !s.ok()) return Error(w, "workload", s.message());
      }
    }
    if (const YAML::Node st = root["step_time"]) {
      if (!st.IsMap()) return Error(st, "step_time", "must be a mapping of GPU: seconds per step such as {A100: 0.42s}, got " + Describe(st));
      for (auto it = st.begin(); it != st.end(); ++it) {
        const std::string name = it->first.Scalar();
        const model::GpuModel* m = gpus_.Find(name);
        if (m == nullptr) return Error(it->first, "step_time", "unknown GPU model '" + name + "'");
        GF_ASSIGN_OR_RETURN(std::string v, ReadScalar(it->second, "step_time." + name));
        auto seconds = model::ParseStepSeconds(v);
        if (!seconds) {
          return Error(it->second, "step_time." + name, "must be a positive time per step such as 0.42s or 420ms, got '" + v + "'");
        }
        job.speed_overrides.step_seconds[m->name] = *seconds;
      }
    }
    if (const YAML::Node c = root["checkpoint"]) {
      if (!c.IsMap()) return Error(c, "checkpoint", "must be a mapping such as {interval: 30m}, got " + Describe(c));
      if (const YAML::Node i = c["interval"]) {
        GF_ASSIGN_OR_RETURN(job.checkpoint_interval, ReadDuration(i, "checkpoint.interval"));
      }
      if (const YAML::Node r = c["restart_overhead"]) {
        GF_ASSIGN_OR_RETURN(job.restart_overhead, ReadDuration(r, "checkpoint.restart_overhead"));
      }
    }
    if (const YAML::Node m = root["market"]) {
      GF_ASSIGN_OR_RETURN(std::string s, ReadScalar(m, "market"));
      auto pref = model::ParseMarketPreference(s);
      if (!pref.ok() || s.empty()) return Error(m, "market", "must be spot, on-demand or any, got '" + s + "'");
      job.market = *pref;
    }
    if (const YAML::Node d = root["deadline"]) {
      GF_ASSIGN_OR_RETURN(Duration dl, ReadDuration(d, "deadline"));
      job.deadline = dl;
    }
    if (const YAML::Node c = root["max_hourly_cost"]) {
      GF_ASSIGN_OR_RETURN(std::string s, ReadScalar(c, "max_hourly_cost"));
      std::string_view v = Trim(s);
      if (!v.empty() && v[0] == '$') v.remove_prefix(1);
      auto usd = ParseUsd(v);
      if (!usd || *usd <= 0) return Error(c, "max_hourly_cost", "must be a positive USD amount per hour, got '" + s + "'");
      job.max_hourly_cost = *usd;
    }
    if (const YAML::Node r = root["regions"]) {
      GF_ASSIGN_OR_RETURN(job.regions, ReadStrings(r, "regions"));
    }
    if (const YAML::Node r = root["clouds"]) {
      GF_ASSIGN_OR_RETURN(job.clouds, ReadStrings(r, "clouds"));
    }
    if (const YAML::Node c = root["constraints"]) {
      if (!c.IsMap()) return Error(c, "constraints", "must be a mapping of label: value, got " + Describe(c));
      for (auto it = c.begin(); it != c.end(); ++it) {
        const std::string key = it->first.Scalar();
        GF_ASSIGN_OR_RETURN(std::string v, ReadScalar(it->second, "constraints." + key));
        job.constraints[key] = v;
      }
    }
    return job;
  }

 private:
  Status Error(const YAML::Node& at, const std::string& path, const std::string& msg) const {
    const YAML::Mark mark = at.Mark();
    const int line = mark.is_null() ? 1 : mark.line + 1;
    return Status::InvalidArgument(source_ + ":" + std::to_string(line) + ": " + (path.empty() ? "" : path + ": ") +
                                   msg);
  }

  Result<std::string> ReadScalar(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) return Error(n, path, "must be a single value, got " + Describe(n));
    return n.Scalar();
  }

  Result<int> ReadCount(const YAML::Node& n, const std::string& path) const {
    std::optional<int64_t> v;
    if (n.IsScalar()) v = ParseInt(n.Scalar());
    if (!v || *v < 1 || *v > 100000) return Error(n, path, "must be a positive integer, got " + Describe(n));
    return static_cast<int>(*v);
  }

  Result<Duration> ReadDuration(const YAML::Node& n, const std::string& path) const {
    std::optional<Duration> d;
    if (n.IsScalar()) d = ParseDuration(n.Scalar());
    if (!d) return Error(n, path, "must be a duration such as 30m, 2h or 1d, got " + Describe(n));
    return *d;
  }

  Result<std::vector<std::string>> ReadStrings(const YAML::Node& n, const std::string& path) const {
    std::vector<std::string> out;
    if (n.IsScalar()) {
      out.push_back(n.Scalar());
    } else if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) {
        GF_ASSIGN_OR_RETURN(std::string s, ReadScalar(n[i], path + "[" + std::to_string(i) + "]"));
        out.push_back(s);
      }
    } else {
      return Error(n, path, "must be a name or a list of names, got " + Describe(n));
    }
    return out;
  }

  // "10h on A100"
  Status ReadEstimate(const YAML::Node& n, CostJob& job) const {
    GF_ASSIGN_OR_RETURN(std::string s, ReadScalar(n, "estimate"));
    const std::string want = "must read 'DURATION on GPU' such as '10h on A100', got '" + s + "'";
    size_t on = s.find(" on ");
    if (on == std::string::npos) return Error(n, "estimate", want);
    auto d = ParseDuration(Trim(std::string_view(s).substr(0, on)));
    std::string gpu(Trim(std::string_view(s).substr(on + 4)));
    if (!d || *d <= Duration::Zero() || gpu.empty()) return Error(n, "estimate", want);
    if (gpus_.Find(gpu) == nullptr) return Error(n, "estimate", "unknown GPU model '" + gpu + "'");
    job.reference_runtime = *d;
    job.reference_gpu = gpus_.Find(gpu)->name;
    return Status::Ok();
  }

  std::string source_;
  const model::GpuCatalog& gpus_;
  const model::GpuSpeeds* speeds_;  // nullable
};

}  // namespace

Result<CostJob> ParseCostJobYaml(const std::string& yaml, const std::string& source_name,
                                 const model::GpuCatalog& gpus, const model::GpuSpeeds* speeds) {
  // yaml-cpp parses recursively: bound the depth before it does.
  Status depth = CheckNestingDepth(yaml, NestingSyntax::kYaml);
  if (!depth.ok()) return InSource(source_name, depth);
  try {
    return Reader(source_name, gpus, speeds).Read(YAML::Load(yaml));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source_name + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
}

Result<CostJob> LoadCostJobYaml(const std::string& path, const model::GpuCatalog& gpus,
                                const model::GpuSpeeds* speeds) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseCostJobYaml(ss.str(), path, gpus, speeds);
}

}  // namespace gpufleet::cost
