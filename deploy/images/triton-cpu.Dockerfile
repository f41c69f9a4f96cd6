# Triton Inference Server for the CPU, from the nvidia-pytriton wheel that the hub image already
# carries (its tritonserver, Python backend and per-Python stubs), laid out as the official
# images are: /opt/tritonserver/bin/tritonserver and /opt/tritonserver/backends/python. Compose
# mounts the hub's Python-based backends (onnxruntime, acl) beside it and starts it through
# deploy/triton/entrypoint.sh. Upstream's images (nvcr.io/nvidia/tritonserver) need a registry
# and a GPU-sized download; this one is what `make compose-images` builds
# (docs/deploy.md#without-a-registry).
ARG HUB_IMAGE=triton-model-hub:latest
FROM ${HUB_IMAGE}

USER root
# wget for the compose healthcheck (curl or wget, as upstream's images have one of them).
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*
RUN set -eu; \
    wheel=$(python -c 'import importlib.util as u; print(u.find_spec("pytriton").submodule_search_locations[0])'); \
    libs="$(dirname "$wheel")/nvidia_pytriton.libs"; \
    mkdir -p /opt/tritonserver/bin /opt/tritonserver/backends/python /var/lib/triton; \
    ln -s "$wheel/tritonserver/bin/tritonserver" /opt/tritonserver/bin/tritonserver; \
    cp "$wheel/tritonserver/backends/python/libtriton_python.so" \
        "$wheel/tritonserver/backends/python/triton_python_backend_utils.py" \
        /opt/tritonserver/backends/python/; \
    py=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
    cp "$wheel/tritonserver/python_backend_stubs/$py/triton_python_backend_stub" \
        /opt/tritonserver/backends/python/; \
    ln -s "$libs" /opt/tritonserver/lib; \
    chown hub:hub /var/lib/triton
# The stub has no RPATH: it finds libpython and the wheel's libraries through these.
# TRITON_PYTHON_ENV tells deploy/triton/entrypoint.sh which Python the stub embeds.
ENV LD_LIBRARY_PATH=/opt/tritonserver/lib \
    TRITON_PYTHON_ENV=/opt/venv \
    TRITON_HOME_PATH=/opt/tritonserver
USER hub
WORKDIR /var/lib/triton
ENTRYPOINT ["/bin/bash", "/app/deploy/triton/entrypoint.sh"]
CMD ["/opt/tritonserver/bin/tritonserver", "--model-repository=/models/repository", \
     "--model-control-mode=explicit", "--backend-directory=/opt/tritonserver/backends"]
