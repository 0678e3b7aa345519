# The operator image (also used for the node-side agents). Two stages: the build stage installs
# the locked dependencies and the operator's wheel into a virtualenv; the final image gets only
# that virtualenv on the same base, and runs as a non-root user.
#
# Base: python:3.11.15-slim-bookworm, pinned by the digest of its multi-platform index
# (linux/amd64 and linux/arm64), so a rebuild gets the same bytes as the last one. To move to a
# newer base: `docker buildx imagetools inspect python:3.11-slim-bookworm` (or
# `skopeo inspect --raw docker://python:3.11-slim-bookworm | sha256sum`), and replace the tag
# and digest in PYTHON_IMAGE; tests/unit/deploy/test_image.py checks that it stays pinned.
ARG PYTHON_IMAGE=python:3.11.15-slim-bookworm@sha256:b18992999dbe963a45a8a4da40ac2b1975be1a776d939d098c647482bcad5cba

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# Every file pip downloads must match a hash in the lock files (hack/lock.sh writes them from
# pyproject.toml); --no-deps: nothing outside them is ever resolved.
COPY requirements.lock requirements-build.lock /locks/
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --require-hashes --no-deps --only-binary=:all: -r /locks/requirements.lock \
 && python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes --no-deps -r /locks/requirements-build.lock
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# The wheel is built with the locked backend (no build isolation: nothing unpinned is fetched).
# The simulator (gpusim) and the test control plane (reconciler.envtest) are for development
# only: removed from the virtualenv before it is copied into the final image, and the imports
# below prove the operator runs without them. (cryptography stays: secure metrics make their
# self-signed certificate with it.)
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && /opt/venv/bin/pip install --no-deps /wheels/*.whl \
 && site="$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
 && rm -rf "${site}/gpusim" "${site}/reconciler/envtest" \
 && /opt/venv/bin/python -c 'import components.run, components.cli, components.hooks' \
 && ! /opt/venv/bin/python -c 'import gpusim' 2>/dev/null \
 && /opt/venv/bin/python -c 'import reconciler._tls' \
 && /opt/venv/bin/pip uninstall --yes pip \
 && find /opt/venv -name '__pycache__' -prune -exec rm -rf {} +

FROM ${PYTHON_IMAGE}
# The version pyproject.toml declares (hack/image.sh passes it); the build fails when it is
# missing or differs from the installed operator's, so the label never lies.
ARG VERSION
LABEL org.opencontainers.image.title="gpu-operator" \
      org.opencontainers.image.description="Installs and keeps healthy the NVIDIA GPU stack on every GPU node" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/venv /opt/venv
COPY config /opt/gpu-operator/config
RUN installed="$(/opt/venv/bin/python -c 'from importlib.metadata import version; print(version("gpu-operator"))')" \
 && { [ "${VERSION}" = "${installed}" ] || { echo "build with --build-arg VERSION=${installed} (the version in pyproject.toml; hack/image.sh does), not '${VERSION}'" >&2; exit 1; }; } \
 && useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin operator \
 && rm -rf /usr/local/lib/python3.11/ensurepip /usr/local/lib/python3.11/site-packages/pip \
          /usr/local/bin/pip* /root/.cache
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["gpu-operator"]
CMD ["run"]
