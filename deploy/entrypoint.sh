#!/bin/bash
# Entrypoint of the hub image (web, worker, beat, migrate): set up the environment, then exec
# the command compose gave us, so that it runs as PID 1's direct child and gets the signals.
set -euo pipefail

# CANN: the worker runs ATC from a toolkit mounted read-only from the host. ATC needs the
# variables that the toolkit's set_env.sh exports (library paths, operator package paths, its
# Python modules on PYTHONPATH). Compose sets ASCEND_SET_ENV only where ATC runs.
if [[ -n "${ASCEND_SET_ENV:-}" ]]; then
    if [[ -r "${ASCEND_SET_ENV}" ]]; then
        # Values given explicitly in .env win over what set_env.sh derives.
        explicit_toolkit_home="${ASCEND_TOOLKIT_HOME:-}"
        set +eu
        # shellcheck disable=SC1090
        source "${ASCEND_SET_ENV}"
        set -eu
        if [[ -n "${explicit_toolkit_home}" ]]; then
            export ASCEND_TOOLKIT_HOME="${explicit_toolkit_home}"
        fi
    else
        # Not fatal: the dashboard reports the Ascend targets as "needs CANN" instead.
        echo "hub-entrypoint: ASCEND_SET_ENV=${ASCEND_SET_ENV} is not readable;" \
            "ATC will not be usable in this container" >&2
    fi
fi

if [[ $# -eq 0 ]]; then
    echo "hub-entrypoint: no command given" >&2
    exit 64
fi
exec "$@"
