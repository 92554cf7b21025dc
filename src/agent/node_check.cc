#include "agent/node_check.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>

#include "common/process.h"
#include "node/burn_in.h"

namespace gpufleet::agent {
namespace {

// Folds one health reading taken under load into the running maxima and minima.
void Fold(model::GpuHealth& into, const model::GpuHealth& now) {
  auto max_of = [](int& a, int b) {
    if (b >= 0) a = std::max(a, b);
  };
  max_of(into.max_temperature_c, now.max_temperature_c);
  max_of(into.max_power_w, now.max_power_w);
  max_of(into.max_sm_clock_mhz, now.max_sm_clock_mhz);
  if (now.min_sm_clock_mhz >= 0) {
    into.min_sm_clock_mhz = into.min_sm_clock_mhz < 0 ? now.min_sm_clock_mhz : std::min(into.min_sm_clock_mhz, now.min_sm_clock_mhz);
  }
  for (const auto& r : now.throttle_reasons) {
    if (std::find(into.throttle_reasons.begin(), into.throttle_reasons.end(), r) == into.throttle_reasons.end()) {
      into.throttle_reasons.push_back(r);
    }
  }
  // The link as trained under load (idle GPUs train down to save power) and the latest counters.
  if (now.pcie_gen >= 0) into.pcie_gen = std::max(into.pcie_gen, now.pcie_gen);
  if (now.pcie_width >= 0) into.pcie_width = std::max(into.pcie_width, now.pcie_width);
  into.ecc_uncorrected = std::max(into.ecc_uncorrected, now.ecc_uncorrected);
  into.retired_pages = std::max(into.retired_pages, now.retired_pages);
  into.retirement_pending = into.retirement_pending || now.retirement_pending;
  if (now.nvlink_active >= 0) into.nvlink_active = into.nvlink_active < 0 ? now.nvlink_active : std::min(into.nvlink_active, now.nvlink_active);
}

}  // namespace

std::string DefaultBurnInSuite() {
  if (const char* env = std::getenv("GPUFLEET_BURNIN_SUITE"); env != nullptr && *env != '\0') return env;
  const std::string local = "scripts/burnin.py";
  std::error_code ec;
  if (std::filesystem::exists(local, ec)) return local;
  return std::string(GPUFLEET_SOURCE_TREE) + "/scripts/burnin.py";
}

Result<model::BurnInReport> RunNodeCheck(GpuProbe& probe, const NodeCheckOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  const std::string suite = o.suite.empty() ? DefaultBurnInSuite() : o.suite;
  std::error_code ec;
  if (!std::filesystem::exists(suite, ec)) {
    return Status::NotFound("burn-in suite " + suite + " not found (set GPUFLEET_BURNIN_SUITE or --suite)");
  }
  GF_ASSIGN_OR_RETURN(auto devices, probe.Devices());
  // Health before the load: counters, links, and a first reading.
  std::vector<model::GpuHealth> health;
  if (auto h = probe.Health(); h.ok()) health = *h;
  probe.TakeXids();  // start the XID window now

  std::vector<std::string> argv = {o.python, suite, "suite", "--device", o.device, "--time-limit",
                                   std::to_string(std::max<int64_t>(1, o.time_limit.millis() / 1000))};
  if (!devices.empty()) {
    std::string gpus;
    for (const auto& d : devices) gpus += (gpus.empty() ? "" : ",") + std::to_string(d.index);
    argv.insert(argv.end(), {"--gpus", gpus});
  }
  if (o.quick) argv.push_back("--quick");
  if (probe.SuiteSlowdown() > 1.0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", probe.SuiteSlowdown());
    argv.insert(argv.end(), {"--slowdown", buf});
  }
  CommandOptions co;
  co.timeout = o.time_limit + Duration::Seconds(30);  // the suite stops itself; this is the backstop
  co.die_with_parent = true;                           // a killed agent (or CLI) leaves no suite on the GPUs
  auto run = std::async(std::launch::async, [argv, co] { return RunCommand(argv, co); });
  // Under load: sample until the suite ends.
  std::vector<model::GpuHealth> load = health;
  const auto every = std::chrono::milliseconds(std::max<int64_t>(50, o.sample_every.millis()));
  while (run.wait_for(every) != std::future_status::ready) {
    if (auto h = probe.Health(); h.ok()) {
      for (size_t i = 0; i < h->size() && i < load.size(); ++i) Fold(load[i], (*h)[i]);
    }
  }
  auto result = run.get();
  if (!result.ok()) return Status::Unavailable("burn-in: " + result.status().message());  // "cannot run PYTHON: why"
  if (result->exit_code == 3) {
    // The cause only: scripts/burnin.py's own line around it gives the advice given below.
    std::string why = result->stderr_text;
    const std::string kOwn = "PyTorch cannot be imported by ";
    if (size_t at = why.find(kOwn); at != std::string::npos) {
      const size_t open = why.find(" (", at + kOwn.size());
      const size_t close = open == std::string::npos ? open : why.find("). Install", open);
      if (close != std::string::npos) why = why.substr(open + 2, close - open - 2);
    }
    why = why.substr(0, 300);
    while (!why.empty() && std::isspace(static_cast<unsigned char>(why.back()))) why.pop_back();
    return Status::FailedPrecondition("burn-in: " + o.python + " cannot import torch (" + why +
                                      "); install PyTorch for it (Debian: apt-get install python3-torch) or name "
                                      "an interpreter that has it: gpufleet agent --burn-in-python PATH, gpufleet "
                                      "node check --python PATH, or GPUFLEET_BURNIN_PYTHON=PATH for either and for "
                                      "gpufleet dev");
  }
  if (!result->ok() || result->stdout_text.empty()) {
    std::string tail = result->stderr_text.size() > 600 ? result->stderr_text.substr(result->stderr_text.size() - 600)
                                                         : result->stderr_text;
    return Status::Unavailable("burn-in suite " + result->Describe(co.timeout) + ": " + tail);
  }
  GF_ASSIGN_OR_RETURN(model::BurnInReport report, node::ParseSuiteOutput(result->stdout_text));
  // After the load: the counters again (an error during the run shows here) and the XIDs seen.
  if (auto h = probe.Health(); h.ok()) {
    for (size_t i = 0; i < h->size() && i < load.size(); ++i) Fold(load[i], (*h)[i]);
  }
  for (const auto& [gpu, xid] : probe.TakeXids()) {
    if (gpu >= 0 && gpu < static_cast<int>(load.size())) load[gpu].xid_errors.push_back(xid);
  }
  report.health = std::move(load);
  report.gpus = static_cast<int>(devices.size());
  report.took = Duration::Millis(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count());
  return report;
}

}  // namespace gpufleet::agent
