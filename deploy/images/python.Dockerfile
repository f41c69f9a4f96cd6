# A stand-in for python:3.11-slim-bookworm, made from Debian's own packages on the debootstrap
# base (make compose-images, docs/deploy.md#without-a-registry). Debian bookworm's Python is
# 3.11 as well, built as a shared library with python3-config (what ATC's own Python needs).
# It is linked where the upstream image keeps its interpreter, /usr/local/bin, so the hub's
# Dockerfile builds on either base unchanged.
ARG BASE_IMAGE=triton-model-hub/debian:bookworm
FROM ${BASE_IMAGE}

ENV LANG=C.UTF-8
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        python3 python3-venv python3-dev libpython3.11 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && ln -sf /usr/bin/python3.11 /usr/local/bin/python3.11 \
    && ln -sf /usr/bin/python3.11 /usr/local/bin/python3 \
    && ln -sf /usr/bin/python3.11 /usr/local/bin/python \
    && ln -sf /usr/bin/python3.11-config /usr/local/bin/python3-config

CMD ["python3"]
