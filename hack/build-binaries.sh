#!/usr/bin/env bash
# Build the control-plane binaries the tests and the simulated cluster run, from the official
# Go modules: kube-apiserver, kube-controller-manager and kube-scheduler (k8s.io/kubernetes),
# etcd (go.etcd.io/etcd/server/v3), kwok (sigs.k8s.io/kwok, plus its standard stages) and an
# in-memory OCI registry (github.com/google/go-containerregistry's pkg/registry, hack/go/registry).
#
# The wrapper modules under hack/go/ pin every version (go.mod + go.sum are committed).
# Binaries land in ${GPU_OPERATOR_CACHE:-~/.cache/gpu-operator}/bin/<component>-<version>/;
# a warm cache makes this script finish in about a second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/versions.env
source "${here}/versions.env"
versions_file="hack/versions.env"
# shellcheck source=hack/lib/go-build.sh
source "${here}/lib/go-build.sh"

started=$SECONDS

k8s_minor="${KUBERNETES_VERSION#v1.}"
k8s_minor="${k8s_minor%%.*}"
version_pkg="k8s.io/component-base/version"
build kubernetes "${KUBERNETES_VERSION}" "${here}/go/kubernetes" \
  "-s -w -X ${version_pkg}.gitVersion=${KUBERNETES_VERSION} -X ${version_pkg}.gitMajor=1 -X ${version_pkg}.gitMinor=${k8s_minor} -X ${version_pkg}.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler

build etcd "${ETCD_VERSION}" "${here}/go/etcd" "-s -w" go.etcd.io/etcd/server/v3
# etcd's main package is the module root, so go names the binary after the module ("server").
if [[ -f "${bin}/etcd-${ETCD_VERSION}/server" ]]; then
  mv "${bin}/etcd-${ETCD_VERSION}/server" "${bin}/etcd-${ETCD_VERSION}/etcd"
fi

build kwok "${KWOK_VERSION}" "${here}/go/kwok" \
  "-s -w" sigs.k8s.io/kwok/cmd/kwok
# kwok ships no built-in stages: copy the standard ones (node initialize, heartbeat with
# lease, pod ready/complete/delete) from the module source next to the binary.
stages="${bin}/kwok-${KWOK_VERSION}/stages"
if [[ ! -f "${stages}/pod-ready.yaml" ]]; then
  src="$(cd "${here}/go/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
  mkdir -p "${stages}"
  cp "${src}/node/fast/node-initialize.yaml" \
     "${src}/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
     "${src}/pod/fast/pod-ready.yaml" "${src}/pod/fast/pod-complete.yaml" \
     "${src}/pod/fast/pod-delete.yaml" "${stages}/"
  chmod 644 "${stages}"/*.yaml
fi

# The simulated cluster's image registry: the operator's pre-flight checks ask it whether a
# driver image exists (hack/go/registry/main.go).
build registry "${REGISTRY_VERSION}" "${here}/go/registry" "-s -w" .

echo "control-plane binaries ready in ${bin} ($((SECONDS - started))s)"
