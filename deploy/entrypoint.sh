#!/bin/bash
# Entrypoint of the hub image (web, worker, beat, migrate): set up the environment, then exec
# the command compose gave us, so that it runs as PID 1's direct child and gets the signals.
set -euo pipefail

# CANN: the worker runs ATC from CANN mounted read-only from the host (the same path as on the
# host, which CANN's scripts and symlinks name). ATC needs the variables that CANN's set_env.sh
# exports (library paths, operator package paths, its Python modules on PYTHONPATH). CANN is
# looked for under ASCEND_TOOLKIT_ROOT, the folder holding it when it is not under the driver's
# ASCEND_ROOT (a non-root install's /home/<user>/Ascend), else under ASCEND_ROOT. Compose sets
# them only where CANN is needed. ASCEND_SET_ENV names the script; without it, the first
# package installed there is used (docs/cann.md#install-layouts): <root>/cann (the toolkit,
# CANN 8.5 and later), <root>/ascend-toolkit (the toolkit before 8.5), then the runtime
# packages of inference-only hosts, <root>/nnae and <root>/nnrt (pyACL and the runtime, no ATC).
cann_root_var=ASCEND_TOOLKIT_ROOT
cann_root=${ASCEND_TOOLKIT_ROOT:-}
if [[ -z "${cann_root}" ]]; then
    cann_root_var=ASCEND_ROOT
    cann_root=${ASCEND_ROOT:-}
fi
if [[ -n "${cann_root}" && -z "${ASCEND_SET_ENV:-}" ]]; then
    for package in cann ascend-toolkit nnae nnrt; do
        if [[ -r "${cann_root}/${package}/set_env.sh" ]]; then
            ASCEND_SET_ENV="${cann_root}/${package}/set_env.sh"
            if [[ "${package}" == nnae || "${package}" == nnrt ]]; then
                # Not fatal either: pyACL works; the acl target says it cannot compile here.
                echo "hub-entrypoint: ${cann_root}/${package} is CANN's ${package} package:" \
                    "runtime only: pyACL, no ATC (install the toolkit to compile here)" >&2
            fi
            break
        fi
    done
    if [[ -z "${ASCEND_SET_ENV:-}" ]]; then
        # Not fatal: the host report says "needs CANN" and the Diagnostics page what is missing.
        echo "hub-entrypoint: no CANN set_env.sh under ${cann_root_var}=${cann_root}" \
            "(looked for set_env.sh in cann/, ascend-toolkit/, nnae/ and nnrt/)" >&2
    fi
fi
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

# The NPU driver's libraries, for npu-smi, DCMI and pyACL: its lib64 directories (the GE
# backend's guide puts lib64/driver on LD_LIBRARY_PATH; docs/cann.md#compose-mounts) and DCMI's,
# where the host has them.
if [[ -n "${ASCEND_ROOT:-}" ]]; then
    for dir in "${ASCEND_ROOT}/driver/lib64/driver" "${ASCEND_ROOT}/driver/lib64/common" \
        "${ASCEND_ROOT}/driver/lib64" /usr/local/dcmi; do
        if [[ -d "${dir}" && ":${LD_LIBRARY_PATH:-}:" != *":${dir}:"* ]]; then
            export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH}:}${dir}"
        fi
    done
fi

# The NPU's device nodes, where compose mapped them into this container (the Ascend worker;
# web and beat get none): a stock driver makes all four kinds crw-rw---- for its running group
# (HwHiAiUser by default), and this image's user is uid 10001. Without that group pyACL, the
# self-test and npu-smi all fail later with obscure driver errors, so stop now and say how to
# fix it (docs/cann.md#device-permissions). A host without mapped nodes needs nothing.
dev_dir=${HUB_DEV_DIR:-/dev}
npu_nodes=()
for node in "${dev_dir}"/davinci_manager "${dev_dir}"/devmm_svm "${dev_dir}"/hisi_hdc \
    "${dev_dir}"/davinci[0-9]*; do
    [[ -e "${node}" ]] && npu_nodes+=("${node}")
done
if [[ ${#npu_nodes[@]} -gt 0 ]]; then
    closed=()
    for node in "${npu_nodes[@]}"; do
        [[ -r "${node}" && -w "${node}" ]] || closed+=("${node}")
    done
    if [[ ${#closed[@]} -gt 0 ]]; then
        echo "hub-entrypoint: ERROR: this container's user (uid $(id -u), groups $(id -G))" \
            "cannot open the NPU device nodes:" >&2
        for node in "${closed[@]}"; do
            echo "hub-entrypoint:   $(stat -c '%n %A owner %u:%g' "${node}")" >&2
        done
        echo "hub-entrypoint: set ASCEND_DRIVER_GID in .env to the driver's group id, found on" \
            "the host with:  stat -c %g /dev/davinci_manager" >&2
        echo "hub-entrypoint: (compose adds it to this service with group_add; see" \
            "docs/cann.md#device-permissions)" >&2
        exit 78
    fi
fi

if [[ $# -eq 0 ]]; then
    echo "hub-entrypoint: no command given" >&2
    exit 64
fi
exec "$@"
