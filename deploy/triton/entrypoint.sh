#!/bin/bash
# Entrypoint for the Ascend Triton container. It is bind-mounted into an image we do not build,
# so it assumes only bash and coreutils.
#
# Why it exists: the reference Ascend Triton image (hicann triton-inference-server-ge-backend)
# sets its environment up in ~/.bashrc, which a non-interactive `docker run` never reads. Here
# we do the same set-up explicitly, check that the backends our configs name are really
# present (a missing one should stop the container now, with a clear message, not fail the first
# model load an hour later), refuse to run from inside the model repository (GE writes files
# into the working directory), then exec tritonserver with the arguments compose passes.
set -euo pipefail

log() { echo "triton-entrypoint: $*" >&2; }

prepend_path_var() { # NAME DIR: put DIR first in the colon list NAME unless already there
    local name=$1 dir=$2 current
    current=${!name:-}
    [[ -d $dir ]] || return 0
    case ":${current}:" in
        *":${dir}:"*) ;;
        *) export "${name}=${dir}${current:+:${current}}" ;;
    esac
}

# --- CANN toolkit inside the image (GE, ACL, and pyACL for our `acl` backend) -----------------
# ASCEND_SET_ENV if given, else the image's install of either layout: /usr/local/Ascend/cann
# (CANN 8.5 and later) first, then /usr/local/Ascend/ascend-toolkit (docs/cann.md#install-layouts).
set_env=${ASCEND_SET_ENV:-}
if [[ -z $set_env ]]; then
    set_env=/usr/local/Ascend/ascend-toolkit/set_env.sh
    [[ -r /usr/local/Ascend/cann/set_env.sh ]] && set_env=/usr/local/Ascend/cann/set_env.sh
fi
if [[ -r $set_env ]]; then
    set +eu
    # shellcheck disable=SC1090
    source "$set_env"
    set -eu
else
    log "warning: $set_env not found; the npu_ge backend will not find the CANN libraries"
fi

# --- libraries: host driver (bind-mounted), onnxruntime used by npu_ge to read ONNX I/O -------
# The driver's three folders, as CANN's own set_env.sh puts them first (hicann/runtime
# scripts/package/runtime/set_env.sh; the worker's entrypoint adds the same): images whose
# set_env.sh lacks them, as the GE backend's Dockerfile adds only lib64/driver, would miss
# lib64/common.
prepend_path_var LD_LIBRARY_PATH /opt/onnxruntime/lib
driver_root=${ASCEND_DRIVER_HOME:-/usr/local/Ascend/driver}
for driver_dir in "$driver_root/lib64" "$driver_root/lib64/common" "$driver_root/lib64/driver"; do
    prepend_path_var LD_LIBRARY_PATH "$driver_dir"
done

# --- the Python that the Python backend stub embeds -------------------------------------------
# Our `acl` and `onnxruntime` backends are Python-based; the stub finds its site-packages
# through the interpreter first on PATH and loads libpython from LD_LIBRARY_PATH.
python_env=${TRITON_PYTHON_ENV:-/usr/local/anaconda3/envs/triton}
prepend_path_var LD_LIBRARY_PATH "$python_env/lib"
prepend_path_var PATH "$python_env/bin"
export TRITON_HOME_PATH=${TRITON_HOME_PATH:-/opt/tritonserver}

# --- read the arguments we need to check ------------------------------------------------------
backend_dir="$TRITON_HOME_PATH/backends"
model_repo=""
for arg in "$@"; do
    case $arg in
        --backend-directory=*) backend_dir=${arg#*=} ;;
        --model-repository=*) model_repo=${arg#*=} ;;
    esac
done

# --- preflight: every backend named in HUB_REQUIRED_BACKENDS must be loadable -----------------
missing=0
for backend in ${HUB_REQUIRED_BACKENDS:-}; do
    dir="$backend_dir/$backend"
    if [[ -f "$dir/libtriton_${backend}.so" ]]; then
        log "backend $backend: $dir/libtriton_${backend}.so"
    elif [[ -f "$dir/model.py" ]]; then
        # Python-based backend: needs Triton's Python backend (library and stub) beside it or
        # in <backend-dir>/python.
        if [[ -f "$dir/libtriton_python.so" || -f "$backend_dir/python/libtriton_python.so" ]]; then
            log "backend $backend: Python-based ($dir/model.py)"
        else
            log "ERROR: $dir/model.py found, but no libtriton_python.so in $dir or $backend_dir/python"
            missing=1
        fi
    else
        log "ERROR: backend $backend not found: no $dir/libtriton_${backend}.so and no $dir/model.py"
        missing=1
    fi
done
if [[ $missing -ne 0 ]]; then
    log "this image cannot serve every target the dashboard offers; see deploy/triton/README.md"
    exit 78
fi

# Python modules our Python-based backends import. Only a warning: the stub's interpreter is
# not necessarily the `python3` found here, and a model of another target still loads.
if command -v python3 >/dev/null 2>&1; then
    for module in numpy onnxruntime acl; do
        if ! python3 -c "import $module" >/dev/null 2>&1; then
            log "warning: python3 ($(command -v python3)) cannot import '$module';" \
                "models that need it will fail to load"
        fi
    done
fi

# --- working directory: never inside the model repository --------------------------------------
if [[ -n $model_repo ]]; then
    repo_real=$(readlink -f -- "$model_repo" || true)
    here_real=$(readlink -f -- "$PWD")
    if [[ -n $repo_real && ( $here_real == "$repo_real" || $here_real == "$repo_real"/* ) ]]; then
        log "ERROR: working directory $PWD is inside the model repository $model_repo;" \
            "GE would write its files there. Set working_dir elsewhere."
        exit 78
    fi
fi

# The restricted-API options carry the hub's key (TRITON_API_KEY): log them with *** instead.
shown=()
for arg in "$@"; do
    case $arg in
        --http-restricted-api=*:*=* | --grpc-restricted-protocol=*:*=*)
            header_and_key=${arg#*:}
            shown+=("${arg%%:*}:${header_and_key%%=*}=***") ;;
        --http-restricted-api=* | --grpc-restricted-protocol=*) shown+=("${arg%%=*}=***") ;;
        *) shown+=("$arg") ;;
    esac
done
log "starting in $PWD: ${shown[*]}"
exec "$@"
