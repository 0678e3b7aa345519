#!/usr/bin/env bash
# Install everything the project needs on a fresh machine: a virtual environment with the
# package and its dev tools, the Go-built control-plane binaries and the install-check tools
# (helm, kustomize, promtool), all cached.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="${PYTHON:-python3}"
command -v "${python}" >/dev/null 2>&1 ||
  { echo "install: ${python} not found; install Python 3.11 or newer." >&2; exit 1; }
"${python}" - <<'PY' || { echo "install: Python 3.11 or newer is needed." >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

if [[ ! -x .venv/bin/python ]]; then
  echo "install: creating .venv"
  "${python}" -m venv .venv
fi
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [[ ! -f "${stamp}" ]]; then
  echo "install: installing the package and its dev tools into .venv"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[dev]'
  rm -f .venv/.installed-*
  touch "${stamp}"
fi

bash hack/build-binaries.sh
# helm, kustomize and promtool, for the chart, kustomize and alert-rule checks (cached).
bash hack/build-tools.sh
