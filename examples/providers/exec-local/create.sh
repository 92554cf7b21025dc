#!/usr/bin/env bash
# The exec provider's create call, carried out on this machine (see exec_local.py).
set -euo pipefail
exec python3 "$(dirname "$0")/exec_local.py" create
