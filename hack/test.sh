#!/usr/bin/env bash
# The project's test command (README, CI): install, then lint, types, layering, unit,
# integration and e2e tests. Pass a layer to run one alone: `bash hack/test.sh unit|integration|e2e`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash hack/install.sh
export PATH="${PWD}/.venv/bin:${PATH}"

layers=("$@")
if [[ ${#layers[@]} -eq 0 ]]; then
  echo "== lint"
  ruff check src tests bench
  ruff format --check src tests bench
  echo "== types"
  mypy --strict src/
  echo "== layering"
  lint-imports
  layers=(unit integration e2e)
fi

for layer in "${layers[@]}"; do
  echo "== ${layer} tests"
  pytest -m "${layer}" "tests/${layer}"
done
