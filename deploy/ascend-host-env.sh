#!/bin/bash
# Prints the .env lines an Ascend host needs for the compose files (deploy/hub-ascend.yml,
# deploy/node/docker-compose.yml), read off this host:
#
#   deploy/ascend-host-env.sh >> .env        # on the Ascend host, then check the lines
#
#   ASCEND_DRIVER_GID  the group of the NPU device nodes (crw-rw---- for the driver's group,
#                      HwHiAiUser by default, whose id differs between hosts); the worker gets
#                      it with group_add (docs/cann.md#device-permissions)
#   NPU_SMI_PATH       where the driver installed npu-smi (/usr/local/bin or /usr/local/sbin)
#   ASCEND_ROOT        where CANN and the driver are installed
#
# It only reads; it changes nothing. Exits 1, saying what is missing, on a host without the
# NPU driver. HUB_DEV_DIR and ASCEND_ROOT may point elsewhere (tests use them).
set -euo pipefail

dev_dir=${HUB_DEV_DIR:-/dev}
root=${ASCEND_ROOT:-/usr/local/Ascend}
status=0

if [[ -e "${dev_dir}/davinci_manager" ]]; then
    echo "ASCEND_DRIVER_GID=$(stat -c %g "${dev_dir}/davinci_manager")"
else
    echo "ascend-host-env: no ${dev_dir}/davinci_manager: the NPU driver is not installed" \
        "(or not loaded) on this host" >&2
    status=1
fi

npu_smi=$(command -v npu-smi 2>/dev/null || true)
if [[ -z "${npu_smi}" ]]; then
    for candidate in /usr/local/sbin/npu-smi /usr/local/bin/npu-smi; do
        if [[ -x "${candidate}" ]]; then
            npu_smi=${candidate}
            break
        fi
    done
fi
if [[ -n "${npu_smi}" ]]; then
    echo "NPU_SMI_PATH=${npu_smi}"
else
    echo "ascend-host-env: npu-smi not found on PATH, /usr/local/sbin or /usr/local/bin" >&2
    status=1
fi

if [[ -d "${root}/driver" ]]; then
    echo "ASCEND_ROOT=${root}"
else
    echo "ascend-host-env: no driver under ASCEND_ROOT=${root}; set ASCEND_ROOT to the folder" \
        "that holds driver/ (and cann/ or ascend-toolkit/)" >&2
    status=1
fi
exit "${status}"
