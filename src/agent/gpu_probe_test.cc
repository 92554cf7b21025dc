#include "agent/gpu_probe.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpufleet::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const model::GpuCatalog& Catalog() { return model::GpuCatalog::BuiltIn(); }

std::unique_ptr<FakeGpuProbe> MakeFake(const std::string& spec, const std::string& node = "n1") {
  auto r = FakeGpuProbe::Create({.spec = spec, .node = node}, Catalog());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::string FakeError(const std::string& spec) {
  auto r = FakeGpuProbe::Create({.spec = spec}, Catalog());
  EXPECT_FALSE(r.ok()) << spec;
  return r.ok() ? "" : r.status().message();
}

GpuDevice Dev(int index, const std::string& name, std::vector<int> peers = {}) {
  return GpuDevice{index, "GPU-" + std::to_string(index), name, 81559, std::move(peers)};
}

// --- FakeGpuProbe -----------------------------------------------------------------------------

TEST(FakeGpuProbeTest, SpecGivesCountModelMemoryAndUuids) {
  // Given "8xH100" on node n1, expect 8 H100s of 80 GB with deterministic uuids, all NVLinked.
  auto probe = MakeFake("8xH100");
  ASSERT_NE(probe, nullptr);
  auto devices = probe->Devices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const GpuDevice& d = (*devices)[i];
    EXPECT_EQ(d.index, i);
    EXPECT_EQ(d.name, "H100");
    EXPECT_EQ(d.uuid, "GPU-fake-n1-" + std::to_string(i));
    EXPECT_EQ(d.memory_mib, 80 * 1024);
    EXPECT_EQ(d.nvlink_peers.size(), 7u);
  }
  EXPECT_THAT((*devices)[0].nvlink_peers, ElementsAre(1, 2, 3, 4, 5, 6, 7));
  auto node = NodeSpecFromDevices("n1", *devices, Catalog());
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->gpu_model, "H100");
  EXPECT_EQ(node->gpus, 8);
  EXPECT_EQ(node->nvlink_domain, std::vector<int>(8, 0));
}

TEST(FakeGpuProbeTest, AcceptsAliasesMemorySuffixAndCase) {
  // Given names the catalog knows under another spelling, expect the canonical model.
  for (const auto& [spec, model] : std::vector<std::pair<std::string, std::string>>{
           {"8xH100-80GB", "H100"}, {"4xa100-80gb", "A100-80GB"}, {"2XH100-SXM", "H100"},
           {"1xRTXA6000", "A6000"}, {"8xMI300X", "MI300X"}, {"64xT4", "T4"}}) {
    auto probe = MakeFake(spec);
    ASSERT_NE(probe, nullptr) << spec;
    EXPECT_EQ((*probe->Devices())[0].name, model) << spec;
  }
}

TEST(FakeGpuProbeTest, PcieOnlyModelsHaveNoNvLinkPeers) {
  // Given T4s (no NVLink in the catalog), expect no peers and one domain per GPU, as a real
  // PCIe-only node would report.
  auto probe = MakeFake("4xT4");
  ASSERT_NE(probe, nullptr);
  auto devices = *probe->Devices();
  for (const GpuDevice& d : devices) EXPECT_TRUE(d.nvlink_peers.empty());
  auto node = NodeSpecFromDevices("t4node", devices, Catalog());
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->nvlink_domain, (std::vector<int>{0, 1, 2, 3}));
}

TEST(FakeGpuProbeTest, BadSpecsAreExplained) {
  // Given malformed specs, expect errors that say what is wrong.
  EXPECT_THAT(FakeError("H100"), HasSubstr("expected COUNTxMODEL, for example 8xH100"));
  EXPECT_THAT(FakeError("8x"), HasSubstr("expected COUNTxMODEL"));
  EXPECT_THAT(FakeError("x8"), HasSubstr("expected COUNTxMODEL"));
  EXPECT_THAT(FakeError("0xH100"), HasSubstr("COUNT must be 1..64, got '0'"));
  EXPECT_THAT(FakeError("65xH100"), HasSubstr("COUNT must be 1..64"));
  EXPECT_THAT(FakeError("eightxH100"), HasSubstr("COUNT must be 1..64, got 'eight'"));
  EXPECT_THAT(FakeError("8xH100-40GB"), HasSubstr("H100 has 80 GB, not 40 GB"));
}

TEST(FakeGpuProbeTest, UnknownModelListsCloseMatches) {
  // Given a misspelt model, expect the nearest catalog names; given nonsense, the whole list.
  std::string err = FakeError("8xH10");
  EXPECT_THAT(err, HasSubstr("unknown GPU model 'H10'"));
  EXPECT_THAT(err, HasSubstr("close matches: H100"));
  std::string far = FakeError("8xQuantumChip");
  EXPECT_THAT(far, HasSubstr("the catalog has: T4, V100"));
}

TEST(FakeGpuProbeTest, IdleWithoutTelemetry) {
  // Given no telemetry file, expect every sample idle.
  auto probe = MakeFake("2xA100");
  auto s = probe->Sample();
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[1].util_pct, 0);
  EXPECT_EQ((*s)[1].mem_used_mib, 0);
  EXPECT_EQ((*s)[1].temperature_c, 30);
}

TEST(FakeGpuProbeTest, TelemetryFileStepsPerSampleAndRepeatsTheLastLine) {
  // Given a file with two steps, expect one step per Sample() and the last one repeated.
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("telemetry_" + std::to_string(getpid()) + ".txt");
  std::ofstream(path) << "# warm-up\n"
                         "10 1000 40 100\n"
                         "\n"
                         "50 20000 60 300; gpu=1 100 79000 85 690   # GPU 1 is hot\n";
  auto r = FakeGpuProbe::Create({.spec = "2xH100", .node = "n", .telemetry_path = path.string()},
                                Catalog());
  std::filesystem::remove(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto probe = std::move(r).value();
  auto s1 = *probe->Sample();
  EXPECT_EQ(s1[0].util_pct, 10);
  EXPECT_EQ(s1[1].util_pct, 10);
  for (int i = 0; i < 3; ++i) {
    auto s = *probe->Sample();
    EXPECT_EQ(s[0].util_pct, 50);
    EXPECT_EQ(s[0].mem_used_mib, 20000);
    EXPECT_EQ(s[0].temperature_c, 60);
    EXPECT_EQ(s[0].power_w, 300);
    EXPECT_EQ(s[1].util_pct, 100);
    EXPECT_EQ(s[1].mem_used_mib, 79000);
    EXPECT_EQ(s[1].temperature_c, 85);
    EXPECT_EQ(s[1].power_w, 690);
  }
}

TEST(FakeGpuProbeTest, TelemetryForOneGpuLeavesTheOthersIdle) {
  // Given a line with only "gpu=2 ...", expect GPU 2 set and the others idle.
  auto steps = ParseFakeTelemetry("gpu=2 90 100 70 400\n", "t", {1000, 1000, 1000});
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  ASSERT_EQ(steps->size(), 1u);
  EXPECT_EQ((*steps)[0][2].util_pct, 90);
  EXPECT_EQ((*steps)[0][0].util_pct, 0);
  EXPECT_EQ((*steps)[0][1].temperature_c, 30);
}

TEST(FakeGpuProbeTest, BadTelemetryLinesNameTheLine) {
  // Given a bad value, expect an error naming the source and the line number.
  const std::vector<int64_t> mem = {1000, 1000};
  auto err = [&](const std::string& text) {
    auto r = ParseFakeTelemetry(text, "telemetry.txt", mem);
    EXPECT_FALSE(r.ok()) << text;
    return r.ok() ? "" : r.status().message();
  };
  EXPECT_EQ(err("10 10 40 100\n# fine\n130 10 40 100\n"),
            "telemetry.txt:3: util_pct must be 0..100, got 130");
  EXPECT_EQ(err("10 10 40\n"),
            "telemetry.txt:1: expected 'util_pct mem_used_mib temperature_c power_w', got 3 values "
            "in '10 10 40'");
  EXPECT_EQ(err("10 ten 40 100\n"), "telemetry.txt:1: mem_used_mib must be an integer, got 'ten'");
  EXPECT_EQ(err("10 2000 40 100\n"), "telemetry.txt:1: mem_used_mib must be 0..1000, got 2000");
  EXPECT_EQ(err("\ngpu=2 1 1 1 1\n"), "telemetry.txt:2: 'gpu=2' names no GPU (there are 2)");
  EXPECT_EQ(err("gpu=0 1 1 1 1; gpu=0 2 2 2 2\n"), "telemetry.txt:1: gpu=0 given twice");
  EXPECT_EQ(err("1 1 1 1; 2 2 2 2\n"), "telemetry.txt:1: two entries for every GPU on one line");
  EXPECT_EQ(err("1 1 1 1;\n"), "telemetry.txt:1: empty entry between ';'");
}

TEST(FakeGpuProbeTest, MissingTelemetryFileIsAnError) {
  auto r = FakeGpuProbe::Create({.spec = "1xT4", .telemetry_path = "/nonexistent/telemetry.txt"},
                                Catalog());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/telemetry.txt"));
}

// --- Driver names and NodeSpec ----------------------------------------------------------------

TEST(CatalogModelForDriverNameTest, MapsDriverNamesToCatalogModels) {
  // Given the names NVML reports on common machines, expect the catalog's canonical models.
  struct Case {
    std::string driver_name;
    int64_t memory_mib;
    std::string model;
  };
  const Case cases[] = {
      {"NVIDIA H100 80GB HBM3", 81559, "H100"},
      {"NVIDIA H100 PCIe", 81559, "H100-PCIe"},  // its own model since the spec table names it
      {"NVIDIA H100 NVL", 95830, "H100-NVL"},
      {"NVIDIA H200", 143771, "H200"},
      {"NVIDIA H800", 81559, "H800"},
      {"Tesla T4", 15360, "T4"},
      {"NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"},
      {"NVIDIA A100-SXM4-40GB", 40960, "A100"},
      {"NVIDIA A100-PCIE-40GB", 40960, "A100"},
      {"NVIDIA A100 80GB PCIe", 81920, "A100-80GB"},
      {"NVIDIA A100-SXM4", 81920, "A100-80GB"},  // size from the device's memory
      {"NVIDIA A100-SXM4", 40960, "A100"},
      {"NVIDIA A100-SXM4", 0, "A100"},
      {"Tesla V100-SXM2-16GB", 16160, "V100"},
      {"Tesla V100-SXM2-32GB", 32510, "V100-32GB"},
      {"Tesla V100-PCIE-32GB", 32510, "V100-32GB"},
      {"NVIDIA A10G", 23028, "A10G"},
      {"NVIDIA A10", 23028, "A10"},
      {"NVIDIA L4", 23034, "L4"},
      {"NVIDIA L40S", 46068, "L40S"},
      {"NVIDIA RTX A6000", 49140, "A6000"},
      {"NVIDIA GeForce RTX 4090", 24564, "RTX4090"},
      {"NVIDIA GeForce RTX 3090", 24576, "RTX3090"},
      {"Tesla P100-PCIE-16GB", 16280, "P100"},
      {"Tesla K80", 11441, "K80"},
      {"NVIDIA GH200 480GB", 97871, "GH200"},
      {"NVIDIA B200", 183359, "B200"},
      {"H100", 81920, "H100"},  // what FakeGpuProbe reports
  };
  for (const Case& c : cases) {
    auto r = CatalogModelForDriverName(c.driver_name, c.memory_mib, Catalog());
    ASSERT_TRUE(r.ok()) << c.driver_name << ": " << r.status().ToString();
    EXPECT_EQ(*r, c.model) << c.driver_name;
  }
}

TEST(CatalogModelForDriverNameTest, UnknownGpuIsNotFound) {
  auto r = CatalogModelForDriverName("NVIDIA Quantum Z9", 1000, Catalog());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("'NVIDIA Quantum Z9' is not in the GPU catalog"));
}

TEST(NodeSpecFromDevicesTest, NvLinkPeersBecomeConnectedComponents) {
  // Given two NVLink pairs {0,1} and {2,3} and two GPUs without links, expect domains numbered
  // by their lowest GPU, and a GPU without peers in a domain of its own.
  std::vector<GpuDevice> devices = {
      Dev(0, "NVIDIA H100 80GB HBM3", {1}), Dev(1, "NVIDIA H100 80GB HBM3", {0}),
      Dev(2, "NVIDIA H100 80GB HBM3"),      Dev(3, "NVIDIA H100 80GB HBM3", {5}),
      Dev(4, "NVIDIA H100 80GB HBM3"),      Dev(5, "NVIDIA H100 80GB HBM3", {3}),
  };
  auto node = NodeSpecFromDevices("n7", devices, Catalog());
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->name, "n7");
  EXPECT_EQ(node->gpu_model, "H100");
  EXPECT_EQ(node->gpus, 6);
  EXPECT_EQ(node->nvlink_domain, (std::vector<int>{0, 0, 1, 2, 3, 2}));
}

TEST(NodeSpecFromDevicesTest, ChainsJoinIntoOneDomain) {
  // Given links 0-1, 1-2, 2-3 seen from one side only, expect one domain.
  std::vector<GpuDevice> devices = {Dev(0, "H100", {1}), Dev(1, "H100", {2}), Dev(2, "H100", {3}),
                                    Dev(3, "H100")};
  auto node = NodeSpecFromDevices("n", devices, Catalog());
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->nvlink_domain, (std::vector<int>{0, 0, 0, 0}));
}

TEST(NodeSpecFromDevicesTest, MixedModelsAndBadPeersAreErrors) {
  auto mixed = NodeSpecFromDevices("n", {Dev(0, "NVIDIA H100 80GB HBM3"), Dev(1, "Tesla T4")},
                                   Catalog());
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.status().message(), HasSubstr("two models (H100 as GPU 0, T4 as GPU 1)"));
  auto bad_peer = NodeSpecFromDevices("n", {Dev(0, "H100", {4})}, Catalog());
  ASSERT_FALSE(bad_peer.ok());
  EXPECT_THAT(bad_peer.status().message(), HasSubstr("NVLink peer 4 out of range"));
}

TEST(NodeSpecFromDevicesTest, NoGpusIsACpuOnlyNode) {
  auto node = NodeSpecFromDevices("cpu1", {}, Catalog());
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->gpus, 0);
  EXPECT_EQ(node->gpu_model, "");
  EXPECT_TRUE(node->nvlink_domain.empty());
}

// --- NvmlProbe --------------------------------------------------------------------------------

TEST(NvmlProbeTest, MissingDriverSaysHowToRunWithoutGpus) {
  // Given a machine without the NVIDIA driver, expect the "NVML not found" advice.
  if (void* h = dlopen(NvmlProbe::kDefaultLibrary, RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    GTEST_SKIP() << "this machine has NVML";
  }
  auto r = NvmlProbe::Open();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(),
            "NVML not found (libnvidia-ml.so.1): no NVIDIA driver on this machine; use "
            "--fake-gpus 8xH100 to run without GPUs");
}

TEST(NvmlProbeTest, LibraryWithoutNvmlSymbolsIsRejected) {
  // Given a library that loads but is not NVML, expect an error naming the missing symbol.
  auto r = NvmlProbe::Open("libm.so.6");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "NVML library libm.so.6 lacks nvmlInit_v2 (driver too old?)");
}

// --- Host CPUs and memory --------------------------------------------------------------------

TEST(HostResourcesTest, ReadersTakeMemTotalAndCgroupLimits) {
  // Given /proc/meminfo and cgroup v2 cpu.max / memory.max texts, expect MiB and milli-CPUs, and
  // no limit for "max" or text that is neither.
  EXPECT_EQ(MemTotalMib("MemTotal:       16318480 kB\nMemFree:         1024 kB\n"), 15936);
  EXPECT_EQ(MemTotalMib("MemFree: 1024 kB\n"), std::nullopt);
  EXPECT_EQ(CgroupCpuMaxMilli("200000 100000\n"), 2000);
  EXPECT_EQ(CgroupCpuMaxMilli("50000 100000"), 500);
  EXPECT_EQ(CgroupCpuMaxMilli("max 100000\n"), std::nullopt);
  EXPECT_EQ(CgroupCpuMaxMilli(""), std::nullopt);
  EXPECT_EQ(CgroupMemoryMaxMib("1073741824\n"), 1024);
  EXPECT_EQ(CgroupMemoryMaxMib("max\n"), std::nullopt);
}

TEST(HostResourcesTest, ThisMachineHasCpusAndMemory) {
  // Given the machine the test runs on, expect at least one CPU and some memory: an agent that
  // reported none made every job that asks resources.cpus or memory wait forever.
  HostResources h = ProbeHostResources();
  EXPECT_GE(h.cpu_milli, 1000);
  EXPECT_GT(h.mem_mib, 0);
}

}  // namespace
}  // namespace gpufleet::agent
