#!/usr/bin/env bash
# Regenerate the CRDs from the API models (src/components/api) into config/crd/ and the Helm
# chart's crds/, copy config/rbac's rules and admission policies into the chart, and derive
# the chart's value checks (hack/chart_values.py).
# Usage: hack/generate-crds.sh          write them
#        hack/generate-crds.sh --check  exit 1 if any committed copy is out of date
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
chart=deployments/gpu-operator
status=0
for dir in config/crd "${chart}/crds"; do
  PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m components.cli crds --output-dir "${dir}" "$@" || status=1
done
for role in cluster_role role metrics_reader_role admission_policies; do
  if [[ "${1:-}" == --check ]]; then
    cmp -s "config/rbac/${role}.yaml" "${chart}/files/rbac/${role}.yaml" ||
      { echo "${chart}/files/rbac/${role}.yaml differs from config/rbac/${role}.yaml"; status=1; }
  else
    mkdir -p "${chart}/files/rbac"
    cp "config/rbac/${role}.yaml" "${chart}/files/rbac/${role}.yaml"
  fi
done
"$PYTHON" hack/chart_values.py "$@" || status=1
exit "${status}"
