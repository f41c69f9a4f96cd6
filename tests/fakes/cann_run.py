"""Stand-ins for CANN's ``.run`` packages (tests only): not Huawei's installers.

The Ascend Triton image recipe (deploy/triton/ascend/) installs CANN from the ``.run`` files an
operator downloads. These stand-ins have the same names and take the same options, so the
recipe runs here unchanged, and install the CANN stand-ins of tests/fakes/toolkit.py:

* ``Ascend-cann-toolkit_<version>_linux-<arch>.run``: the toolkit (ATC, pyACL, ``set_env.sh``)
  in the layout of its release: ``<path>/ascend-toolkit/latest`` before 8.5, ``<path>/cann``
  from 8.5 on (docs/cann.md#install-layouts);
* the chip's operator package, by the release's naming: ``Ascend-cann-kernels-<chip>_<version>
  _linux-<arch>.run`` before 8.5, ``Ascend-cann-<chip>-ops_<version>_linux-<arch>.run`` from 8.5
  on (chip ``310p``, ``910b``, ``A3``). It refuses to install without the toolkit, and writes
  the kernel folder of its chip (``opp/built-in/op_impl/ai_core/tbe/kernel/ascend310p``, ...)
  and, from 8.5, ``ascend_ops_install.info``.

What they share with the real installers (CANN's install guide, "Installing the Toolkit";
the GE backend's Dockerfile and public install scripts run them the same way): a self-extracting
shell script run with ``bash``; ``--install`` or ``--full``; ``--quiet`` skips the licence
question, which otherwise wants ``y`` on standard input; ``--install-path=DIR`` (default
``/usr/local/Ascend`` for root, ``$HOME/Ascend`` otherwise); ``--install-for-all``; a package
for one CPU architecture refuses another; the installer ends with "install success".
"""

from __future__ import annotations

import argparse
import io
import tarfile
from pathlib import Path

from tests.fakes.toolkit import FAKES_DIR

#: Where each operator package puts its kernels (the SoC family's folder under opp).
KERNEL_DIRS = {"310p": "ascend310p", "910b": "ascend910b", "a3": "ascend910_93"}
MARKER = "__HUB_STANDIN_PAYLOAD_BELOW__"

_HEADER = r"""#!/bin/bash
# A STAND-IN for CANN's {package} (tests/fakes/cann_run.py): it installs the project's CANN
# stand-ins, not Huawei's CANN.
set -euo pipefail
package={package}
kind={kind}
version={version}
arch={arch}
kernel_dir={kernel_dir}
layout={layout}
install=0 quiet=0 install_path=""
for arg in "$@"; do
    case $arg in
        --install|--full|--upgrade) install=1 ;;
        --quiet) quiet=1 ;;
        --install-for-all|--nox11) ;;
        --install-path=*) install_path=${{arg#*=}} ;;
        --version) echo "$version"; exit 0 ;;
        *) echo "[$package] unknown option: $arg" >&2; exit 1 ;;
    esac
done
if [[ $install != 1 ]]; then
    echo "[$package] say --install (or --full) to install" >&2
    exit 1
fi
if [[ $(uname -m) != "$arch" ]]; then
    echo "[$package] this package is for $arch; this machine is $(uname -m)" >&2
    exit 1
fi
if [[ $quiet != 1 ]]; then
    echo "Do you accept the EULA to install $package? [y/n]"
    read -r answer || answer=""
    [[ $answer == y || $answer == Y ]] || {{ echo "[$package] licence not accepted" >&2; exit 1; }}
fi
if [[ -z $install_path ]]; then
    if [[ $(id -u) == 0 ]]; then install_path=/usr/local/Ascend; else install_path=$HOME/Ascend; fi
fi
home=$install_path/ascend-toolkit/latest
[[ $layout != cann ]] || home=$install_path/cann
if [[ $kind == toolkit ]]; then
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    line=$(grep -an '^{marker}$' "$0" | cut -d: -f1)
    tail -n +$((line + 1)) "$0" | tar -xz -C "$scratch"
    python=$(command -v python3)
    (cd "$scratch" && "$python" -m tests.fakes.toolkit "$install_path" --layout "$layout" \
        --version "$version" --copy --no-driver --no-ops --python "$python" >/dev/null)
else
    if [[ ! -d $home ]]; then
        echo "[$package] install the toolkit first (no $home)" >&2
        exit 1
    fi
    kernels=$home/opp/built-in/op_impl/ai_core/tbe/kernel/$kernel_dir
    mkdir -p "$kernels"
    echo "stand-in kernels for $kernel_dir" > "$kernels/STANDIN"
    if [[ $layout == cann ]]; then
        printf 'package_name=Ascend-cann-ops\nversion=%s\narch=%s\n' "$version" "$arch" \
            > "$home/$arch-linux/ascend_ops_install.info"
    fi
fi
echo "[$package] install success, installed in $install_path"
exit 0
{marker}
"""


def layout_of(version: str) -> str:
    """``cann`` from CANN 8.5 on, ``ascend-toolkit`` before (docs/cann.md#install-layouts)."""
    major, _, rest = version.partition(".")
    minor = "".join(c for c in rest.split(".")[0] if c.isdigit()) or "0"
    return "cann" if (int(major), int(minor)) >= (8, 5) else "ascend-toolkit"


def package_names(version: str, arch: str, chip: str) -> tuple[str, str]:
    """The toolkit's and the chip's operator package's file names for ``version``."""
    toolkit = f"Ascend-cann-toolkit_{version}_linux-{arch}.run"
    if layout_of(version) == "cann":
        ops = f"Ascend-cann-{chip}-ops_{version}_linux-{arch}.run"
    else:
        ops = f"Ascend-cann-kernels-{chip}_{version}_linux-{arch}.run"
    return toolkit, ops


def _payload() -> bytes:
    """tests/fakes as ``tests/fakes`` in a gzipped tar (the toolkit's stand-ins)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(str(FAKES_DIR.parent / "__init__.py"), arcname="tests/__init__.py")
        archive.add(
            str(FAKES_DIR),
            arcname="tests/fakes",
            filter=lambda info: None if "__pycache__" in info.name else info,
        )
    return buffer.getvalue()


def make_run_packages(folder: Path, version: str, arch: str, chip: str = "310p") -> list[Path]:
    """The toolkit and operator ``.run`` stand-ins for ``version`` in ``folder``."""
    kernel_dir = KERNEL_DIRS[chip.lower()]
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    toolkit, ops = package_names(version, arch, chip)
    for kind, name in (("toolkit", toolkit), ("ops", ops)):
        header = _HEADER.format(
            package=name.removesuffix(".run"), kind=kind, version=version, arch=arch,
            kernel_dir=kernel_dir, layout=layout_of(version), marker=MARKER,
        )  # fmt: skip
        path = folder / name
        path.write_bytes(header.encode() + (_payload() if kind == "toolkit" else b""))
        path.chmod(0o755)
        made.append(path)
    return made


def main(argv: list[str] | None = None) -> int:
    import platform

    parser = argparse.ArgumentParser(prog="python -m tests.fakes.cann_run", description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--version", default="8.3.RC1")
    parser.add_argument("--arch", default=platform.machine())
    parser.add_argument("--chip", default="310p", choices=[*sorted(KERNEL_DIRS), "A3"])
    args = parser.parse_args(argv)
    for path in make_run_packages(args.folder, args.version, args.arch, args.chip):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
