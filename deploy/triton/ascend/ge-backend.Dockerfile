# CANN's GE backend for Triton (npu_ge), compiled from pinned sources against the CANN and the
# Triton of the recipe's base image (build.sh --ge-backend source builds this, copies /out into
# the final image, and discards this image). Needs network access to gitcode.com, github.com
# and the Ubuntu/Debian mirror; TLS checks stay on throughout.
#
# Pins, and why each is what it is:
# - the GE backend at 5a82641 (2026-08-04), the commit the project's facts were read from;
# - Triton's core, common and backend repositories at their r24.10 heads, the release of the
#   Triton in the nvidia-pytriton wheel (2.51): the backend API the server offers (1.19) is
#   the one the backend is compiled against. The GE backend's own build.sh defaults to r24.02
#   (API 1.18); either loads, matching avoids surprises;
# - onnxruntime's C library 1.23.2 (the GE backend reads model inputs and outputs from the ONNX
#   file with it), the release archive by sha256.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

ARG GE_BACKEND_REPO=https://gitcode.com/cann/triton-inference-server-ge-backend.git
ARG GE_BACKEND_COMMIT=5a82641eaa484414bcad65d214c102ee60d9f94e
ARG TRITON_CORE_COMMIT=bfec7c61dc0939433f64f14e89b1973073eac8ba
ARG TRITON_COMMON_COMMIT=578491fc3944f77d16a6a38e3d7691c485c47ba0
ARG TRITON_BACKEND_COMMIT=ac03a5d97403dec841ad46d0439e93db12c9268f
ARG ORT_VERSION=1.23.2
ARG ORT_SHA256_X86_64=1fa4dcaef22f6f7d5cd81b28c2800414350c10116f5fdd46a2160082551c5f9b
ARG ORT_SHA256_AARCH64=7c63c73560ed76b1fac6cff8204ffe34fe180e70d6582b5332ec094810241e5c
# CANN's GE libraries are built with the pre-C++11 string ABI; the backend passes std::string
# to them, so it must match (the upstream build.sh reads it from an installed torch instead).
ARG GE_CXX11_ABI=OFF

RUN set -eu; \
    apt-get update; \
    apt-get install -y --no-install-recommends build-essential cmake git pkg-config \
        rapidjson-dev nlohmann-json3-dev libssl-dev zlib1g-dev libnuma-dev; \
    rm -rf /var/lib/apt/lists/*

# One commit of a repository, checked out by its full hash and verified.
RUN set -eu; \
    fetch() { \
        mkdir -p "$2"; git -C "$2" init -q; git -C "$2" remote add origin "$1"; \
        git -C "$2" fetch -q --depth 1 origin "$3"; git -C "$2" checkout -q FETCH_HEAD; \
        [ "$(git -C "$2" rev-parse HEAD)" = "$3" ] || { echo "$1: not $3" >&2; exit 1; }; \
    }; \
    fetch "${GE_BACKEND_REPO}" /src/ge "${GE_BACKEND_COMMIT}"; \
    fetch https://github.com/triton-inference-server/core.git /src/core "${TRITON_CORE_COMMIT}"; \
    fetch https://github.com/triton-inference-server/common.git /src/common "${TRITON_COMMON_COMMIT}"; \
    fetch https://github.com/triton-inference-server/backend.git /src/backend "${TRITON_BACKEND_COMMIT}"

RUN set -eu; \
    arch=$(uname -m); \
    case "$arch" in \
        x86_64) name=x64; sum=${ORT_SHA256_X86_64} ;; \
        aarch64) name=aarch64; sum=${ORT_SHA256_AARCH64} ;; \
        *) echo "no onnxruntime archive for $arch" >&2; exit 1 ;; \
    esac; \
    file="onnxruntime-linux-${name}-${ORT_VERSION}.tgz"; \
    wget -q -O "/tmp/$file" "https://github.com/microsoft/onnxruntime/releases/download/v${ORT_VERSION}/$file"; \
    echo "$sum  /tmp/$file" | sha256sum -c -; \
    mkdir -p /opt/onnxruntime; \
    tar -xzf "/tmp/$file" -C /opt/onnxruntime --strip-components=1; \
    rm "/tmp/$file"

# The backend's CMakeLists.txt names /usr/local/Ascend/ascend-toolkit/latest; CANN 8.5 installs
# to /usr/local/Ascend/cann, so that name points there during this build only. The Triton
# repositories come from /src (FETCHCONTENT_SOURCE_DIR_*), never from a branch head.
RUN set -eu; \
    if [ ! -e /usr/local/Ascend/ascend-toolkit/latest ] && [ -d /usr/local/Ascend/cann ]; then \
        mkdir -p /usr/local/Ascend/ascend-toolkit; \
        ln -s /usr/local/Ascend/cann /usr/local/Ascend/ascend-toolkit/latest; \
    fi; \
    if [ -r /usr/local/Ascend/cann/set_env.sh ]; then . /usr/local/Ascend/cann/set_env.sh; \
    else . /usr/local/Ascend/ascend-toolkit/set_env.sh; fi; \
    mkdir -p /out/opt/tritonserver/backends/npu_ge /out/opt/onnxruntime; \
    TRITON_HOME_PATH=/opt/tritonserver cmake -S /src/ge -B /src/build \
        -DCMAKE_BUILD_TYPE=Release -DTRITON_ENABLE_GPU=OFF -DARCH="$(uname -m)" \
        -DUSE_CXX11_ABI=${GE_CXX11_ABI} -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
        -DFETCHCONTENT_SOURCE_DIR_REPO-CORE=/src/core \
        -DFETCHCONTENT_SOURCE_DIR_REPO-COMMON=/src/common \
        -DFETCHCONTENT_SOURCE_DIR_REPO-BACKEND=/src/backend; \
    cmake --build /src/build -j"$(nproc)"; \
    cp /src/build/libtriton_npu_ge.so /out/opt/tritonserver/backends/npu_ge/; \
    cp -a /opt/onnxruntime/lib /out/opt/onnxruntime/
