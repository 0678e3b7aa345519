#!/usr/bin/env bash
# Read this machine's NVIDIA GPUs through the node agent's real NVML backend, read-only, and
# print one JSON object: inventory, MIG mode and devices, compute processes, ECC and retired
# pages, XIDs seen in a short listen, PCIe link, temperature, power, and the GPUDriverReady /
# GPUHealthy conditions the agent would write. It changes nothing on the GPU.
#
#   bash hack/nvml-check.sh [--xid-wait SECONDS] [--host-root DIR]
#
# Exit 0 with the JSON on stdout; 77 with a one-line reason on stderr on a machine without an
# NVIDIA GPU or driver (CI's skip). Uses .venv/bin/python when there is one, else python3.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=python3
[[ -x .venv/bin/python ]] && python=.venv/bin/python
if ! "${python}" -c 'import pynvml' 2>/dev/null; then
  echo "nvml-check: pynvml (nvidia-ml-py) is not installed for ${python}; run: ${python} -m pip install -e ." >&2
  exit 1
fi
PYTHONPATH="src${PYTHONPATH:+:${PYTHONPATH}}" exec "${python}" -m components.nodeagent.check "$@"
