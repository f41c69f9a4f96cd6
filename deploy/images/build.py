"""Build every image the compose files use, and a first ``.env`` (``make compose-images``).

Two ways, by ``HUB_IMAGES_FROM``:

* ``debian`` (the default): for hosts whose engine cannot pull from a registry. A base image
  is made with ``debootstrap`` from the host's Debian mirror and imported; Python, PostgreSQL,
  Redis and Caddy come from Debian's packages on top of it; the hub's Python packages come
  from wheels made on this host (``pip wheel``) and served to the builds on a loopback port,
  so no container needs to reach PyPI itself (a TLS-inspecting proxy would refuse it).
* ``registry``: the hub image on upstream's ``python:3.11-slim-bookworm``; PostgreSQL, Redis
  and Caddy stay upstream's images, which compose pulls itself.

Either way the Triton images are built here: the CPU one from the nvidia-pytriton wheel in
the hub image, and a stand-in of the Ascend one: the Ascend image's own recipe
(deploy/triton/ascend/build.sh) run on stand-in CANN ``.run`` packages and the stand-in GE
backend (tests/fakes), so it serves nothing on an NPU. Images are tagged with the names the
compose files read from ``.env``; the Ascend layout's own setting, ``ASCEND_TRITON_IMAGE``, is
never written (its default names what the recipe builds on an Ascend host).
An existing ``.env`` is never touched; without one, one is written (mode 0600) with fresh
secrets, ``localhost`` as the site address, and these images' names. Standard library only:
it runs before anything is installed. docs/deploy.md says what each step does.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import http.server
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: The names the compose files read (``${NAME:-upstream default}``), with this script's tags.
LOCAL_IMAGES = {
    "HUB_IMAGE": "triton-model-hub:latest",
    "POSTGRES_IMAGE": "triton-model-hub/postgres:15-bookworm",
    "REDIS_IMAGE": "triton-model-hub/redis:7.0-bookworm",
    "HUB_PROXY_IMAGE": "triton-model-hub/caddy:2.6-bookworm",
    "TRITON_IMAGE": "triton-model-hub/triton-cpu:latest",
}
#: The Ascend Triton recipe built on the stand-ins: what ASCEND_TRITON_IMAGE names for a trial
#: of deploy/hub-ascend.yml without NPUs (``TRITON_STANDIN_IMAGE`` renames it).
STANDIN_IMAGE = "triton-model-hub/triton-ascend-standin:latest"
#: The CANN release and chip of the stand-in packages (tests/fakes/cann_run.py).
STANDIN_CANN = ("8.0.RC3", "310p")
ASCEND_RECIPE = ROOT / "deploy" / "triton" / "ascend"
BASE_IMAGE = "triton-model-hub/debian:bookworm"
PYTHON_IMAGE = "triton-model-hub/python:3.11-bookworm"
UPSTREAM_PYTHON_IMAGE = "python:3.11-slim-bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: The loopback port the wheels are served on during builds (another if it is taken).
WHEELS_PORT = 47931
#: What the pins need on Python 3.11.0-3.11.2 beyond what a later 3.11 resolves (markers).
EARLY_311_EXTRAS = ("async-timeout>=4.0.3",)


def tell(message: str) -> None:
    print(f"compose-images: {message}", flush=True)


def run(*command: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    tell("$ " + " ".join(command))
    return subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def image_exists(tag: str) -> bool:
    done = subprocess.run(
        ["docker", "image", "inspect", tag], capture_output=True, check=False, timeout=60
    )
    return done.returncode == 0


def check_engine() -> None:
    if shutil.which("docker") is None:
        sys.exit("compose-images: no `docker` command; install Docker (docs/deploy.md)")
    done = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(
            "compose-images: the Docker engine does not answer (is dockerd running, may this "
            f"user use it?):\n{done.stderr.strip()}"
        )


def host_mirror() -> str:
    """The Debian mirror this host's apt uses (its first http(s) source), else deb.debian.org."""
    override = os.environ.get("DEBIAN_MIRROR")
    if override:
        return override
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in files:
        with contextlib.suppress(OSError):
            for line in path.read_text().splitlines():
                words = line.split()
                if words[:1] == ["deb"]:
                    urls = [w for w in words[1:] if w.startswith("http")]
                elif words[:1] == ["URIs:"]:
                    urls = words[1:]
                else:
                    continue
                if urls and "security" not in urls[0]:
                    return urls[0]
    return DEFAULT_MIRROR


def ensure_base_image(tag: str) -> None:
    """A minimal Debian bookworm imported from debootstrap, unless the engine has it already."""
    if image_exists(tag):
        tell(f"{tag}: already in the engine")
        return
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        sys.exit(
            f"compose-images: {tag} must be made with debootstrap, as root "
            "(apt-get install debootstrap; docs/deploy.md#without-a-registry)"
        )
    mirror = host_mirror()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hub-debootstrap-") as scratch:
        rootfs = Path(scratch) / "rootfs"
        run("debootstrap", "--variant=minbase", "bookworm", str(rootfs), mirror,
            stdout=subprocess.DEVNULL)  # fmt: skip
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        run("docker", "import", "-", tag, stdin=tar.stdout)
        if tar.wait() != 0:
            sys.exit("compose-images: tar of the debootstrap folder failed")
    tell(f"{tag}: made from {mirror} in {time.monotonic() - started:.0f} s")


def wheel_dir() -> Path:
    """Wheels for the hub image's two environments, made on this host; kept per requirements."""
    files = [ROOT / "requirements.txt", ROOT / "constraints.txt",
             ROOT / "deploy" / "atc-python-requirements.txt",
             ROOT / "requirements-ldap.txt"]  # fmt: skip
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]
    folder = ROOT / "var" / "compose-images" / f"wheels-{digest}"
    if (folder / ".complete").is_file():
        return folder
    if sys.version_info[:2] != (3, 11):
        # The wheels are made by this host's Python for the image's Python 3.11.
        sys.exit(
            "compose-images: the debian path builds the hub's wheels with this host's Python, "
            f"which must be 3.11 like the image's (this is {sys.version.split()[0]}); on other "
            "hosts build from a registry: HUB_IMAGES_FROM=registry (docs/deploy-ascend.md#images)"
        )
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    pip = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--disable-pip-version-check",
        "-q",
        "-w",
        str(folder),
    ]
    run(*pip, "-c", str(files[1]), "-r", str(files[0]))
    # python-ldap has no wheels on PyPI: it is built here, against this host's OpenLDAP
    # (Debian bookworm, as the image), which needs its headers.
    if not (Path("/usr/include/ldap.h").is_file() and Path("/usr/include/sasl/sasl.h").is_file()):
        sys.exit("compose-images: python-ldap (LDAP sign-in) is built on this host and needs "
                 "OpenLDAP's headers: apt-get install libldap2-dev libsasl2-dev")  # fmt: skip
    run(*pip, "-c", str(files[1]), "-r", str(files[3]))
    run(*pip, "-r", str(files[2]))
    # Debian's Python is 3.11.2: redis asks for async-timeout below 3.11.3, which a newer
    # host Python resolving the same pins leaves out.
    run(*pip, "-c", str(files[1]), *EARLY_311_EXTRAS)
    (folder / ".complete").touch()
    return folder


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    """``folder`` over HTTP on a loopback port for the builds (which use the host's network)."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    # The same address each time when it is free: the URL is a build argument, and a new one
    # would make Docker rebuild the layers that install the packages.
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", WHEELS_PORT), handler)
    except OSError:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def build(tag: str, dockerfile: Path, context: Path, **args: str) -> None:
    command = [
        "docker",
        "build",
        "--network",
        "host",
        "--force-rm",
        "-f",
        str(dockerfile),
        "-t",
        tag,
    ]
    for key, value in args.items():
        command += ["--build-arg", f"{key}={value}"]
    started = time.monotonic()
    run(*command, str(context), stdout=None if os.environ.get("VERBOSE") else subprocess.DEVNULL)
    tell(f"{tag}: built in {time.monotonic() - started:.0f} s")


def recipe_wheel_dir() -> Path:
    """The Ascend recipe's wheels for this host's platform, by their pinned hashes; kept."""
    files = [ASCEND_RECIPE / "requirements.txt", ASCEND_RECIPE / "triton.txt"]
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]
    folder = ROOT / "var" / "compose-images" / f"ascend-wheels-{digest}"
    if (folder / ".complete").is_file():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for file in files:
        run(sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q",
            "--only-binary=:all:", "--no-deps", "--require-hashes", "-d", str(folder),
            "-r", str(file))  # fmt: skip
    (folder / ".complete").touch()
    return folder


def build_ascend_standin(tag: str, base: str, scratch: Path, wheels: Path | None) -> None:
    """The Ascend recipe, run as an operator would, on stand-in CANN packages and GE backend."""
    packages = scratch / "cann-packages"
    version, chip = STANDIN_CANN
    run(sys.executable, "-m", "tests.fakes.cann_run", str(packages), "--version", version,
        "--chip", chip, cwd=ROOT, stdout=subprocess.DEVNULL)  # fmt: skip
    command = [
        "bash", str(ASCEND_RECIPE / "build.sh"), "--cann", version, "--chip", chip,
        "--packages", str(packages), "--ge-backend", str(ROOT / "tests" / "fakes" / "npu_ge"),
        "--base", base, "--tag", tag,
    ]  # fmt: skip
    if wheels is not None:
        command += ["--wheels", str(wheels)]
    elif os.environ.get("PIP_INDEX_URL"):
        command += ["--pip-index", os.environ["PIP_INDEX_URL"]]
    started = time.monotonic()
    log = scratch / "ascend-recipe.log"
    with log.open("w") as output:
        tell("$ " + " ".join(command))
        done = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        sys.exit(f"compose-images: the Ascend recipe failed:\n{log.read_text()[-4000:]}")
    tell(f"{tag}: built with deploy/triton/ascend/build.sh in {time.monotonic() - started:.0f} s")


def env_settings(images: dict[str, str]) -> dict[str, str]:
    """A first ``.env`` for this machine: fresh secrets, localhost, the images just built."""
    return {
        "POSTGRES_PASSWORD": secrets.token_hex(24),
        "SECRET_KEY": secrets.token_urlsafe(48),
        "TRITON_API_KEY": secrets.token_hex(32),
        "HUB_ADMIN_PASSWORD": secrets.token_urlsafe(18),
        "ALLOWED_HOSTS": "localhost,127.0.0.1",
        "HUB_SITE_ADDRESS": "localhost",
        "CSRF_TRUSTED_ORIGINS": "https://localhost,https://127.0.0.1",
        "HTTPS": "true",
        # Published on loopback only; 0.0.0.0 (and a real site address) opens it up.
        "HUB_HTTPS_BIND": "127.0.0.1",
        "HUB_HTTPS_PORT": "443",
        "HUB_HTTP_BIND": "127.0.0.1",
        "HUB_HTTP_PORT": "80",
        **images,
    }


def write_env(path: Path, settings: dict[str, str]) -> None:
    """``settings`` as a new env file, readable by its owner only; never over an existing one."""
    lines = [
        "# Written by `make compose-images` for a first start on this machine (docs/deploy.md).",
        "# Edit freely: make compose-images never touches an existing .env.",
        *(f"{name}={value}" for name, value in settings.items()),
    ]
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make compose-images", description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="source", choices=("debian", "registry"),
                        default=os.environ.get("HUB_IMAGES_FROM", "debian"))  # fmt: skip
    parser.add_argument("--env-file", type=Path, default=ROOT / ".env")
    parser.add_argument("--no-ascend", action="store_true", help="skip the Ascend stand-in image")
    args = parser.parse_args(argv)
    check_engine()
    images = {name: os.environ.get(name) or tag for name, tag in LOCAL_IMAGES.items()}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hub-images-") as scratch:
        if args.source == "debian":
            ensure_base_image(BASE_IMAGE)
            base = {"BASE_IMAGE": BASE_IMAGE}
            build(PYTHON_IMAGE, HERE / "python.Dockerfile", HERE, **base)
            build(images["POSTGRES_IMAGE"], HERE / "postgres.Dockerfile", HERE, **base)
            build(images["REDIS_IMAGE"], HERE / "redis.Dockerfile", HERE, **base)
            build(images["HUB_PROXY_IMAGE"], HERE / "caddy.Dockerfile", HERE, **base)
            with served(wheel_dir()) as url:
                build(images["HUB_IMAGE"], ROOT / "Dockerfile", ROOT,
                      PYTHON_IMAGE=PYTHON_IMAGE, PIP_WHEELS_URL=url)  # fmt: skip
        else:
            # A registry mirror (HUB_PYTHON_IMAGE) and a PyPI mirror (PIP_INDEX_URL) for hosts
            # that cannot reach Docker Hub or PyPI; everything is built inside containers.
            mirror = {"PIP_INDEX_URL": os.environ["PIP_INDEX_URL"]} if os.environ.get(
                "PIP_INDEX_URL") else {}  # fmt: skip
            python_image = os.environ.get("HUB_PYTHON_IMAGE") or UPSTREAM_PYTHON_IMAGE
            build(images["HUB_IMAGE"], ROOT / "Dockerfile", ROOT, PYTHON_IMAGE=python_image,
                  **mirror)  # fmt: skip
            for name in ("POSTGRES_IMAGE", "REDIS_IMAGE", "HUB_PROXY_IMAGE"):
                images.pop(name)  # compose's upstream defaults
        build(images["TRITON_IMAGE"], HERE / "triton-cpu.Dockerfile", HERE,
              HUB_IMAGE=images["HUB_IMAGE"])  # fmt: skip
        if not args.no_ascend:
            standin = os.environ.get("TRITON_STANDIN_IMAGE") or STANDIN_IMAGE
            if args.source == "debian":
                build_ascend_standin(standin, PYTHON_IMAGE, Path(scratch), recipe_wheel_dir())
            else:
                ascend_base = os.environ.get("ASCEND_BASE_IMAGE") or "ubuntu:22.04"
                build_ascend_standin(standin, ascend_base, Path(scratch), None)
    tell(f"all images built in {time.monotonic() - started:.0f} s")
    if args.env_file.exists():
        tell(f"{args.env_file} exists: left as it is (image names above, if it needs them)")
    else:
        write_env(args.env_file, env_settings(images))
        tell(f"wrote {args.env_file} (mode 0600): fresh secrets, the site at https://localhost/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
