# The operator image (also used for the node-side agents). Two stages: wheels are built with
# the full toolchain, the final image has only the runtime and runs as a non-root user.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY pyproject.toml README.md ./
COPY src ./src
# The simulator (gpusim) and the test control plane (reconciler.envtest) are for development
# only: removed once installed, and the import of the operator proves it does not need them.
RUN pip install --no-cache-dir --upgrade pip \
 && pip install --no-cache-dir . \
 && site="$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
 && rm -rf "${site}/gpusim" "${site}/reconciler/envtest" \
 && python -c 'import components.run, components.cli' \
 && pip uninstall --yes pip \
 && find /opt/venv -name '__pycache__' -prune -exec rm -rf {} +

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="gpu-operator" \
      org.opencontainers.image.description="Installs and keeps healthy the NVIDIA GPU stack on every GPU node"
COPY --from=build /opt/venv /opt/venv
COPY config /opt/gpu-operator/config
RUN useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin operator \
 && rm -rf /usr/local/lib/python3.11/ensurepip /usr/local/lib/python3.11/site-packages/pip \
          /usr/local/bin/pip* /root/.cache
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["gpu-operator"]
CMD ["run"]
