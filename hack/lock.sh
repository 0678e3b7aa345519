#!/usr/bin/env bash
# Write the hash-pinned lock files the image installs from (pip --require-hashes), with uv:
#   requirements.lock        the operator's runtime dependencies ([project.dependencies] of
#                            pyproject.toml; no extras, so no envtest, no dev tools)
#   requirements-build.lock  the build backend (hatchling) that turns src/ into a wheel
# Both resolve for CPython 3.11 on Linux (the base image), any CPU, and list the hashes of every
# published file of each pinned version, so the build works on amd64 and arm64 alike.
#
#   bash hack/lock.sh            refresh: keep the pinned versions, add/remove what pyproject.toml
#                                changed (pass --upgrade to move every pin to its newest release)
#   bash hack/lock.sh --check    fail when a lock file no longer matches pyproject.toml
#
# Needs uv (pip install uv; it is not a project dependency) and access to PyPI.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

check=false
extra=()
for arg in "$@"; do
  case "${arg}" in
    --check) check=true ;;
    --upgrade) extra+=(--upgrade) ;;
    *) echo "lock: unknown argument ${arg} (use --check or --upgrade)" >&2; exit 2 ;;
  esac
done

command -v uv >/dev/null 2>&1 ||
  { echo "lock: uv is not installed; run \`pip install uv\` and run this script again." >&2; exit 1; }

# The build backend's requirement, as pyproject.toml's [build-system] writes it.
build_requirement="$(python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')"

compile() { # OUTPUT INPUT...
  local output="$1"
  shift
  uv pip compile --quiet --generate-hashes --universal --python-version 3.11 \
    --custom-compile-command "bash hack/lock.sh" "${extra[@]}" --output-file "${output}" "$@"
}

if ! ${check}; then
  compile requirements.lock pyproject.toml
  compile requirements-build.lock - <<< "${build_requirement}"
  echo "lock: wrote requirements.lock and requirements-build.lock"
  exit 0
fi

# uv keeps the versions of an existing output file, so a copy of each lock recompiled from
# today's pyproject.toml differs from the committed one only where pyproject.toml changed.
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
cp requirements.lock requirements-build.lock "${tmp}/"
compile "${tmp}/requirements.lock" pyproject.toml
compile "${tmp}/requirements-build.lock" - <<< "${build_requirement}"
stale=()
for lock in requirements.lock requirements-build.lock; do
  cmp -s "${lock}" "${tmp}/${lock}" || stale+=("${lock}")
done
if ((${#stale[@]})); then
  echo "lock: ${stale[*]} out of date with pyproject.toml; run \`bash hack/lock.sh\` and commit the result." >&2
  exit 1
fi
echo "lock: requirements.lock and requirements-build.lock match pyproject.toml"
