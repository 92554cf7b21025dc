// What observability costs: the agent's 1 Hz GPU sampling and /metrics page for 8 fake GPUs,
// and the controller's alert evaluation and DCGM series for a 100-node, 800-GPU cluster.
// docs/benchmarks.md records the results ("Observability").
#include <benchmark/benchmark.h>

#include "agent/gpu_probe.h"
#include "common/check.h"
#include "model/gpu_catalog.h"
#include "obs/alerts.h"
#include "obs/dcgm.h"
#include "obs/exposition.h"

namespace gpufleet {
namespace {

std::vector<obs::DcgmGpu> Gpus(int nodes, int per_node) {
  std::vector<obs::DcgmGpu> out;
  for (int n = 0; n < nodes; ++n) {
    for (int g = 0; g < per_node; ++g) {
      out.push_back({"node-" + std::to_string(n), g, "GPU-8e5b3e41-" + std::to_string(n * 8 + g),
                     "NVIDIA H100 80GB HBM3", 50 + g, 40000 + 100 * g, 81559, 60 + g, 500.0 + g,
                     g < 4 ? 1000 + n : 0, g < 4 ? "vision" : ""});
    }
  }
  return out;
}

// One agent tick with metrics on: sample 8 GPUs and render the page (a scrape every second,
// an upper bound: Prometheus scrapes every 15 s by default).
void BM_AgentSampleAndRender8Gpus(benchmark::State& state) {
  agent::FakeGpuOptions o;
  o.spec = "8xH100";
  o.node = "node-1";
  auto probe = agent::FakeGpuProbe::Create(o, model::GpuCatalog::BuiltIn());
  CHECK(probe.ok());
  auto devices = (*probe)->Devices();
  CHECK(devices.ok());
  for (auto _ : state) {
    auto samples = (*probe)->Sample();
    std::vector<obs::DcgmGpu> gpus;
    for (size_t i = 0; i < samples->size(); ++i) {
      const auto& s = (*samples)[i];
      const auto& d = (*devices)[i];
      gpus.push_back({"node-1", d.index, d.uuid, d.name, s.util_pct, s.mem_used_mib, d.memory_mib, s.temperature_c,
                      static_cast<double>(s.power_w), 12, "vision"});
    }
    obs::Exposition e;
    obs::WriteDcgmSeries(e, gpus);
    benchmark::DoNotOptimize(e.Text().data());
  }
}
BENCHMARK(BM_AgentSampleAndRender8Gpus);

void BM_DcgmSeries800Gpus(benchmark::State& state) {
  auto gpus = Gpus(100, 8);
  for (auto _ : state) {
    obs::Exposition e;
    obs::WriteDcgmSeries(e, gpus);
    benchmark::DoNotOptimize(e.Text().data());
  }
}
BENCHMARK(BM_DcgmSeries800Gpus);

void BM_AlertEvaluate800Gpus(benchmark::State& state) {
  obs::AlertEngine engine{obs::AlertRules{}};
  obs::AlertInput in;
  for (const auto& g : Gpus(100, 8)) {
    in.gpus.push_back({g.hostname, g.gpu, g.uuid, g.util_pct, g.fb_used_mib, g.temperature_c, g.job_id, g.team});
  }
  for (int n = 0; n < 100; ++n) in.nodes.push_back({"node-" + std::to_string(n), Duration::Seconds(2), false, false, {}, ""});
  for (int j = 0; j < 100; ++j) {
    in.jobs.push_back({1000 + j, "train", "vision", Duration::Minutes(10), Time::FromSeconds(0), {}, {}, {}});
  }
  Time now = Time::FromSeconds(1'000'000);
  for (auto _ : state) {
    now += Duration::Seconds(5);
    benchmark::DoNotOptimize(engine.Evaluate(now, in));
  }
}
BENCHMARK(BM_AlertEvaluate800Gpus);

}  // namespace
}  // namespace gpufleet

BENCHMARK_MAIN();
