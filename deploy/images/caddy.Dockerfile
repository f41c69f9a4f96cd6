# Caddy from Debian's packages (2.6 in bookworm; upstream's compose default is the official
# caddy:2.11 image), for hosts without a registry (make compose-images). Same paths as the
# official image: its state in /data and /config, and wget for the compose healthcheck.
ARG BASE_IMAGE=triton-model-hub/debian:bookworm
FROM ${BASE_IMAGE}

RUN apt-get update \
    && apt-get install -y --no-install-recommends caddy wget ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data /config /etc/caddy
ENV XDG_CONFIG_HOME=/config \
    XDG_DATA_HOME=/data
VOLUME /data /config
EXPOSE 80 443
CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
