#!/usr/bin/env bash
# Checks gpufleet's NVML path on a machine with an NVIDIA driver: builds only the
# gpufleet-nvml-probe target (no tests, no benchmarks) and runs it. It prints the GPUs NVML
# reports, the NodeSpec the agent would register (catalog model, NVLink domains) and one
# telemetry sample, as JSON.
#
# Usage: scripts/nvml_check.sh [BUILD_DIR] [-- PROBE_ARGS...]
#   BUILD_DIR   defaults to build-nvml
#   PROBE_ARGS  passed to the probe; one optional argument: the NVML library to load
#               (default libnvidia-ml.so.1)
#
# Exit status: 0 when NVML answered and every GPU maps to a catalog model; 1 otherwise (the
# reason is printed on stderr). Compare the output with `nvidia-smi -L` and `nvidia-smi topo -m`:
# the same GPUs and uuids, and GPUs joined by NV# in topo -m sharing an nvlink_domain.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build-nvml}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGPUFLEET_BUILD_TESTS=OFF -DGPUFLEET_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target gpufleet-nvml-probe -j "$(nproc 2>/dev/null || echo 2)"

probe="$build/src/agent/gpufleet-nvml-probe"
echo "== $probe $*" >&2
if command -v nvidia-smi >/dev/null; then
  echo "== nvidia-smi -L" >&2
  nvidia-smi -L >&2 || true
fi
exec "$probe" "$@"
