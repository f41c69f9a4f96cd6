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
# Then a comment per chip npu-smi lists: whether the driver's container sharing mode is on
# (npu-smi info -t device-share -i <card> -c <chip>), and when it is off the command that turns
# it on. A chip opened in one container cannot be opened from another while that process runs,
# unless sharing is on; it is off by default and reset at every reboot (Huawei's HDK npu-smi
# reference, npusmi_0114, "container sharing mode"; vllm-ascend issues #632, #2542, #2698).
# The hub gives each NPU to its Triton container alone, so sharing matters only when the
# worker is given the NPU as well.
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
# The first chip's device node (compose maps ASCEND_DEVICE into Triton; one /dev/davinciN line
# per further chip goes into the compose file). A virtual NPU (/dev/vdavinciN, Huawei's vNPU
# on 310P, 300I Duo and 800I A2) must appear in the container as /dev/davinciN, the name CANN
# opens, as Ascend Docker Runtime renames it (runtime/main.go, addDeviceToSpec):
# ASCEND_DEVICE_IN_CONTAINER and the override deploy/hub-ascend-vnpu.yml do that.
first_node=$(find "${dev_dir}" -maxdepth 1 -regextype posix-extended \
    -regex '.*/v?davinci[0-9]+' -printf '%f\n' 2>/dev/null | sort -V | head -n 1)
if [[ -n "${first_node}" ]]; then
    echo "ASCEND_DEVICE=${dev_dir}/${first_node}"
    [[ "${dev_dir}" == /dev ]] || echo "ASCEND_DEV_DIR=${dev_dir}"
    if [[ "${first_node}" == vdavinci* ]]; then
        echo "ASCEND_DEVICE_IN_CONTAINER=/dev/${first_node#v}"
        echo "# ${first_node} is a virtual NPU: add deploy/hub-ascend-vnpu.yml to COMPOSE_FILE" \
            "(deploy/node/vnpu.yml on a node) so that Triton sees it as /dev/${first_node#v}"
    fi
fi

# Container sharing mode, chip by chip: "<card> <chip>" pairs from `npu-smi info -m` (rows
# after its title whose first three fields are numbers; the MCU's logical id is "-"), else
# from the table (a row B: "| <chip> [<device>] | <bus id> |" under its card's row A).
chips_from_mapping() {
    awk '/Chip Logic ID/ { titled = 1; next }
         titled && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ { print $1, $2 }'
}
chips_from_table() {
    awk -F'|' '
        function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
        NF >= 4 {
            split(trim($2), first, /[ \t]+/)
            second = trim($3)
            if (second ~ /^([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+|NA)$/) {
                if (card != "" && first[1] ~ /^[0-9]+$/) print card, first[1]
            } else if (first[1] ~ /^[0-9]+$/ && first[2] != "" && first[2] !~ /^[0-9]+$/) {
                card = first[1]
            }
        }'
}
run_npu_smi() {
    if command -v timeout >/dev/null 2>&1; then
        timeout 30 "${npu_smi}" "$@" 2>&1
    else
        "${npu_smi}" "$@" 2>&1
    fi
}

if [[ -n "${npu_smi}" ]]; then
    chips=$(run_npu_smi info -m | chips_from_mapping || true)
    if [[ -z "${chips}" ]]; then
        chips=$(run_npu_smi info | chips_from_table || true)
    fi
    if [[ -z "${chips}" ]]; then
        echo "ascend-host-env: npu-smi listed no chips; container sharing not checked" >&2
    fi
    while read -r card chip; do
        [[ -n "${card}" ]] || continue
        query="npu-smi info -t device-share -i ${card} -c ${chip}"
        answer_status=0
        answer=$(run_npu_smi info -t device-share -i "${card}" -c "${chip}") || answer_status=$?
        shared=$(awk -F: '/Device-share Status/ { gsub(/[ \t\r]/, "", $2); print $2; exit }' \
            <<<"${answer}")
        if [[ "${answer_status}" -eq 0 && "${shared}" == "True" ]]; then
            echo "# NPU ${card} chip ${chip}: container sharing is on (${query})"
        elif [[ "${answer_status}" -eq 0 && "${shared}" == "False" ]]; then
            echo "# NPU ${card} chip ${chip}: container sharing is off (${query}). Needed only if" \
                "the worker is also given this NPU (by default the hub gives it to the Triton" \
                "container alone); to turn it on, as root on this host, after every reboot:"
            echo "#   npu-smi set -t device-share -i ${card} -c ${chip} -d 1"
        else
            echo "# NPU ${card} chip ${chip}: container sharing unknown: ${query} exited" \
                "${answer_status} and said: $(tr '\n' ' ' <<<"${answer}" | sed 's/ *$//')"
        fi
    done <<<"${chips}"
fi

# CANN: which package(s) this host has and where, as comments, then ASCEND_TOOLKIT_ROOT when the
# one the worker should use is not under ASCEND_ROOT (docs/cann.md#install-layouts). A package is
# its set_env.sh: cann/ (the toolkit from CANN 8.5), ascend-toolkit/ (before), nnae/ and nnrt/
# (runtime packages: pyACL and the runtime, no ATC). Looked for under ASCEND_TOOLKIT_ROOT when
# set, ASCEND_ROOT, $HOME/Ascend and /home/*/Ascend (a non-root install; HUB_HOME_BASE for
# tests); the toolkit wins over a runtime package, the first folder over later ones. A host
# without CANN only gets a line on stderr: the worker then needs CANN before it can compile.
cann_info_version() {
    # The version= line of the package's install-info file (<home>/<arch>-linux/ or <home>).
    local home=$1 file
    for file in "${home}"/*-linux/ascend_*_install.info "${home}"/ascend_*_install.info; do
        if [[ -r "${file}" && "${file}" != *ascend_ops_install.info ]]; then
            awk -F= 'tolower($1) == "version" { gsub(/[ \t\r]/, "", $2); print $2; exit }' \
                "${file}"
            return 0
        fi
    done
    return 0
}
cann_roots=()
if [[ -n "${ASCEND_TOOLKIT_ROOT:-}" ]]; then
    cann_roots+=("${ASCEND_TOOLKIT_ROOT%/}")
fi
cann_roots+=("${root%/}")
if [[ -n "${HOME:-}" ]]; then
    cann_roots+=("${HOME%/}/Ascend")
fi
for home_dir in "${HUB_HOME_BASE:-/home}"/*/Ascend; do
    if [[ -d "${home_dir}" ]]; then
        cann_roots+=("${home_dir}")
    fi
done
toolkit_root=""
runtime_root=""
seen=" "
for cann_dir in "${cann_roots[@]}"; do
    if [[ "${seen}" == *" ${cann_dir} "* ]]; then
        continue
    fi
    seen="${seen}${cann_dir} "
    for package in cann ascend-toolkit nnae nnrt; do
        [[ -r "${cann_dir}/${package}/set_env.sh" ]] || continue
        home="${cann_dir}/${package}"
        [[ "${package}" == cann ]] || home="${home}/latest"
        version=$(cann_info_version "${home}" || true)
        case "${package}" in
            cann | ascend-toolkit)
                what="the CANN toolkit: ATC and pyACL"
                [[ -n "${toolkit_root}" ]] || toolkit_root=${cann_dir}
                ;;
            *)
                what="CANN's ${package} runtime package: pyACL, no ATC"
                [[ -n "${runtime_root}" ]] || runtime_root=${cann_dir}
                ;;
        esac
        echo "# CANN: ${cann_dir}/${package}/set_env.sh, ${what}${version:+ (version ${version})}"
    done
done
cann_root=${toolkit_root:-${runtime_root}}
if [[ -z "${cann_root}" ]]; then
    echo "ascend-host-env: no CANN found (no set_env.sh in cann/, ascend-toolkit/, nnae/ or" \
        "nnrt/ under ${cann_roots[*]}); install the CANN toolkit for the worker to compile" >&2
else
    if [[ -z "${toolkit_root}" ]]; then
        echo "# CANN: no toolkit here: the acl target cannot compile on this host (runtime" \
            "only: pyACL, no ATC); install the CANN toolkit to compile here"
    fi
    if [[ "${cann_root}" != "${root%/}" ]]; then
        echo "ASCEND_TOOLKIT_ROOT=${cann_root}"
    fi
fi
exit "${status}"
