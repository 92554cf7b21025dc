// GPU series named and labelled as NVIDIA's DCGM exporter names them, so that dashboards and
// alert rules written for the DCGM exporter work on gpufleet's /metrics unchanged. gpufleet adds
// job_id and team to a GPU held by a job.
//
//   DCGM_FI_DEV_GPU_UTIL     gauge  %    GPU utilisation
//   DCGM_FI_DEV_FB_USED      gauge  MiB  framebuffer memory used
//   DCGM_FI_DEV_FB_FREE      gauge  MiB  framebuffer memory free
//   DCGM_FI_DEV_GPU_TEMP     gauge  °C   GPU temperature
//   DCGM_FI_DEV_POWER_USAGE  gauge  W    power draw
// Labels: gpu ("0"), UUID, device ("nvidia0"), modelName (the driver's name), Hostname, and
// job_id, team when allocated. A GPU whose slices several jobs hold has them all in its labels,
// ascending and comma-separated (job_id="12,15", team="nlp,vision"), so it stays one series
// (sums over GPUs count it once) and a regex matcher (job_id=~"(.*,)?12(,.*)?") finds each job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "obs/exposition.h"

namespace gpufleet::obs {

struct DcgmGpu {
  std::string hostname;
  int gpu = 0;
  std::string uuid;
  std::string model_name;
  int util_pct = 0;
  int64_t fb_used_mib = 0;
  int64_t fb_total_mib = 0;
  int temperature_c = 0;
  double power_w = 0;
  int64_t job_id = 0;  // 0: not allocated; of jobs sharing the GPU, the lowest id
  std::string team;
  std::vector<int64_t> sharing{};           // the other jobs holding slices of it, ascending
  std::vector<std::string> sharing_teams{};  // ... and their teams
};

// Writes the five families above (each once, every GPU in it).
void WriteDcgmSeries(Exposition& e, const std::vector<DcgmGpu>& gpus);

}  // namespace gpufleet::obs
