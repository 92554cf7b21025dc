#include "obs/dcgm.h"

#include <algorithm>

namespace gpufleet::obs {

void WriteDcgmSeries(Exposition& e, const std::vector<DcgmGpu>& gpus) {
  auto labels = [](const DcgmGpu& g) {
    Labels l{{"gpu", std::to_string(g.gpu)},
             {"UUID", g.uuid},
             {"device", "nvidia" + std::to_string(g.gpu)},
             {"modelName", g.model_name},
             {"Hostname", g.hostname}};
    if (g.job_id != 0) {
      std::string jobs = std::to_string(g.job_id);
      for (int64_t id : g.sharing) jobs += "," + std::to_string(id);
      std::vector<std::string> teams{g.team};
      teams.insert(teams.end(), g.sharing_teams.begin(), g.sharing_teams.end());
      std::sort(teams.begin(), teams.end());
      teams.erase(std::unique(teams.begin(), teams.end()), teams.end());
      if (teams.size() > 1 && teams.front().empty()) teams.erase(teams.begin());
      std::string team;
      for (const std::string& t : teams) team += (team.empty() ? "" : ",") + t;
      l.emplace_back("job_id", std::move(jobs));
      l.emplace_back("team", std::move(team));
    }
    return l;
  };
  struct Field {
    const char* name;
    const char* help;
    double (*value)(const DcgmGpu&);
  };
  static const Field fields[] = {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", [](const DcgmGpu& g) { return double(g.util_pct); }},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", [](const DcgmGpu& g) { return double(g.fb_used_mib); }},
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
       [](const DcgmGpu& g) { return double(std::max<int64_t>(0, g.fb_total_mib - g.fb_used_mib)); }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", [](const DcgmGpu& g) { return double(g.temperature_c); }},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", [](const DcgmGpu& g) { return g.power_w; }},
  };
  std::vector<std::string> rendered;
  rendered.reserve(gpus.size());
  for (const DcgmGpu& g : gpus) rendered.push_back(Exposition::RenderLabels(labels(g)));
  for (const Field& f : fields) {
    e.Family(f.name, "gauge", f.help);
    for (size_t i = 0; i < gpus.size(); ++i) e.SampleRendered(rendered[i], f.value(gpus[i]));
  }
}

}  // namespace gpufleet::obs
