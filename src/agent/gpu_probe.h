// GpuProbe: what GPUs this node has and how busy they are.
//
// Two implementations: NvmlProbe asks the NVIDIA driver through NVML, which it loads with dlopen
// at run time (gpufleet never links against NVML, so one binary runs on machines with and without
// a driver); FakeGpuProbe makes up a node from a spec such as "8xH100", for running the agent
// without GPUs. NodeSpecFromDevices turns what a probe saw into the NodeSpec the scheduler uses.
//
// Thread-safety: a probe is used by one thread at a time; the free functions are pure.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "model/burn_in.h"
#include "model/gpu_catalog.h"
#include "model/types.h"

namespace gpufleet::agent {

struct GpuDevice {
  int index = 0;              // the driver's index, 0..n-1
  std::string uuid;           // "GPU-8e5b3e41-..." (driver) or "GPU-fake-node1-0"
  std::string name;           // the driver's name: "NVIDIA H100 80GB HBM3", "Tesla T4"
  int64_t memory_mib = 0;     // total memory
  std::vector<int> nvlink_peers;  // indices of the GPUs it reaches over active NVLinks, ascending
  std::string compute_capability{};  // "9.0"; empty when unknown
};

// The NVIDIA driver's versions: "550.54.15" and the highest CUDA it supports, "12.4". Empty when
// there is no driver (or it does not say).
struct DriverInfo {
  std::string driver_version{};
  std::string cuda_version{};
};

struct GpuSample {
  int util_pct = 0;  // 0..100, share of the last sample period a kernel ran
  int64_t mem_used_mib = 0;
  int temperature_c = 0;
  int power_w = 0;
};

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  // The GPUs, in index order. Does not change while the agent runs.
  virtual Result<std::vector<GpuDevice>> Devices() = 0;
  // One sample per GPU, in index order.
  virtual Result<std::vector<GpuSample>> Sample() = 0;
  virtual DriverInfo Driver() { return {}; }
  // Per GPU, in index order: the health figures the burn-in judges (ECC errors, retirements and
  // remaps, the PCIe link as trained and at most, NVLinks up, SM clock, throttle reasons,
  // temperature, power; model::GpuHealth). A figure the GPU does not report stays -1.
  virtual Result<std::vector<model::GpuHealth>> Health() { return std::vector<model::GpuHealth>{}; }
  // Critical XID errors since the last call (or since the probe opened), as (GPU index, XID).
  virtual std::vector<std::pair<int, int>> TakeXids() { return {}; }
  // For fake GPUs with a declared `slow=F` fault: the burn-in suite divides its figures by F, as a
  // degraded node would measure. 1 for real GPUs.
  virtual double SuiteSlowdown() const { return 1.0; }
};

// NVML through dlopen. Open loads the library and calls nvmlInit_v2; the destructor shuts NVML
// down and unloads it. NVLink peers: for each active link, the remote end's PCI bus id mapped to
// a local GPU; a remote end that is no local GPU (an NVSwitch) joins every local GPU linked to it.
class NvmlProbe : public GpuProbe {
 public:
  static constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";
  // Errors: Unavailable "NVML not found (libnvidia-ml.so.1): no NVIDIA driver on this machine;
  // use --fake-gpus 8xH100 to run without GPUs" when the library is missing; Unavailable naming
  // the symbol when the library lacks one; Unavailable with NVML's message when init fails.
  static Result<std::unique_ptr<NvmlProbe>> Open(const std::string& library = kDefaultLibrary);
  ~NvmlProbe() override;

  Result<std::vector<GpuDevice>> Devices() override;
  Result<std::vector<GpuSample>> Sample() override;
  DriverInfo Driver() override;
  Result<std::vector<model::GpuHealth>> Health() override;
  std::vector<std::pair<int, int>> TakeXids() override;

  struct Api;  // the resolved NVML entry points

 private:
  NvmlProbe(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
  void* xid_events_ = nullptr;  // nvmlEventSet_t watching critical XIDs; null when unsupported
};

// Fake GPUs.
//
// Spec: "COUNTxMODEL", e.g. "8xH100", "4xA100-80GB", "2xT4". MODEL is a catalog name or alias;
// "<catalog name>-<N>GB" is accepted when that model has N GB ("8xH100-80GB"). COUNT is 1..64.
// Devices: name = the canonical catalog name, memory from the catalog, uuid
// "GPU-fake-<node>-<i>". NVLink: when the catalog gives the model an NVLink interconnect, every
// GPU is a peer of every other (one domain, as on an NVSwitch board); otherwise (T4, L4, ...)
// no GPU has peers, as on a real PCIe-only node.
//
// Telemetry file (--fake-telemetry FILE): each line is one Sample() call; after the last line,
// the last line repeats. '#' starts a comment; blank lines are skipped. A line holds one or more
// entries separated by ';'. An entry is four integers
//     util_pct mem_used_mib temperature_c power_w
// for every GPU, or the same four after "gpu=I" for GPU I alone, which overrides the all-GPU
// entry on that line:
//     50 20000 60 300                  # every GPU at 50%, 20000 MiB used, 60 C, 300 W
//     50 20000 60 300; gpu=3 100 79000 85 690   # ... except GPU 3
//     gpu=0 90 1000 70 500             # GPU 0 busy, the others idle
// GPUs a line does not cover are idle (0%, 0 MiB, 30 C, 50 W). With no file every GPU is idle.
// Limits: util 0..100, memory 0..the GPU's memory, temperature -40..150, power 0..5000.
//
// Driver (--fake-driver): "550.54.15/12.4" by default, so fake nodes run today's environments.
// Faults (--fake-faults), for burn-in drills: entries separated by ';', each "gpu=I KEY=VALUE..."
// for one GPU or "slow=F" for the node:
//     gpu=1 ecc=3              # 3 uncorrected ECC errors on GPU 1
//     gpu=0 pcie_width=8       # the link trained at x8 (of x16)
//     gpu=2 throttle=hw_thermal temp=93
//     gpu=0 xid=79             # a critical XID during the check
//     gpu=3 nvlink_down=2 retire_pending=1
//     slow=10                  # the burn-in suite measures 10x less than it would
// Without faults every GPU is healthy: 0 ECC errors, PCIe gen 4 x16, every NVLink up.
struct FakeGpuOptions {
  std::string spec{};            // "8xH100"
  std::string node = "node";     // for the uuids
  std::string telemetry_path{};  // empty = idle
  std::string driver{};          // "DRIVER/CUDA"; empty = 550.54.15/12.4
  std::string faults{};          // see above; empty = healthy
};

// Parses --fake-faults for `gpus` GPUs into per-GPU health (defaults filled) and the slowdown.
// Errors name the entry: "--fake-faults 'gpu=9 ecc=1': GPU 9 does not exist (the node has 8)".
struct FakeFaults {
  std::vector<model::GpuHealth> health;
  std::vector<std::pair<int, int>> xids;
  double slowdown = 1.0;
};
Result<FakeFaults> ParseFakeFaults(const std::string& text, int gpus, bool nvlink);

// The probe a command asked for: fake GPUs when options.spec is set (the other options apply),
// else NVML from `nvml_library` (empty: the default library). One place for `gpufleet agent` and
// `gpufleet node check`.
Result<std::unique_ptr<GpuProbe>> OpenProbe(const FakeGpuOptions& options, const std::string& nvml_library,
                                            const model::GpuCatalog& catalog);

// One line of a telemetry file, already expanded to every GPU.
using TelemetryStep = std::vector<GpuSample>;

// Parses a telemetry file's text for `gpus` GPUs with the given memory (index order). Errors name
// the source and line: "telemetry.txt:3: util_pct must be 0..100, got 130".
Result<std::vector<TelemetryStep>> ParseFakeTelemetry(const std::string& text,
                                                      const std::string& source,
                                                      const std::vector<int64_t>& memory_mib);

class FakeGpuProbe : public GpuProbe {
 public:
  // Errors: InvalidArgument for a bad spec ("unknown GPU model 'H10' in '8xH10'; close matches:
  // H100, H200, H800") or telemetry file; NotFound when the telemetry file cannot be read.
  static Result<std::unique_ptr<FakeGpuProbe>> Create(const FakeGpuOptions& options,
                                                      const model::GpuCatalog& catalog);

  Result<std::vector<GpuDevice>> Devices() override { return devices_; }
  Result<std::vector<GpuSample>> Sample() override;
  DriverInfo Driver() override { return driver_; }
  Result<std::vector<model::GpuHealth>> Health() override { return faults_.health; }
  std::vector<std::pair<int, int>> TakeXids() override { return faults_.xids; }
  double SuiteSlowdown() const override { return faults_.slowdown; }

 private:
  FakeGpuProbe(std::vector<GpuDevice> devices, std::vector<TelemetryStep> steps)
      : devices_(std::move(devices)), steps_(std::move(steps)) {}
  DriverInfo driver_;
  FakeFaults faults_;
  std::vector<GpuDevice> devices_;
  std::vector<TelemetryStep> steps_;  // empty = idle
  size_t next_ = 0;
};

// The catalog's canonical model name for a driver's GPU name: "NVIDIA H100 80GB HBM3" -> "H100",
// "Tesla T4" -> "T4", "NVIDIA A100-SXM4-80GB" -> "A100-80GB", "NVIDIA H100 NVL" -> "H100-NVL",
// "NVIDIA GeForce RTX 4090" -> "RTX4090". Where the name does not say the memory size,
// `memory_mib` (the device's; 0 = unknown) picks between variants ("A100" vs "A100-80GB").
// NotFound when no catalog model matches.
Result<std::string> CatalogModelForDriverName(const std::string& driver_name, int64_t memory_mib,
                                              const model::GpuCatalog& catalog);

// The NodeSpec for node `name` with these GPUs: the catalog model of their driver names (all
// GPUs of a node must be one model) and nvlink_domain from the NVLink peers (connected
// components, numbered in order of their lowest GPU index; a GPU without peers is a domain of
// its own). CPU, memory, labels and market are left for the caller. No GPUs -> a CPU-only node.
Result<model::NodeSpec> NodeSpecFromDevices(const std::string& name,
                                            const std::vector<GpuDevice>& devices,
                                            const model::GpuCatalog& catalog);

// What the host offers jobs besides GPUs: the CPUs this process may run on (its affinity mask,
// lowered by a cgroup v2 cpu.max quota) and the memory (MemTotal, lowered by a cgroup v2
// memory.max). Zero where it cannot be read. `gpufleet agent --cpus/--memory` override it.
struct HostResources {
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;
};
HostResources ProbeHostResources();

// The readers behind it, for tests. MemTotal of /proc/meminfo in MiB; a cgroup v2 cpu.max
// ("200000 100000": 2 CPUs) in milli-CPUs and a memory.max (bytes) in MiB, nullopt for "max" (no
// limit) or text that is neither.
std::optional<int64_t> MemTotalMib(std::string_view meminfo);
std::optional<int64_t> CgroupCpuMaxMilli(std::string_view cpu_max);
std::optional<int64_t> CgroupMemoryMaxMib(std::string_view memory_max);

}  // namespace gpufleet::agent
