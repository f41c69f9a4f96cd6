# Redis from Debian's packages (7.0 in bookworm; upstream's compose default is the official
# redis:7.4 image), for hosts without a registry (make compose-images). Like the official
# image it serves the compose network (protected mode off: no port is published) from /data,
# as the redis user.
ARG BASE_IMAGE=triton-model-hub/debian:bookworm
FROM ${BASE_IMAGE}

RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server redis-tools \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data && chown redis:redis /data
COPY redis-entrypoint.sh /usr/local/bin/hub-redis-entrypoint
VOLUME /data
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/bin/sh", "/usr/local/bin/hub-redis-entrypoint"]
CMD ["redis-server"]
