# An Ascend-SHAPED Triton for tests and demonstrations without Ascend hardware: the CPU Triton
# image plus the project's CANN stand-ins (tests/fakes: pyACL, npu-smi and a GE-backend
# stand-in, none of them Huawei's) installed where a real Ascend Triton image has CANN:
# /usr/local/Ascend/ascend-toolkit, and the npu_ge backend in Triton's backend directory.
# It serves nothing on an NPU. `make compose-images` builds it with a context holding the
# stand-ins (docs/deploy.md#the-ascend-shape).
ARG TRITON_CPU_IMAGE=triton-model-hub/triton-cpu:latest
FROM ${TRITON_CPU_IMAGE}

USER root
COPY standins/ /opt/hub-standins/
RUN set -eu; \
    cd /opt/hub-standins; \
    python -m tests.fakes.toolkit /usr/local/Ascend --copy --python /opt/venv/bin/python >/dev/null; \
    mkdir -p /opt/tritonserver/backends/npu_ge; \
    cp /opt/hub-standins/tests/fakes/npu_ge/model.py /opt/tritonserver/backends/npu_ge/model.py
USER hub
