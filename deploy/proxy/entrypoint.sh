#!/bin/sh
# Entrypoint of the `proxy` service (image caddy:2, which has a POSIX sh): say in the log which
# certificate is served, then exec Caddy with deploy/proxy/Caddyfile. tests/integration/
# test_proxy.py runs this script with Debian's Caddy.
set -eu

# An empty HUB_TLS would leave the Caddyfile's `tls` line without arguments (Caddy substitutes
# a set-but-empty variable as nothing, not as the default).
HUB_TLS="${HUB_TLS:-internal}"
export HUB_TLS

if [ "$HUB_TLS" = "internal" ]; then
    echo "hub-proxy: no certificate configured (HUB_TLS=internal): serving a SELF-SIGNED" \
        "certificate for ${HUB_SITE_ADDRESS:-localhost} from Caddy's internal CA, created on" \
        "first start and kept in the proxy's data volume. Browsers warn until that CA's root" \
        "(${XDG_DATA_HOME:-/data}/caddy/pki/authorities/local/root.crt) is trusted;" \
        "set HUB_TLS_DIR and HUB_TLS in .env to serve your own certificate." >&2
else
    echo "hub-proxy: serving the configured certificate and key: ${HUB_TLS}" >&2
fi

exec caddy run --config "${HUB_CADDYFILE:-/etc/caddy/Caddyfile}" --adapter caddyfile
