#!/usr/bin/env bash
# Build the operator image with Docker or Podman, whichever is installed (Docker first), labelled
# with the version in pyproject.toml.
#
#   bash hack/image.sh                      tags gpu-operator:<version>
#   bash hack/image.sh registry.example/gpu-operator:1.2.3 [extra build args...]
#   CONTAINER_ENGINE=podman bash hack/image.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

version="$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')" ||
  { echo "image: could not read the version from pyproject.toml (needs Python 3.11 or newer as python3)." >&2; exit 1; }
tag="${1:-gpu-operator:${version}}"
shift $(($# > 0 ? 1 : 0))

engine="${CONTAINER_ENGINE:-}"
if [[ -z "${engine}" ]]; then
  for candidate in docker podman; do
    if command -v "${candidate}" >/dev/null 2>&1; then
      engine="${candidate}"
      break
    fi
  done
fi
if [[ -z "${engine}" ]]; then
  echo "image: neither docker nor podman is installed; install one" \
    "(https://docs.docker.com/engine/install/ or https://podman.io/docs/installation)" \
    "and run this script again." >&2
  exit 1
fi
command -v "${engine}" >/dev/null 2>&1 ||
  { echo "image: CONTAINER_ENGINE=${engine} is not installed." >&2; exit 1; }

echo "image: building ${tag} (version ${version}) with ${engine}"
"${engine}" build --build-arg "VERSION=${version}" --tag "${tag}" "$@" .
echo "image: built ${tag}"
