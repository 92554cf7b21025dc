// `gpufleet node check`: the acceptance burn-in of this node. It reads the GPUs' health through
// the probe, runs the measurement suite (scripts/burnin.py, on PyTorch: CUDA/NCCL where there are
// GPUs, the CPU/gloo path otherwise) with a time limit, samples the GPUs while it runs (hottest,
// highest power, clocks, throttle reasons, XIDs), and returns the report. Judging is
// node::Judge's: the CLI judges against the datasheet alone, the controller also against the
// fleet. docs/nodes.md describes the suite and the thresholds.
#pragma once

#include <string>
#include <vector>

#include "agent/gpu_probe.h"
#include "common/status.h"
#include "common/time.h"
#include "model/burn_in.h"

namespace gpufleet::agent {

struct NodeCheckOptions {
  std::string python = "python3";  // an interpreter that has torch
  std::string suite;               // burnin.py; empty: DefaultBurnInSuite()
  Duration time_limit = Duration::Seconds(170);
  bool quick = false;              // smallest sizes (tests and smoke runs)
  std::string device = "auto";     // auto, cuda or cpu
  Duration sample_every = Duration::Seconds(1);
};

// $GPUFLEET_BURNIN_SUITE, else ./scripts/burnin.py, else the source tree's scripts/burnin.py.
std::string DefaultBurnInSuite();

// Runs the check. Fails only when the suite cannot run at all (no interpreter, no torch: the
// message says how to install it) or prints no report; a node that measures badly still gets a
// report, for the judge.
Result<model::BurnInReport> RunNodeCheck(GpuProbe& probe, const NodeCheckOptions& options);

}  // namespace gpufleet::agent
