#include "agent/gpu_probe.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

#include "common/strings.h"

namespace gpufleet::agent {

// ---------------------------------------------------------------------------------------------
// NVML, declared here from the public nvml.h documentation (only what this file uses), so that
// building gpufleet needs no NVIDIA headers and running it needs no driver.
namespace {

using nvmlReturn_t = int;                  // enum nvmlReturn_enum
using nvmlDevice_t = struct nvmlDevice_st*;  // opaque handle
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorInvalidArgument = 2;
constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
constexpr int kNvmlTemperatureGpu = 0;    // nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU
constexpr int kNvmlFeatureEnabled = 1;    // nvmlEnableState_t NVML_FEATURE_ENABLED
constexpr unsigned kNvmlNvLinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS (recent drivers)
constexpr unsigned kNvmlDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kNvmlDeviceUuidBufferSize = 80;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

struct nvmlMemory_t {  // nvmlMemory_t (v1), bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {  // percent
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
};
static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
using nvmlEventSet_t = struct nvmlEventSet_st*;
struct nvmlEventData_t {  // nvmlEventData_t
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for XID events
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr unsigned long long kNvmlEventTypeXidCriticalError = 0x8;
constexpr int kNvmlMemoryErrorUncorrected = 1;  // nvmlMemoryErrorType_t
constexpr int kNvmlVolatileEcc = 0;             // nvmlEccCounterType_t
constexpr int kNvmlClockSm = 1;                 // nvmlClockType_t NVML_CLOCK_SM
constexpr unsigned kNvmlSystemDriverVersionBufferSize = 80;
// nvmlClocksThrottleReasons bits (nvml.h), with the names the burn-in report uses.
constexpr std::pair<unsigned long long, const char*> kThrottleReasons[] = {
    {0x4, "sw_power_cap"}, {0x8, "hw_slowdown"}, {0x20, "sw_thermal"}, {0x40, "hw_thermal"}, {0x80, "hw_power_brake"},
};

constexpr const char* kNvmlNotFound =
    "NVML not found (libnvidia-ml.so.1): no NVIDIA driver on this machine; use --fake-gpus "
    "8xH100 to run without GPUs";

}  // namespace

struct NvmlProbe::Api {
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);  // optional
  nvmlReturn_t (*DeviceGetCount)(unsigned int*);
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned int*);
  nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned int*);  // milliwatts
  nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned int, int*);
  nvmlReturn_t (*DeviceGetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*);
  nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*);
  // Optional (older drivers lack some; what is missing is reported as unknown).
  nvmlReturn_t (*SystemGetDriverVersion)(char*, unsigned int);
  nvmlReturn_t (*SystemGetCudaDriverVersion)(int*);
  nvmlReturn_t (*DeviceGetCudaComputeCapability)(nvmlDevice_t, int*, int*);
  nvmlReturn_t (*DeviceGetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*);
  nvmlReturn_t (*DeviceGetRetiredPagesPendingStatus)(nvmlDevice_t, int*);
  nvmlReturn_t (*DeviceGetRemappedRows)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*, unsigned int*);
  nvmlReturn_t (*DeviceGetCurrPcieLinkGeneration)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetCurrPcieLinkWidth)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetMaxPcieLinkGeneration)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetMaxPcieLinkWidth)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetClockInfo)(nvmlDevice_t, int, unsigned int*);
  nvmlReturn_t (*DeviceGetCurrentClocksThrottleReasons)(nvmlDevice_t, unsigned long long*);
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*);
  nvmlReturn_t (*DeviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);

  std::string Error(const char* call, nvmlReturn_t rc) const {
    const char* text = ErrorString ? ErrorString(rc) : nullptr;
    std::string msg = text ? text : "";
    return std::string(call) + ": " + (msg.empty() ? "NVML error " + std::to_string(rc) : msg);
  }
};

Result<std::unique_ptr<NvmlProbe>> NvmlProbe::Open(const std::string& library) {
  dlerror();
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    std::string detail = why ? why : "";
    if (library == kDefaultLibrary && detail.find("No such file") != std::string::npos) {
      return Status::Unavailable(kNvmlNotFound);
    }
    return Status::Unavailable("NVML not loaded (" + library + "): " + detail +
                               "; use --fake-gpus 8xH100 to run without GPUs");
  }
  auto api = std::make_unique<Api>();
  std::string missing;
  auto resolve = [&](auto& slot, const char* symbol, bool required) {
    void* p = dlsym(handle, symbol);
    if (p == nullptr && required && missing.empty()) missing = symbol;
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
  };
  resolve(api->Init, "nvmlInit_v2", true);
  resolve(api->Shutdown, "nvmlShutdown", true);
  resolve(api->ErrorString, "nvmlErrorString", false);
  resolve(api->DeviceGetCount, "nvmlDeviceGetCount_v2", true);
  resolve(api->DeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", true);
  resolve(api->DeviceGetName, "nvmlDeviceGetName", true);
  resolve(api->DeviceGetUUID, "nvmlDeviceGetUUID", true);
  resolve(api->DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo", true);
  resolve(api->DeviceGetUtilizationRates, "nvmlDeviceGetUtilizationRates", true);
  resolve(api->DeviceGetTemperature, "nvmlDeviceGetTemperature", true);
  resolve(api->DeviceGetPowerUsage, "nvmlDeviceGetPowerUsage", true);
  resolve(api->DeviceGetNvLinkState, "nvmlDeviceGetNvLinkState", true);
  resolve(api->DeviceGetNvLinkRemotePciInfo, "nvmlDeviceGetNvLinkRemotePciInfo_v2", true);
  resolve(api->DeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3", true);
  resolve(api->SystemGetDriverVersion, "nvmlSystemGetDriverVersion", false);
  resolve(api->SystemGetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion_v2", false);
  resolve(api->DeviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability", false);
  resolve(api->DeviceGetTotalEccErrors, "nvmlDeviceGetTotalEccErrors", false);
  resolve(api->DeviceGetRetiredPagesPendingStatus, "nvmlDeviceGetRetiredPagesPendingStatus", false);
  resolve(api->DeviceGetRemappedRows, "nvmlDeviceGetRemappedRows", false);
  resolve(api->DeviceGetCurrPcieLinkGeneration, "nvmlDeviceGetCurrPcieLinkGeneration", false);
  resolve(api->DeviceGetCurrPcieLinkWidth, "nvmlDeviceGetCurrPcieLinkWidth", false);
  resolve(api->DeviceGetMaxPcieLinkGeneration, "nvmlDeviceGetMaxPcieLinkGeneration", false);
  resolve(api->DeviceGetMaxPcieLinkWidth, "nvmlDeviceGetMaxPcieLinkWidth", false);
  resolve(api->DeviceGetClockInfo, "nvmlDeviceGetClockInfo", false);
  resolve(api->DeviceGetCurrentClocksThrottleReasons, "nvmlDeviceGetCurrentClocksThrottleReasons", false);
  resolve(api->EventSetCreate, "nvmlEventSetCreate", false);
  resolve(api->DeviceRegisterEvents, "nvmlDeviceRegisterEvents", false);
  resolve(api->EventSetWait, "nvmlEventSetWait_v2", false);
  resolve(api->EventSetFree, "nvmlEventSetFree", false);
  if (!missing.empty()) {
    dlclose(handle);
    return Status::Unavailable("NVML library " + library + " lacks " + missing +
                               " (driver too old?)");
  }
  if (nvmlReturn_t rc = api->Init(); rc != kNvmlSuccess) {
    std::string msg = api->Error("nvmlInit_v2", rc);
    dlclose(handle);
    return Status::Unavailable("NVML could not start: " + msg);
  }
  return std::unique_ptr<NvmlProbe>(new NvmlProbe(handle, std::move(api)));
}

NvmlProbe::NvmlProbe(void* handle, std::unique_ptr<Api> api)
    : handle_(handle), api_(std::move(api)) {
  // Critical XIDs from now on, for the burn-in: registered on every GPU that supports it.
  const Api& a = *api_;
  if (!a.EventSetCreate || !a.DeviceRegisterEvents || !a.EventSetWait || !a.EventSetFree) return;
  nvmlEventSet_t set = nullptr;
  if (a.EventSetCreate(&set) != kNvmlSuccess) return;
  unsigned count = 0;
  bool any = false;
  if (a.DeviceGetCount(&count) == kNvmlSuccess) {
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t h = nullptr;
      if (a.DeviceGetHandleByIndex(i, &h) != kNvmlSuccess) continue;
      any |= a.DeviceRegisterEvents(h, kNvmlEventTypeXidCriticalError, set) == kNvmlSuccess;
    }
  }
  if (any) {
    xid_events_ = set;
  } else {
    a.EventSetFree(set);
  }
}

NvmlProbe::~NvmlProbe() {
  if (xid_events_) api_->EventSetFree(static_cast<nvmlEventSet_t>(xid_events_));
  api_->Shutdown();
  dlclose(handle_);
}

DriverInfo NvmlProbe::Driver() {
  const Api& a = *api_;
  DriverInfo d;
  char version[kNvmlSystemDriverVersionBufferSize] = {};
  if (a.SystemGetDriverVersion && a.SystemGetDriverVersion(version, sizeof version) == kNvmlSuccess) {
    d.driver_version = version;
  }
  int cuda = 0;  // 12040 for CUDA 12.4
  if (a.SystemGetCudaDriverVersion && a.SystemGetCudaDriverVersion(&cuda) == kNvmlSuccess && cuda > 0) {
    d.cuda_version = std::to_string(cuda / 1000) + "." + std::to_string((cuda % 1000) / 10);
  }
  return d;
}

Result<std::vector<model::GpuHealth>> NvmlProbe::Health() {
  const Api& a = *api_;
  unsigned count = 0;
  if (nvmlReturn_t rc = a.DeviceGetCount(&count); rc != kNvmlSuccess) {
    return Status::Unavailable(a.Error("nvmlDeviceGetCount_v2", rc));
  }
  std::vector<model::GpuHealth> out(count);
  for (unsigned i = 0; i < count; ++i) {
    model::GpuHealth& g = out[i];
    g.index = static_cast<int>(i);
    nvmlDevice_t h = nullptr;
    if (auto rc = a.DeviceGetHandleByIndex(i, &h); rc != kNvmlSuccess) {
      return Status::Unavailable("GPU " + std::to_string(i) + ": " + a.Error("nvmlDeviceGetHandleByIndex_v2", rc));
    }
    unsigned long long ecc = 0;
    if (a.DeviceGetTotalEccErrors &&
        a.DeviceGetTotalEccErrors(h, kNvmlMemoryErrorUncorrected, kNvmlVolatileEcc, &ecc) == kNvmlSuccess) {
      g.ecc_uncorrected = static_cast<int64_t>(ecc);
    }
    unsigned corr = 0, unc = 0, pending = 0, failed = 0;
    if (a.DeviceGetRemappedRows && a.DeviceGetRemappedRows(h, &corr, &unc, &pending, &failed) == kNvmlSuccess) {
      g.retired_pages = static_cast<int64_t>(corr) + unc;  // Ampere and later remap rows
      g.retirement_pending = pending != 0 || failed != 0;
    } else if (int state = 0; a.DeviceGetRetiredPagesPendingStatus &&
                              a.DeviceGetRetiredPagesPendingStatus(h, &state) == kNvmlSuccess) {
      g.retirement_pending = state == kNvmlFeatureEnabled;  // Volta and earlier retire pages
    }
    auto read = [&](auto fn, int& field) {
      unsigned v = 0;
      if (fn && fn(h, &v) == kNvmlSuccess) field = static_cast<int>(v);
    };
    read(a.DeviceGetCurrPcieLinkGeneration, g.pcie_gen);
    read(a.DeviceGetCurrPcieLinkWidth, g.pcie_width);
    read(a.DeviceGetMaxPcieLinkGeneration, g.pcie_max_gen);
    read(a.DeviceGetMaxPcieLinkWidth, g.pcie_max_width);
    unsigned mhz = 0;
    if (a.DeviceGetClockInfo && a.DeviceGetClockInfo(h, kNvmlClockSm, &mhz) == kNvmlSuccess) {
      g.min_sm_clock_mhz = g.max_sm_clock_mhz = static_cast<int>(mhz);
    }
    unsigned long long reasons = 0;
    if (a.DeviceGetCurrentClocksThrottleReasons && a.DeviceGetCurrentClocksThrottleReasons(h, &reasons) == kNvmlSuccess) {
      for (const auto& [bit, name] : kThrottleReasons) {
        if (reasons & bit) g.throttle_reasons.push_back(name);
      }
    }
    unsigned temp = 0;
    if (a.DeviceGetTemperature(h, kNvmlTemperatureGpu, &temp) == kNvmlSuccess) g.max_temperature_c = static_cast<int>(temp);
    unsigned mw = 0;
    if (a.DeviceGetPowerUsage(h, &mw) == kNvmlSuccess) g.max_power_w = static_cast<int>(mw / 1000);
    int active = 0, total = 0;
    for (unsigned link = 0; link < kNvmlNvLinkMaxLinks; ++link) {
      int state = 0;
      nvmlReturn_t rc = a.DeviceGetNvLinkState(h, link, &state);
      if (rc == kNvmlErrorNotSupported || rc == kNvmlErrorInvalidArgument) break;
      ++total;
      if (rc == kNvmlSuccess && state == kNvmlFeatureEnabled) ++active;
    }
    if (total > 0) {
      g.nvlink_total = total;
      g.nvlink_active = active;
    }
  }
  return out;
}

std::vector<std::pair<int, int>> NvmlProbe::TakeXids() {
  std::vector<std::pair<int, int>> out;
  if (!xid_events_) return out;
  const Api& a = *api_;
  // Map handles back to indices.
  std::map<nvmlDevice_t, int> index;
  unsigned count = 0;
  if (a.DeviceGetCount(&count) == kNvmlSuccess) {
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t h = nullptr;
      if (a.DeviceGetHandleByIndex(i, &h) == kNvmlSuccess) index[h] = static_cast<int>(i);
    }
  }
  for (int n = 0; n < 1000; ++n) {  // drain what is queued; a zero timeout does not block
    nvmlEventData_t data{};
    if (a.EventSetWait(static_cast<nvmlEventSet_t>(xid_events_), &data, 0) != kNvmlSuccess) break;
    auto it = index.find(data.device);
    out.emplace_back(it == index.end() ? -1 : it->second, static_cast<int>(data.eventData));
  }
  return out;
}

namespace {

using PciKey = std::tuple<unsigned, unsigned, unsigned>;  // domain, bus, device
PciKey KeyOf(const nvmlPciInfo_t& p) { return {p.domain, p.bus, p.device}; }

}  // namespace

Result<std::vector<GpuDevice>> NvmlProbe::Devices() {
  const Api& a = *api_;
  unsigned count = 0;
  if (nvmlReturn_t rc = a.DeviceGetCount(&count); rc != kNvmlSuccess) {
    return Status::Unavailable(a.Error("nvmlDeviceGetCount_v2", rc));
  }
  std::vector<GpuDevice> devices(count);
  std::vector<nvmlDevice_t> handles(count);
  std::map<PciKey, int> index_of_pci;
  for (unsigned i = 0; i < count; ++i) {
    auto fail = [&](const char* call, nvmlReturn_t rc) {
      return Status::Unavailable("GPU " + std::to_string(i) + ": " + a.Error(call, rc));
    };
    GpuDevice& d = devices[i];
    d.index = static_cast<int>(i);
    if (auto rc = a.DeviceGetHandleByIndex(i, &handles[i]); rc != kNvmlSuccess) {
      return fail("nvmlDeviceGetHandleByIndex_v2", rc);
    }
    char name[kNvmlDeviceNameBufferSize] = {};
    if (auto rc = a.DeviceGetName(handles[i], name, sizeof name); rc != kNvmlSuccess) {
      return fail("nvmlDeviceGetName", rc);
    }
    d.name = name;
    char uuid[kNvmlDeviceUuidBufferSize] = {};
    if (auto rc = a.DeviceGetUUID(handles[i], uuid, sizeof uuid); rc != kNvmlSuccess) {
      return fail("nvmlDeviceGetUUID", rc);
    }
    d.uuid = uuid;
    nvmlMemory_t mem{};
    if (auto rc = a.DeviceGetMemoryInfo(handles[i], &mem); rc != kNvmlSuccess) {
      return fail("nvmlDeviceGetMemoryInfo", rc);
    }
    d.memory_mib = static_cast<int64_t>(mem.total / (1024 * 1024));
    nvmlPciInfo_t pci{};
    if (auto rc = a.DeviceGetPciInfo(handles[i], &pci); rc != kNvmlSuccess) {
      return fail("nvmlDeviceGetPciInfo_v3", rc);
    }
    index_of_pci[KeyOf(pci)] = static_cast<int>(i);
    int major = 0, minor = 0;
    if (a.DeviceGetCudaComputeCapability &&
        a.DeviceGetCudaComputeCapability(handles[i], &major, &minor) == kNvmlSuccess && major > 0) {
      d.compute_capability = std::to_string(major) + "." + std::to_string(minor);
    }
  }

  std::vector<std::set<int>> peers(count);
  std::map<PciKey, std::set<int>> switch_members;  // remote ends that are not local GPUs
  for (unsigned i = 0; i < count; ++i) {
    for (unsigned link = 0; link < kNvmlNvLinkMaxLinks; ++link) {
      int state = 0;
      nvmlReturn_t rc = a.DeviceGetNvLinkState(handles[i], link, &state);
      if (rc == kNvmlErrorNotSupported) break;  // no NVLink on this GPU
      if (rc == kNvmlErrorInvalidArgument) break;  // past this GPU's last link
      if (rc != kNvmlSuccess || state != kNvmlFeatureEnabled) continue;
      nvmlPciInfo_t remote{};
      if (a.DeviceGetNvLinkRemotePciInfo(handles[i], link, &remote) != kNvmlSuccess) continue;
      auto it = index_of_pci.find(KeyOf(remote));
      if (it != index_of_pci.end()) {
        if (it->second != static_cast<int>(i)) peers[i].insert(it->second);
      } else {
        switch_members[KeyOf(remote)].insert(static_cast<int>(i));
      }
    }
  }
  for (const auto& [key, members] : switch_members) {
    for (int x : members) {
      for (int y : members) {
        if (x != y) peers[x].insert(y);
      }
    }
  }
  for (unsigned i = 0; i < count; ++i) {
    // A link seen from one side only still joins both.
    for (int j : peers[i]) peers[j].insert(static_cast<int>(i));
  }
  for (unsigned i = 0; i < count; ++i) {
    devices[i].nvlink_peers.assign(peers[i].begin(), peers[i].end());
  }
  return devices;
}

Result<std::vector<GpuSample>> NvmlProbe::Sample() {
  const Api& a = *api_;
  unsigned count = 0;
  if (nvmlReturn_t rc = a.DeviceGetCount(&count); rc != kNvmlSuccess) {
    return Status::Unavailable(a.Error("nvmlDeviceGetCount_v2", rc));
  }
  std::vector<GpuSample> samples(count);
  for (unsigned i = 0; i < count; ++i) {
    // A figure the GPU does not report (NOT_SUPPORTED) reads as 0; other failures (a lost GPU)
    // are errors.
    Status failure;
    auto check = [&](const char* call, nvmlReturn_t rc) {
      if (rc == kNvmlSuccess) return true;
      if (rc != kNvmlErrorNotSupported && failure.ok()) {
        failure = Status::Unavailable("GPU " + std::to_string(i) + ": " + a.Error(call, rc));
      }
      return false;
    };
    nvmlDevice_t h = nullptr;
    if (!check("nvmlDeviceGetHandleByIndex_v2", a.DeviceGetHandleByIndex(i, &h))) {
      return failure.ok() ? Status::Unavailable("GPU " + std::to_string(i) + ": no handle")
                          : failure;
    }
    GpuSample& s = samples[i];
    nvmlUtilization_t util{};
    if (check("nvmlDeviceGetUtilizationRates", a.DeviceGetUtilizationRates(h, &util))) {
      s.util_pct = static_cast<int>(util.gpu);
    }
    nvmlMemory_t mem{};
    if (check("nvmlDeviceGetMemoryInfo", a.DeviceGetMemoryInfo(h, &mem))) {
      s.mem_used_mib = static_cast<int64_t>(mem.used / (1024 * 1024));
    }
    unsigned temp = 0;
    if (check("nvmlDeviceGetTemperature", a.DeviceGetTemperature(h, kNvmlTemperatureGpu, &temp))) {
      s.temperature_c = static_cast<int>(temp);
    }
    unsigned milliwatts = 0;
    if (check("nvmlDeviceGetPowerUsage", a.DeviceGetPowerUsage(h, &milliwatts))) {
      s.power_w = static_cast<int>(milliwatts / 1000);
    }
    if (!failure.ok()) return failure;
  }
  return samples;
}

// ---------------------------------------------------------------------------------------------
// Catalog names.
namespace {

// Up to four canonical names nearest to `name` (edit distance at most 2 on lower case, to the
// name or an alias), nearest first; among equals, names that start with `name` ("H10" ->
// "H100"), then catalog order.
std::vector<std::string> CloseMatches(const std::string& name, const model::GpuCatalog& catalog) {
  std::string want = ToLower(name);
  std::vector<std::tuple<size_t, bool, size_t>> scored;  // distance, !prefix, catalog position
  const auto& models = catalog.models();
  for (size_t i = 0; i < models.size(); ++i) {
    size_t best = EditDistance(want, ToLower(models[i].name));
    bool prefix = StartsWith(ToLower(models[i].name), want);
    for (const auto& alias : models[i].aliases) {
      best = std::min(best, EditDistance(want, ToLower(alias)));
      prefix = prefix || StartsWith(ToLower(alias), want);
    }
    if (best <= 2) scored.emplace_back(best, !prefix, i);
  }
  std::stable_sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t k = 0; k < scored.size() && k < 4; ++k) out.push_back(models[std::get<2>(scored[k])].name);
  return out;
}

std::string CloseMatchesText(const std::string& name, const model::GpuCatalog& catalog) {
  std::vector<std::string> close = CloseMatches(name, catalog);
  if (!close.empty()) return "close matches: " + Join(close, ", ");
  std::vector<std::string> all;
  for (const auto& m : catalog.models()) all.push_back(m.name);
  return "the catalog has: " + Join(all, ", ");
}

// "80GB" -> 80; nullopt for anything else.
std::optional<int64_t> GigabytesToken(std::string_view token) {
  std::string t = ToLower(token);
  if (t.size() < 3 || t.compare(t.size() - 2, 2, "gb") != 0) return std::nullopt;
  return ParseInt(std::string_view(t).substr(0, t.size() - 2));
}

bool MemoryAbout(int64_t catalog_mib, int64_t device_mib) {
  // Drivers report a little less than the marketing size (an 80 GB H100 shows 81559 MiB).
  return std::llabs(catalog_mib - device_mib) * 10 <= catalog_mib;
}

}  // namespace

Result<std::string> CatalogModelForDriverName(const std::string& driver_name, int64_t memory_mib,
                                              const model::GpuCatalog& catalog) {
  std::string rest(Trim(driver_name));
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const char* prefix : {"nvidia ", "tesla ", "geforce ", "quadro "}) {
      if (StartsWith(ToLower(rest), prefix)) {
        rest = std::string(Trim(std::string_view(rest).substr(std::string_view(prefix).size())));
        stripped = true;
      }
    }
  }
  if (const model::GpuModel* m = catalog.Find(rest)) return m->name;

  std::vector<std::string> tokens;
  for (const std::string& word : Split(rest, ' ')) {
    for (const std::string& t : Split(word, '-')) {
      if (!t.empty()) tokens.push_back(t);
    }
  }
  if (tokens.empty()) return Status::NotFound("empty GPU name");
  std::string family = tokens[0];
  size_t first_rest = 1;
  if (ToLower(family) == "rtx" && tokens.size() > 1) {  // "RTX 4090", "RTX A6000"
    family += tokens[1];
    first_rest = 2;
  }
  std::optional<int64_t> name_gb;
  for (size_t i = first_rest; i < tokens.size() && !name_gb; ++i) name_gb = GigabytesToken(tokens[i]);

  // Most specific first: the memory variant, then a named variant ("H100 NVL"), then the family.
  // A variant guessed from the device's memory is kept only when the catalog model is that size.
  struct Candidate {
    std::string name;
    bool from_device_memory = false;
  };
  std::vector<Candidate> candidates;
  if (name_gb) {
    candidates.push_back({family + "-" + std::to_string(*name_gb) + "GB"});
  } else if (memory_mib > 0) {
    candidates.push_back({family + "-" + std::to_string(std::llround(memory_mib / 1024.0)) + "GB", true});
  }
  for (size_t i = first_rest; i < tokens.size(); ++i) {
    if (!GigabytesToken(tokens[i])) candidates.push_back({family + "-" + tokens[i]});
  }
  candidates.push_back({family});
  for (const Candidate& c : candidates) {
    const model::GpuModel* m = catalog.Find(c.name);
    if (m == nullptr) continue;
    if (c.from_device_memory && !MemoryAbout(m->mem_mib, memory_mib)) continue;
    return m->name;
  }
  return Status::NotFound("GPU '" + driver_name + "' is not in the GPU catalog (" +
                          CloseMatchesText(family, catalog) + ")");
}

Result<model::NodeSpec> NodeSpecFromDevices(const std::string& name,
                                            const std::vector<GpuDevice>& devices,
                                            const model::GpuCatalog& catalog) {
  model::NodeSpec node;
  node.name = name;
  const int n = static_cast<int>(devices.size());
  node.gpus = n;
  std::vector<std::string> models(n);
  for (int i = 0; i < n; ++i) {
    if (devices[i].index != i) {
      return Status::InvalidArgument("node " + name + ": device " + std::to_string(i) +
                                     " has index " + std::to_string(devices[i].index));
    }
    GF_ASSIGN_OR_RETURN(models[i],
                        CatalogModelForDriverName(devices[i].name, devices[i].memory_mib, catalog));
  }
  for (int i = 1; i < n; ++i) {
    if (models[i] != models[0]) {
      return Status::InvalidArgument("node " + name + " has GPUs of two models (" + models[0] +
                                     " as GPU 0, " + models[i] + " as GPU " + std::to_string(i) +
                                     "); gpufleet needs one model per node");
    }
  }
  if (n > 0) node.gpu_model = models[0];

  // Connected components of the peer graph, numbered by their lowest GPU.
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (int i = 0; i < n; ++i) {
    for (int j : devices[i].nvlink_peers) {
      if (j < 0 || j >= n) {
        return Status::InvalidArgument("node " + name + ": GPU " + std::to_string(i) +
                                       " has NVLink peer " + std::to_string(j) + " out of range");
      }
      int a = find(i), b = find(j);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  }
  std::map<int, int> domain_of_root;
  for (int i = 0; i < n; ++i) {
    int root = find(i);
    auto [it, inserted] = domain_of_root.emplace(root, static_cast<int>(domain_of_root.size()));
    node.nvlink_domain.push_back(it->second);
  }
  GF_RETURN_IF_ERROR(node.Validate());
  return node;
}

// ---------------------------------------------------------------------------------------------
// Fake GPUs.
namespace {

constexpr GpuSample kIdle{0, 0, 30, 50};

Result<const model::GpuModel*> FakeModel(const std::string& text, const std::string& spec,
                                         const model::GpuCatalog& catalog) {
  if (const model::GpuModel* m = catalog.Find(text)) return m;
  size_t dash = text.rfind('-');
  if (dash != std::string::npos) {
    if (auto gb = GigabytesToken(std::string_view(text).substr(dash + 1))) {
      if (const model::GpuModel* m = catalog.Find(text.substr(0, dash))) {
        if (std::llround(m->mem_mib / 1024.0) == *gb) return m;
        return Status::InvalidArgument("--fake-gpus '" + spec + "': " + m->name + " has " +
                                       std::to_string(std::llround(m->mem_mib / 1024.0)) +
                                       " GB, not " + std::to_string(*gb) + " GB");
      }
    }
  }
  return Status::InvalidArgument("--fake-gpus '" + spec + "': unknown GPU model '" + text + "' (" +
                                 CloseMatchesText(text, catalog) + ")");
}

}  // namespace

Result<std::vector<TelemetryStep>> ParseFakeTelemetry(const std::string& text,
                                                      const std::string& source,
                                                      const std::vector<int64_t>& memory_mib) {
  const int gpus = static_cast<int>(memory_mib.size());
  std::vector<TelemetryStep> steps;
  std::istringstream in(text);
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    auto error = [&](const std::string& msg) {
      return Status::InvalidArgument(source + ":" + std::to_string(line_no) + ": " + msg);
    };
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (Trim(line).empty()) continue;

    std::optional<GpuSample> all;
    std::map<int, GpuSample> one;
    for (const std::string& entry : Split(line, ';')) {
      std::istringstream words{std::string(Trim(entry))};
      std::vector<std::string> w;
      for (std::string word; words >> word;) w.push_back(word);
      if (w.empty()) return error("empty entry between ';'");
      std::optional<int> gpu;
      if (StartsWith(ToLower(w[0]), "gpu=")) {
        auto idx = ParseInt(std::string_view(w[0]).substr(4));
        if (!idx || *idx < 0 || *idx >= gpus) {
          return error("'" + w[0] + "' names no GPU (there are " + std::to_string(gpus) + ")");
        }
        gpu = static_cast<int>(*idx);
        w.erase(w.begin());
      }
      if (w.size() != 4) {
        return error("expected 'util_pct mem_used_mib temperature_c power_w'" +
                     std::string(gpu ? " after 'gpu=N'" : "") + ", got " +
                     std::to_string(w.size()) + " values in '" + std::string(Trim(entry)) + "'");
      }
      int64_t v[4];
      const char* names[4] = {"util_pct", "mem_used_mib", "temperature_c", "power_w"};
      for (int k = 0; k < 4; ++k) {
        auto parsed = ParseInt(w[k]);
        if (!parsed) return error(std::string(names[k]) + " must be an integer, got '" + w[k] + "'");
        v[k] = *parsed;
      }
      const int64_t mem_limit =
          gpu ? memory_mib[*gpu] : (gpus ? *std::min_element(memory_mib.begin(), memory_mib.end()) : 0);
      auto range = [&](int k, int64_t lo, int64_t hi) -> Status {
        if (v[k] < lo || v[k] > hi) {
          return error(std::string(names[k]) + " must be " + std::to_string(lo) + ".." +
                       std::to_string(hi) + ", got " + std::to_string(v[k]));
        }
        return Status::Ok();
      };
      GF_RETURN_IF_ERROR(range(0, 0, 100));
      GF_RETURN_IF_ERROR(range(1, 0, mem_limit));
      GF_RETURN_IF_ERROR(range(2, -40, 150));
      GF_RETURN_IF_ERROR(range(3, 0, 5000));
      GpuSample s{static_cast<int>(v[0]), v[1], static_cast<int>(v[2]), static_cast<int>(v[3])};
      if (gpu) {
        if (!one.emplace(*gpu, s).second) return error("gpu=" + std::to_string(*gpu) + " given twice");
      } else {
        if (all) return error("two entries for every GPU on one line");
        all = s;
      }
    }
    TelemetryStep step(gpus, all.value_or(kIdle));
    for (const auto& [i, s] : one) step[i] = s;
    steps.push_back(std::move(step));
  }
  return steps;
}

Result<std::unique_ptr<FakeGpuProbe>> FakeGpuProbe::Create(const FakeGpuOptions& options,
                                                           const model::GpuCatalog& catalog) {
  const std::string& spec = options.spec;
  size_t x = spec.find_first_of("xX");
  if (x == std::string::npos || x == 0 || x + 1 == spec.size()) {
    return Status::InvalidArgument("--fake-gpus '" + spec +
                                   "': expected COUNTxMODEL, for example 8xH100");
  }
  auto count = ParseInt(std::string_view(spec).substr(0, x));
  if (!count || *count < 1 || *count > 64) {
    return Status::InvalidArgument("--fake-gpus '" + spec + "': COUNT must be 1..64, got '" +
                                   spec.substr(0, x) + "'");
  }
  GF_ASSIGN_OR_RETURN(const model::GpuModel* m, FakeModel(spec.substr(x + 1), spec, catalog));

  const bool nvlink = StartsWith(ToLower(m->interconnect), "nvlink");
  std::vector<GpuDevice> devices(*count);
  std::vector<int64_t> memory(*count);
  for (int i = 0; i < *count; ++i) {
    GpuDevice& d = devices[i];
    d.index = i;
    d.uuid = "GPU-fake-" + options.node + "-" + std::to_string(i);
    d.name = m->name;
    d.memory_mib = m->mem_mib;
    d.compute_capability = m->compute_capability;
    memory[i] = m->mem_mib;
    if (nvlink) {
      for (int j = 0; j < *count; ++j) {
        if (j != i) d.nvlink_peers.push_back(j);
      }
    }
  }

  std::vector<TelemetryStep> steps;
  if (!options.telemetry_path.empty()) {
    std::ifstream in(options.telemetry_path);
    if (!in) return Status::NotFound("cannot read --fake-telemetry " + options.telemetry_path);
    std::stringstream text;
    text << in.rdbuf();
    GF_ASSIGN_OR_RETURN(steps, ParseFakeTelemetry(text.str(), options.telemetry_path, memory));
  }
  DriverInfo driver{"550.54.15", "12.4"};
  if (!options.driver.empty()) {
    auto parts = Split(options.driver, '/');
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      return Status::InvalidArgument("--fake-driver '" + options.driver +
                                     "': expected DRIVER/CUDA, for example 525.60.13/12.0");
    }
    driver = {parts[0], parts[1]};
  }
  GF_ASSIGN_OR_RETURN(FakeFaults faults, ParseFakeFaults(options.faults, *count, nvlink));
  auto probe = std::unique_ptr<FakeGpuProbe>(new FakeGpuProbe(std::move(devices), std::move(steps)));
  probe->driver_ = std::move(driver);
  probe->faults_ = std::move(faults);
  return probe;
}

Result<std::unique_ptr<GpuProbe>> OpenProbe(const FakeGpuOptions& options, const std::string& nvml_library,
                                            const model::GpuCatalog& catalog) {
  if (!options.spec.empty()) {
    GF_ASSIGN_OR_RETURN(auto p, FakeGpuProbe::Create(options, catalog));
    return std::unique_ptr<GpuProbe>(std::move(p));
  }
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"--fake-faults", &options.faults},
                                    {"--fake-telemetry", &options.telemetry_path},
                                    {"--fake-driver", &options.driver}}) {
    if (!value->empty()) return Status::InvalidArgument(std::string(flag) + " needs --fake-gpus (it is for fake GPUs)");
  }
  GF_ASSIGN_OR_RETURN(auto p, NvmlProbe::Open(nvml_library.empty() ? NvmlProbe::kDefaultLibrary : nvml_library));
  return std::unique_ptr<GpuProbe>(std::move(p));
}

Result<FakeFaults> ParseFakeFaults(const std::string& text, int gpus, bool nvlink) {
  FakeFaults f;
  for (int i = 0; i < gpus; ++i) {
    model::GpuHealth h;
    h.index = i;
    h.ecc_uncorrected = 0;
    h.retired_pages = 0;
    h.pcie_gen = h.pcie_max_gen = 4;
    h.pcie_width = h.pcie_max_width = 16;
    if (nvlink) h.nvlink_active = h.nvlink_total = 18;
    f.health.push_back(h);
  }
  for (const std::string& raw : Split(text, ';')) {
    std::string entry(Trim(raw));
    if (entry.empty()) continue;
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument("--fake-faults '" + entry + "': " + why);
    };
    int gpu = -1;
    std::vector<std::pair<std::string, std::string>> kv;
    for (const std::string& word : Split(entry, ' ')) {
      if (word.empty()) continue;
      size_t eq = word.find('=');
      if (eq == std::string::npos || eq == 0) return bad("expected KEY=VALUE, got '" + word + "'");
      kv.emplace_back(word.substr(0, eq), word.substr(eq + 1));
    }
    for (const auto& [k, v] : kv) {
      if (k == "slow") {
        char* end = nullptr;
        double x = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !(x >= 1)) return bad("slow must be a number >= 1, got '" + v + "'");
        f.slowdown = x;
      } else if (k == "gpu") {
        auto n = ParseInt(v);
        if (!n) return bad("gpu must be a GPU index, got '" + v + "'");
        if (*n < 0 || *n >= gpus) {
          return bad("GPU " + v + " does not exist (the node has " + std::to_string(gpus) + ")");
        }
        gpu = static_cast<int>(*n);
      }
    }
    static const std::set<std::string> kPerGpu = {"throttle", "ecc",  "retire_pending", "pcie_width",
                                                  "pcie_gen", "xid", "nvlink_down",    "temp"};
    for (const auto& [k, v] : kv) {
      if (k == "slow" || k == "gpu") continue;
      if (!kPerGpu.count(k)) {
        return bad("unknown key '" + k + "' (known: gpu, ecc, retire_pending, pcie_width, pcie_gen, xid, nvlink_down, "
                   "throttle, temp, slow)");
      }
      if (gpu < 0) return bad("'" + k + "' needs gpu=I first");
      model::GpuHealth& h = f.health[gpu];
      if (k == "throttle") {
        h.throttle_reasons.push_back(v);
        continue;
      }
      auto n = ParseInt(v);
      if (!n || *n < 0) return bad(k + " must be a whole number >= 0, got '" + v + "'");
      const int x = static_cast<int>(*n);
      if (k == "ecc") {
        h.ecc_uncorrected = *n;
      } else if (k == "retire_pending") {
        h.retirement_pending = x != 0;
      } else if (k == "pcie_width") {
        h.pcie_width = x;
      } else if (k == "pcie_gen") {
        h.pcie_gen = x;
      } else if (k == "xid") {
        f.xids.emplace_back(gpu, x);
      } else if (k == "nvlink_down") {
        if (h.nvlink_total < 0) return bad("GPU " + std::to_string(gpu) + " has no NVLink");
        h.nvlink_active = std::max(0, h.nvlink_total - x);
      } else if (k == "temp") {
        h.max_temperature_c = x;
      }
    }
  }
  return f;
}

Result<std::vector<GpuSample>> FakeGpuProbe::Sample() {
  if (steps_.empty()) return std::vector<GpuSample>(devices_.size(), kIdle);
  const TelemetryStep& step = steps_[std::min(next_, steps_.size() - 1)];
  if (next_ < steps_.size()) ++next_;
  return step;
}

// --- Host CPUs and memory ------------------------------------------------------------------

std::optional<int64_t> MemTotalMib(std::string_view meminfo) {
  for (const std::string& line : Split(meminfo, '\n')) {
    if (!StartsWith(line, "MemTotal:")) continue;
    std::string_view rest = Trim(std::string_view(line).substr(9));
    size_t space = rest.find(' ');
    auto kib = ParseInt(rest.substr(0, space));
    if (!kib || *kib <= 0) return std::nullopt;
    return *kib / 1024;
  }
  return std::nullopt;
}

std::optional<int64_t> CgroupCpuMaxMilli(std::string_view cpu_max) {
  std::vector<std::string> f = Split(Trim(cpu_max), ' ');
  if (f.size() != 2 || f[0] == "max") return std::nullopt;
  auto quota = ParseInt(f[0]);
  auto period = ParseInt(f[1]);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return std::max<int64_t>(1, *quota * 1000 / *period);
}

std::optional<int64_t> CgroupMemoryMaxMib(std::string_view memory_max) {
  auto bytes = ParseInt(Trim(memory_max));
  if (!bytes || *bytes <= 0) return std::nullopt;
  return *bytes / (1024 * 1024);
}

namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

HostResources ProbeHostResources() {
  HostResources h;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) h.cpu_milli = int64_t{CPU_COUNT(&set)} * 1000;
  if (auto m = MemTotalMib(ReadSmallFile("/proc/meminfo"))) h.mem_mib = *m;
  // A cgroup v2 limit on this process's own group ("0::/path" in /proc/self/cgroup): a container
  // or a systemd slice offers less than the machine.
  for (const std::string& line : Split(ReadSmallFile("/proc/self/cgroup"), '\n')) {
    if (!StartsWith(line, "0::")) continue;
    std::string dir = "/sys/fs/cgroup" + std::string(Trim(std::string_view(line).substr(3)));
    if (auto c = CgroupCpuMaxMilli(ReadSmallFile(dir + "/cpu.max")); c && (h.cpu_milli == 0 || *c < h.cpu_milli)) {
      h.cpu_milli = *c;
    }
    if (auto m = CgroupMemoryMaxMib(ReadSmallFile(dir + "/memory.max")); m && (h.mem_mib == 0 || *m < h.mem_mib)) {
      h.mem_mib = *m;
    }
  }
  return h;
}

}  // namespace gpufleet::agent
