#!/usr/bin/env bash
# The main job: install what is missing, then run `gpu-operator demo` (until Ctrl-C).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash hack/install.sh
exec .venv/bin/gpu-operator demo "$@"
