#!/bin/bash
# Builds the Ascend Triton image from the CANN .run packages the operator downloaded
# (deploy/triton/README.md says what to download, and the licence the image is then under).
#
#   deploy/triton/ascend/build.sh --cann 8.3.RC1 --chip 310p --packages ~/cann-packages
#
# Options (defaults in brackets):
#   --cann VERSION     CANN version of the packages, e.g. 8.0.0, 8.3.RC1, 8.5.0   (required)
#   --chip CHIP        the chip's operator package: 310p, 910b, or A3 (8.5 on)     (required)
#   --packages DIR     folder holding the toolkit and operator .run files          (required)
#   --arch ARCH        x86_64 or aarch64; must be this machine's                   [uname -m]
#   --ge-backend WHAT  "source": compile CANN's GE backend from pinned sources (needs
#                      gitcode.com and github.com); or a folder holding a built
#                      libtriton_npu_ge.so (taken from another image)   [$ASCEND_GE_BACKEND or source]
#   --onnxruntime-lib DIR  with a folder --ge-backend: the libonnxruntime.so* it links
#   --base IMAGE       Ubuntu 22.04 or Debian 12, ideally by digest   [$ASCEND_BASE_IMAGE or ubuntu:22.04]
#   --pip-index URL    a PyPI mirror (packages are still checked by sha256)  [$PIP_INDEX_URL or PyPI]
#   --wheels DIR       a folder of wheels instead of an index (offline)      [$ASCEND_WHEELS]
#   --tag NAME         image name                  [triton-model-hub/triton-ascend:latest]
#
# Also tagged <name>:<cann>-<chip>-<arch>. Nothing is pushed: push to your private registry
# yourself. The build uses the host's network (--network host) to reach the packages, which
# this script serves on a loopback port (47932 when free) for the length of the build only.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
docker=${DOCKER:-docker}
cann="" chip="" packages="" arch=$(uname -m) ort_lib="" tag=triton-model-hub/triton-ascend:latest
ge_backend=${ASCEND_GE_BACKEND:-source} base=${ASCEND_BASE_IMAGE:-ubuntu:22.04}
pip_index=${PIP_INDEX_URL:-} wheels=${ASCEND_WHEELS:-}

say() { echo "ascend-image: $*" >&2; }
die() { say "$*"; exit 2; }

while [[ $# -gt 0 ]]; do
    case $1 in
        --cann) cann=$2; shift 2 ;;
        --chip) chip=$2; shift 2 ;;
        --packages) packages=$2; shift 2 ;;
        --arch) arch=$2; shift 2 ;;
        --ge-backend) ge_backend=$2; shift 2 ;;
        --onnxruntime-lib) ort_lib=$2; shift 2 ;;
        --base) base=$2; shift 2 ;;
        --pip-index) pip_index=$2; shift 2 ;;
        --wheels) wheels=$2; shift 2 ;;
        --tag) tag=$2; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) die "unknown option $1 (--help lists them)" ;;
    esac
done
[[ -n $cann && -n $chip && -n $packages ]] || die "--cann, --chip and --packages are required"
[[ $arch == x86_64 || $arch == aarch64 ]] || die "--arch must be x86_64 or aarch64, not $arch"
[[ $arch == "$(uname -m)" ]] || die "the packages are for $arch but this machine is $(uname -m):
    build on a $arch host (emulated builds of CANN's installers are not supported)"
[[ $cann =~ ^[0-9]+\.[0-9]+(\.[0-9A-Za-z]+)*$ ]] || die "--cann: not a CANN version: $cann"
[[ -d $packages ]] || die "--packages: no folder $packages"

# The operator package's name changed with CANN 8.5 (kernels-<chip> -> <chip>-ops).
major=${cann%%.*}; rest=${cann#*.}; minor=${rest%%.*}; minor=${minor//[!0-9]/}
if (( major > 8 || (major == 8 && ${minor:-0} >= 5) )); then
    ops_name="Ascend-cann-${chip}-ops_${cann}_linux-${arch}.run"
else
    [[ ${chip,,} != a3 ]] || die "--chip A3 needs CANN 8.5 or later; before it the A3 kernels come from another package"
    ops_name="Ascend-cann-kernels-${chip}_${cann}_linux-${arch}.run"
fi
toolkit_name="Ascend-cann-toolkit_${cann}_linux-${arch}.run"
for name in "$toolkit_name" "$ops_name"; do
    [[ -f $packages/$name ]] || die "missing $packages/$name
    download it from Huawei's CANN downloads (hiascend.com) under Huawei's terms; the folder has:
    $(cd "$packages" && ls -1 ./*.run 2>/dev/null | tr '\n' ' ')"
done

context=$(mktemp -d)
server_pid="" served=""
cleanup() {
    [[ -z $server_pid ]] || kill "$server_pid" 2>/dev/null || true
    rm -rf "$context" ${served:+"$served"}
}
trap cleanup EXIT
cp "$here/requirements.txt" "$here/triton.txt" "$context/"
mkdir -p "$context/rootfs/opt/tritonserver/backends/npu_ge"

# The packages (and wheels) over HTTP on a loopback port, for the build only: the same port
# each time when it is free, since the URL is a build argument and a new one would make Docker
# redo the steps that use it.
served=$(mktemp -d)
ln -s "$(cd "$packages" && pwd)" "$served/packages"
[[ -z $wheels ]] || ln -s "$(cd "$wheels" && pwd)" "$served/wheels"
python3 - "$served" "$context/.port" >/dev/null 2>&1 <<'PY' &
import functools, http.server, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
handler.log_message = lambda *args: None
try:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 47932), handler)
except OSError:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
open(sys.argv[2], "w").write(str(server.server_address[1]))
server.serve_forever()
PY
server_pid=$!
for _ in $(seq 100); do [[ -s $context/.port ]] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$context/.port")"
packages_url=$url/packages
pip_args=()
if [[ -n $wheels ]]; then
    pip_args+=(--build-arg "PIP_FIND_LINKS=$url/wheels/")
elif [[ -n $pip_index ]]; then
    pip_args+=(--build-arg "PIP_INDEX_URL=$pip_index")
fi
sha() { sha256sum "$packages/$1" | cut -d' ' -f1; }

say "CANN $cann for $chip on $arch: $toolkit_name + $ops_name"
common=(--network host --force-rm
    --build-arg "BASE_IMAGE=$base" --build-arg "ARCH=$arch"
    --build-arg "CANN_TOOLKIT_URL=$packages_url/$toolkit_name"
    --build-arg "CANN_TOOLKIT_SHA256=$(sha "$toolkit_name")"
    --build-arg "CANN_OPS_URL=$packages_url/$ops_name"
    --build-arg "CANN_OPS_SHA256=$(sha "$ops_name")"
    "${pip_args[@]}")
"$docker" build "${common[@]}" --target base -t "$tag-base" -f "$here/Dockerfile" "$context" >&2

if [[ $ge_backend == source ]]; then
    say "compiling the GE backend from pinned sources (ge-backend.Dockerfile)"
    "$docker" build --network host --force-rm --build-arg "BASE_IMAGE=$tag-base" \
        -t "$tag-ge-build" -f "$here/ge-backend.Dockerfile" "$context" >&2
    container=$("$docker" create "$tag-ge-build")
    "$docker" cp "$container:/out/." "$context/rootfs/"
    "$docker" rm "$container" >/dev/null
    "$docker" rmi "$tag-ge-build" >/dev/null
    ge_source="built from ge-backend.Dockerfile's pins"
else
    [[ -d $ge_backend ]] || die "--ge-backend: neither \"source\" nor a folder: $ge_backend"
    [[ -f $ge_backend/libtriton_npu_ge.so || -f $ge_backend/model.py ]] \
        || die "--ge-backend $ge_backend has no libtriton_npu_ge.so"
    cp -a "$ge_backend/." "$context/rootfs/opt/tritonserver/backends/npu_ge/"
    if [[ -n $ort_lib ]]; then
        mkdir -p "$context/rootfs/opt/onnxruntime/lib"
        cp -a "$ort_lib/." "$context/rootfs/opt/onnxruntime/lib/"
    fi
    ge_source="brought: $(cd "$ge_backend" && pwd)"
fi

"$docker" build "${common[@]}" --target final -t "$tag" \
    -t "${tag%:*}:$cann-${chip,,}-$arch" \
    --build-arg "CANN_VERSION=$cann" --build-arg "CHIP=$chip" \
    --build-arg "GE_BACKEND_SOURCE=$ge_source" \
    -f "$here/Dockerfile" "$context" >&2
"$docker" rmi "$tag-base" >/dev/null 2>&1 || true
say "built $tag (and ${tag%:*}:$cann-${chip,,}-$arch)"
say "it contains CANN under Huawei's licence: push it to a private registry only"
say "next: ASCEND_TRITON_IMAGE=$tag in .env (docs/deploy-ascend.md)"
