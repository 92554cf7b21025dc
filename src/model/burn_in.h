// An acceptance burn-in's result, as plain data: what the suite measured on a node (throughput
// figures from scripts/burnin.py), what NVML said about each GPU's health before and during the
// load, and the verdict node::Judge reached. The agent fills it, the API carries it, the
// controller stores it with the node and `gpufleet nodes NODE` prints it. docs/nodes.md explains
// every field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/time.h"

namespace gpufleet::model {

// One figure of the suite: "matmul_bf16" on GPU 0 at 612.3 TFLOPS, or a test it skipped.
struct BurnInMeasurement {
  std::string name;     // matmul_fp16, matmul_bf16, matmul_tf32, matmul_fp32, memory_bandwidth,
                        // h2d_bandwidth, d2h_bandwidth, allreduce_busbw
  int gpu = -1;         // the GPU it ran on; -1 for a test of the whole node (all-reduce)
  double value = 0;     // in `unit`
  std::string unit;     // "TFLOPS", "GB/s"
  std::string skipped;  // non-empty: not measured, and why ("no CUDA device", "time limit")
  std::string error;    // non-empty: the test failed to run ("RuntimeError: CUDA error: ...")
  // Filled by the judge:
  double reference = 0;   // what a healthy node of this GPU model reaches; 0: no reference
  std::string basis;      // where the reference comes from: "datasheet 989 x 0.60", "fleet median (3 nodes)"
  bool ok = true;         // value >= threshold x reference (true when there is no reference)
};

// One GPU's health, from NVML (or the fake GPUs' declared faults). -1: not known (the field is
// missing on this GPU or driver, or the node has no NVML).
struct GpuHealth {
  int index = 0;
  int64_t ecc_uncorrected = -1;   // volatile (since the driver loaded) uncorrected ECC errors
  int64_t retired_pages = -1;     // pages retired or rows remapped for errors
  bool retirement_pending = false;  // a retirement or remap waits for a reset: the GPU must not be trusted
  std::vector<int> xid_errors;    // critical XID errors seen during the check
  int pcie_gen = -1, pcie_width = -1;          // the link as trained under load
  int pcie_max_gen = -1, pcie_max_width = -1;  // what the card and slot support
  int nvlink_active = -1, nvlink_total = -1;   // links up / links the GPU has
  // During the load: hottest temperature, highest power, lowest and highest SM clock, and the
  // throttle reasons NVML reported (sw_power_cap, hw_slowdown, sw_thermal, hw_thermal,
  // hw_power_brake).
  int max_temperature_c = -1;
  int max_power_w = -1;
  int min_sm_clock_mhz = -1;
  int max_sm_clock_mhz = -1;
  std::vector<std::string> throttle_reasons;
};

struct BurnInReport {
  int64_t request = 0;      // the controller's request this answers (0: a check by hand)
  Time at;                  // when the check finished
  Duration took;            // how long it ran
  std::string gpu_model;    // canonical catalog name ("H100"); empty for a CPU-only node
  int gpus = 0;
  std::string path;         // "cuda" (the GPUs themselves) or "cpu" (no CUDA: the CPU/gloo path)
  std::string torch;        // the PyTorch version the suite ran with
  std::string backend;      // nccl or gloo, for the all-reduce
  bool timed_out = false;   // the suite hit its time limit and skipped the rest
  std::vector<BurnInMeasurement> tests;
  std::vector<GpuHealth> health;
  // Filled by the judge:
  bool passed = false;
  std::vector<std::string> problems;  // one sentence each; empty when passed
  // The node's matmul throughput over its reference (median over its GPUs, bf16 or else fp16);
  // 0 when there was no reference. Feeds the pool's speed model for this GPU model.
  double speed_ratio = 0;
  double threshold = 0;     // the share of the reference a test had to reach
};

}  // namespace gpufleet::model
