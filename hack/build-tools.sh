#!/usr/bin/env bash
# Build the tools that check the install paths, from their official Go modules: helm
# (helm.sh/helm/v4, lints/renders/installs the chart), helm3 (helm.sh/helm/v3: the chart must
# lint and render with Helm 3 too, which many clusters are still managed with), kustomize
# (sigs.k8s.io/kustomize, renders config/default) and promtool (github.com/prometheus/prometheus,
# checks the alert rules).
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

# Named helm3 so both can sit on one PATH. As Helm's own release build does, the Kubernetes
# version `helm3 template` and `lint` assume is that of the client-go it is built with
# (client-go v0.N is Kubernetes 1.N); left out, Helm 3 assumes 1.20 and refuses the chart's
# kubeVersion.
k8s_minor="$(cd "${here}/go/helm3" && go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)"
helm3_k8s=""
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  helm3_k8s+=" -X ${pkg}.k8sVersionMajor=1 -X ${pkg}.k8sVersionMinor=${k8s_minor}"
done
OUTPUT_NAME=helm3 build helm3 "${HELM3_VERSION}" "${here}/go/helm3" \
  "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM3_VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean${helm3_k8s}" \
  helm.sh/helm/v3/cmd/helm

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
