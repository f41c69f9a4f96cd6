"""The hub image's runtime user: build arguments with today's defaults.

The Dockerfile is read as text (no Docker needed). uid/gid 10001 named ``hub`` is the default
and what has been tested; ``--build-arg HUB_USER=HwHiAiUser --build-arg HUB_UID=...
--build-arg HUB_GID=...`` builds Huawei's non-root convention (docs/cann.md#device-permissions).
Nothing else may repeat the name or the number, or a build with other values would break it.
"""

from __future__ import annotations

import re

import yaml

from tests.unit.test_compose import COMPOSE_FILE, DOCKERFILE, ROOT, command_args

NODE_COMPOSE = ROOT / "deploy" / "node" / "docker-compose.yml"

DEFAULTS = {"HUB_USER": "hub", "HUB_UID": "10001", "HUB_GID": "10001"}


def _instructions(stage: str) -> list[str]:
    """The stage's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", stage)
    return [
        line.strip()
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _runtime_stage() -> str:
    text = DOCKERFILE.read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)
    assert stages[-1].split()[2] == "runtime", "the last stage is the runtime image"
    return stages[-1]


def _args(instructions: list[str]) -> dict[str, str]:
    found = {}
    for line in instructions:
        match = re.fullmatch(r"ARG\s+([A-Z_]+)=(\S*)", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def test_the_runtime_user_is_three_build_arguments_with_todays_defaults() -> None:
    instructions = _instructions(_runtime_stage())
    args = _args(instructions)
    assert {name: args.get(name) for name in DEFAULTS} == DEFAULTS
    # Declared before the first instruction that uses them (an ARG is empty before that).
    first_use = next(i for i, line in enumerate(instructions) if "${HUB_UID}" in line)
    declared = [
        i for i, line in enumerate(instructions) if re.match(r"ARG HUB_(USER|UID|GID)=", line)
    ]
    assert len(declared) == 3 and max(declared) < first_use


def test_the_user_is_created_and_chosen_from_the_arguments() -> None:
    instructions = _instructions(_runtime_stage())
    create = next(line for line in instructions if "useradd" in line)
    assert re.search(r'groupadd --system --gid "\$\{HUB_GID\}" "\$\{HUB_USER\}"', create)
    assert re.search(r'useradd --system --uid "\$\{HUB_UID\}" --gid "\$\{HUB_GID\}"', create)
    assert "--home-dir /home/hub" in create and '"${HUB_USER}"' in create
    # Root is refused: the hub's processes never run as uid or gid 0.
    assert '[ "${HUB_UID}" = 0 ] || [ "${HUB_GID}" = 0 ]' in create and "exit 1" in create
    users = [line.split(None, 1)[1] for line in instructions if line.startswith("USER ")]
    assert users == ["${HUB_USER}"]
    chowns = [line for line in instructions if "chown" in line]
    assert chowns and all('chown "${HUB_UID}:${HUB_GID}" /var/lib/hub' in c for c in chowns)


def test_nothing_in_the_runtime_stage_repeats_the_default_user() -> None:
    code = "\n".join(
        line for line in _instructions(_runtime_stage()) if not line.startswith("ARG ")
    )
    assert "10001" not in code
    assert not re.search(r"\bhub:hub\b|USER hub\b|--gid hub\b", code)


def test_the_home_is_the_compose_working_dir_whatever_the_user() -> None:
    assert re.search(r"^\s+HOME=/home/hub$", _runtime_stage(), re.M)
    hub = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    node = yaml.safe_load(NODE_COMPOSE.read_text())["services"]
    assert hub["worker"]["working_dir"] == node["node-worker"]["working_dir"] == "/home/hub"


def test_the_prepare_steps_hand_the_store_to_the_images_user_by_reference() -> None:
    """Not `chown hub:hub` nor `chown 10001`: the owner of the image's /var/lib/hub, which the
    Dockerfile gives to its user, so a HwHiAiUser build needs no compose change."""
    for path in (COMPOSE_FILE, NODE_COMPOSE):
        prepare = yaml.safe_load(path.read_text())["services"]["prepare"]
        assert prepare["user"] == "0:0"
        script = " ".join(command_args(prepare))
        assert "chown --reference=/var/lib/hub /models" in script, path
        assert "10001" not in script and "hub:hub" not in script, path
