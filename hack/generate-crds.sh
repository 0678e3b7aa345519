#!/usr/bin/env bash
# Regenerate config/crd/ from the API models (src/components/api).
# Usage: hack/generate-crds.sh          write the CRDs
#        hack/generate-crds.sh --check  exit 1 if the committed CRDs are out of date
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m components.cli crds --output-dir config/crd "$@"
