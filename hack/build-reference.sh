#!/usr/bin/env bash
# Build NVIDIA's GPU Operator, the system ours is measured against, from its Go module
# (github.com/NVIDIA/gpu-operator, pinned by the wrapper module hack/go/reference), to run
# beside ours: the scale benchmark's side-by-side run (`bench/scale.py --reference`) and the
# fidelity tests (tests/e2e/fidelity/, which run it when they start). The product and the
# install never use it, so hack/install.sh does not run this script.
#
# Beside the binary it keeps the module's `assets/` and `manifests/`: the reference reads
# its operands' manifests from /opt/gpu-operator, a path compiled in, and gpusim shows it
# this folder there (a private mount namespace, see src/gpusim/_nvidia_operator.py).
#
# Prints the folder (binary `gpu-operator`, manifests under `opt-gpu-operator/`) as its last
# line. A warm cache makes it finish in about a second; a cold build takes about 2 minutes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
versions_file="hack/go/reference/go.mod"
# shellcheck source=hack/lib/go-build.sh
source "${here}/lib/go-build.sh"

module="${here}/go/reference"
version="$(cd "${module}" && go list -m -f '{{.Version}}' github.com/NVIDIA/gpu-operator)"
build nvidia-gpu-operator "${version}" "${module}" "-s -w" \
  github.com/NVIDIA/gpu-operator/cmd/gpu-operator >&2

out="${bin}/nvidia-gpu-operator-${version}"
if [[ ! -f "${out}/opt-gpu-operator/.complete" ]]; then
  source_dir="$(cd "${module}" && go list -m -f '{{.Dir}}' github.com/NVIDIA/gpu-operator)"
  [[ -d "${source_dir}/assets" ]] ||
    fail "the module github.com/NVIDIA/gpu-operator@${version} has no assets/ folder in ${source_dir}"
  rm -rf "${out}/opt-gpu-operator"
  mkdir -p "${out}/opt-gpu-operator"
  cp -r "${source_dir}/assets/." "${out}/opt-gpu-operator/"
  cp -r "${source_dir}/manifests" "${out}/opt-gpu-operator/manifests"
  chmod -R u+w "${out}/opt-gpu-operator"
  touch "${out}/opt-gpu-operator/.complete"
fi
echo "${out}"
