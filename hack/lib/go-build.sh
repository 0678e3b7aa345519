# Shared by the hack/build-*.sh scripts (sourced, not run): build a pinned Go wrapper module
# under hack/go/ into ${GPU_OPERATOR_CACHE:-~/.cache/gpu-operator}/bin/<name>-<version>/,
# and skip the build when the cached copy was made from the same go.mod + go.sum (.stamp).
#
# The sourcing script sets `versions_file` (named in the failure message) before calling build.

cache="${GPU_OPERATOR_CACHE:-${HOME}/.cache/gpu-operator}"
bin="${cache}/bin"
script_name="$(basename "$0" .sh)"

fail() { echo "${script_name}: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 ||
  fail "Go is not installed; install Go 1.26 or newer (https://go.dev/dl/) and run this script again."

export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}"
mkdir -p "${bin}"

# Progress: go build -v names each package as it compiles; print a count now and then.
progress() {
  awk -v what="$1" '{ n++; if (n % 250 == 0) { printf "  %s: %d packages compiled\n", what, n; fflush() } }
    END { if (n) printf "  %s: %d packages compiled\n", what, n }'
}

# build NAME VERSION MODULE_DIR LDFLAGS PACKAGE...
# Extra `go build` flags (build tags) can be passed in BUILD_FLAGS; they are part of the stamp.
# OUTPUT_NAME names the binary of a single PACKAGE (helm 3 is built as helm3, beside helm 4).
build() {
  local name="$1" version="$2" module="$3" ldflags="$4"
  shift 4
  local out="${bin}/${name}-${version}"
  local flags="${BUILD_FLAGS:-}"
  local output="${OUTPUT_NAME:-}"
  local stamp
  stamp="$( (cat "${module}/go.sum" "${module}/go.mod"; [[ -z "${flags}" ]] || echo "${flags}"; [[ -z "${output}" ]] || echo "${output}") | sha256sum | cut -c1-16)"
  if [[ -f "${out}/.stamp" && "$(cat "${out}/.stamp")" == "${stamp}" ]]; then
    echo "${name} ${version}: cached in ${out}"
    return
  fi
  echo "${name} ${version}: downloading modules"
  (cd "${module}" && go mod download) ||
    fail "could not download the Go modules for ${name} ${version}; check that the Go module proxy ($(go env GOPROXY)) is reachable, then run this script again."
  echo "${name} ${version}: building $* (a cold build takes several minutes on 2 cores)"
  local tmp
  tmp="$(mktemp -d "${bin}/.build-${name}.XXXXXX")"
  trap 'rm -rf "${tmp}"' RETURN
  local log="${tmp}/build.log"
  # shellcheck disable=SC2086 # flags is a list of words
  if ! (cd "${module}" && go build -v -trimpath ${flags} -ldflags "${ldflags}" -o "${tmp}/${output}" "$@" 2> >(tee "${log}" | progress "${name}" >&2)); then
    tail -n 30 "${log}" >&2
    fail "building ${name} ${version} failed (log above); fix the error or step back one release in ${versions_file:-hack/versions.env}."
  fi
  rm -f "${log}"
  echo "${stamp}" > "${tmp}/.stamp"
  chmod 755 "${tmp}"
  rm -rf "${out}"
  mv "${tmp}" "${out}"
  echo "${name} ${version}: built into ${out}"
}
