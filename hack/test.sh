#!/usr/bin/env bash
# The project's test command (README, CI): install, then lint, types, layering, unit,
# integration and e2e tests. Pass a layer to run one alone: `bash hack/test.sh unit|integration|e2e`.
# Stops at the first layer that fails; either way it ends with one line per layer (name,
# seconds, pass/fail/not run), so a slow layer shows before it becomes CI's bottleneck.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash hack/install.sh
export PATH="${PWD}/.venv/bin:${PATH}"

checks=()
if [[ $# -eq 0 ]]; then
  checks=(lint types layering unit integration e2e)
else
  checks=("$@")
fi

run_check() {
  case "$1" in
    lint)
      ruff check src tests bench && ruff format --check src tests bench ;;
    types)
      mypy --strict src/ ;;
    layering)
      lint-imports ;;
    *)
      pytest -m "$1" "tests/$1" ;;
  esac
}

summary=()
failed=""
for check in "${checks[@]}"; do
  if [[ -n "${failed}" ]]; then
    summary+=("$(printf '%-12s %8s  not run' "${check}" '-')")
    continue
  fi
  echo "== ${check}"
  began=${SECONDS}
  if run_check "${check}"; then
    result=pass
  else
    result=fail
    failed=${check}
  fi
  summary+=("$(printf '%-12s %7ss  %s' "${check}" "$((SECONDS - began))" "${result}")")
done

echo "== summary"
printf '%s\n' "${summary[@]}"
[[ -z "${failed}" ]]
