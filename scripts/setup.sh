#!/usr/bin/env bash
# Installs what gpufleet needs to build and test, on Debian 12 (bookworm).
#
# Idempotent: when every package is already installed it touches nothing and needs no network,
# so CI and developers can run it before every build. Runs as root (CI containers); otherwise
# through sudo. Never reads stdin.
set -euo pipefail

PACKAGES=(
  # Toolchain.
  build-essential cmake ninja-build ccache pkg-config git python3
  # clang++ for the thread-safety analysis of the annotated locks (scripts/check_thread_safety.py)
  # and the ThreadSanitizer runs.
  clang
  # Tests and benchmarks.
  libgtest-dev libgmock-dev libbenchmark-dev
  # Libraries: YAML cluster specs, JSON, the CLI, formatting and logging.
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  # The state store (SQLite, PostgreSQL's libpq), the HTTP API, TLS, and the capacity planner's
  # LP/MILP solver.
  libsqlite3-dev libpq-dev libcpp-httplib-dev libssl-dev coinor-libcbc-dev coinor-libclp-dev
  # The memory allocator the gpufleet binary links (tcmalloc_minimal; GPUFLEET_TCMALLOC).
  libgoogle-perftools-dev
  # The PostgreSQL store's tests and benchmark start a throwaway server (initdb, pg_ctl).
  postgresql
  # End-to-end tests: a real 2-node PyTorch DDP job (gloo backend, for /usr/bin/python3), curl for
  # the API examples, sqlite3 to inspect the store.
  python3-torch curl sqlite3 procps
  # Observability tests: promtool, a real Prometheus and Alertmanager.
  prometheus prometheus-alertmanager
  # The web dashboard's browser test (tests/web_ui_test.sh): headless Chromium.
  chromium
)
# ... driven from node by npm's packages (tests/web). A node installed another way brings its own
# npm (NodeSource's nodejs does), which Debian's npm would conflict with: only add it when absent.
if ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi
echo "setup: installing ${missing[*]}"

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: apt-get not found; install these packages (Debian 12 names) another way: ${missing[*]}" >&2
  exit 1
fi
as_root=()
if [[ "$(id -u)" -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup: not root and no sudo; as root run: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  # Ask for a password only when someone is there to type it.
  if [[ -t 0 ]]; then as_root=(sudo); else as_root=(sudo -n); fi
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" </dev/null
echo "setup: done"
