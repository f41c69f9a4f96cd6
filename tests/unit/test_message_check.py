"""The mypy plugin that refuses a message formatted into a string (tools/message_check.py)."""

from __future__ import annotations

from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = """
from model_store.text import Message, Said, say

said: Said = say("x")
message: Message = say("y %(n)s", n=1)
a = f"found: {message}"
b = "found: {}".format(said)
template = str("found: %(m)s")  # as gettext() gives it: literals are ruff's (UP031)
c = template % message
d = template % {"m": said}
e = "found: " + message
f = " ".join([message])
g = f"log: {message!s} {said!r} {str(said)}"
h = say("found: %(m)s", m=message)
"""


def test_each_way_of_formatting_a_message_into_a_string_is_an_error(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(SAMPLE)
    config = tmp_path / "mypy.ini"
    config.write_text(
        f"[mypy]\nplugins = {ROOT / 'tools' / 'message_check.py'}\n"
        f"cache_dir = {tmp_path / 'cache'}\nmypy_path = {ROOT}\nfollow_imports = silent\n"
    )
    out, _err, _status = api.run(["--config-file", str(config), str(sample)])
    flagged = sorted({int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line})
    lines = SAMPLE.splitlines()
    assert [lines[n - 1].split(" =")[0] for n in flagged] == ["a", "b", "c", "d", "e", "f"], out
