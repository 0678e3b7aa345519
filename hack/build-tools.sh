#!/usr/bin/env bash
# Build the tools that check the install paths, from their official Go modules: helm
# (helm.sh/helm/v4, lints/renders/installs the chart), kustomize (sigs.k8s.io/kustomize, renders
# config/default) and promtool (github.com/prometheus/prometheus, checks the alert rules).
#
# The wrapper modules under hack/go/ pin every version (go.mod + go.sum are committed).
# Binaries land in ${GPU_OPERATOR_CACHE:-~/.cache/gpu-operator}/bin/<tool>-<version>/;
# a warm cache makes this script finish in about a second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/tool-versions.env
source "${here}/tool-versions.env"
versions_file="hack/tool-versions.env"
# shellcheck source=hack/lib/go-build.sh
source "${here}/lib/go-build.sh"

started=$SECONDS

build helm "${HELM_VERSION}" "${here}/go/helm" \
  "-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  helm.sh/helm/v4/cmd/helm

build kustomize "${KUSTOMIZE_VERSION}" "${here}/go/kustomize" \
  "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=${KUSTOMIZE_VERSION}" \
  sigs.k8s.io/kustomize/kustomize/v5

# promtool only reads rule files: leave out every service-discovery plugin (cloud SDKs), which
# would triple the build.
# The Go module v0.316.0 is Prometheus 3.16.0.
release="${PROMETHEUS_VERSION#v0.}"
prometheus_release="${release:0:1}.${release:1}"
BUILD_FLAGS="-tags=remove_all_sd" build promtool "${PROMETHEUS_VERSION}" "${here}/go/promtool" \
  "-s -w -X github.com/prometheus/common/version.Version=${prometheus_release}" \
  github.com/prometheus/prometheus/cmd/promtool

echo "tools ready in ${bin} ($((SECONDS - started))s)"
