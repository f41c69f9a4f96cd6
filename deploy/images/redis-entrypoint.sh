#!/bin/sh
# Entrypoint of the Debian-built Redis image (redis.Dockerfile): run redis-server as the redis
# user in /data, reachable from the compose network as in the official image.
set -eu
chown redis:redis /data 2>/dev/null || true
if [ "${1:-}" = "redis-server" ]; then
    shift
    # Without a config file Redis refuses clients from other containers (protected mode).
    exec setpriv --reuid=redis --regid=redis --init-groups redis-server --protected-mode no "$@"
fi
exec "$@"
