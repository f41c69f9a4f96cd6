"""Whether INT8 for an Ascend target is available: which nodes' newest reports show AMCT or
msModelSlim (``model_store.ascend.quantise_tools``).

The Ascend step itself (docs/quantise-ascend.md) is designed, not built: where a node shows a
tool, the page says so and names the node, and still offers nothing it cannot do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.translation import gettext

from webapp.nodes.models import HostReport
from webapp.text import localize

TOOLS = {"amct": "AMCT", "msmodelslim": "msModelSlim"}


@dataclass(frozen=True)
class AscendQuantizer:
    #: (node, tool label, version) for every present tool.
    found: list[tuple[str, str, str]] = field(default_factory=list)
    #: (node, tool label, reason) for every broken one.
    broken: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def why(self) -> str:
        """Why INT8 is not offered for an Ascend target here, in the request's language."""
        if self.found:
            where = ", ".join(f"{tool} {version} ({node})".replace(" ()", "")
                              for node, tool, version in self.found)  # fmt: skip
            return gettext(
                "Found on a build node: %(where)s. The hub's Ascend INT8 step (calibrate with "
                "the tool, then ATC) is designed but not built in this release, so it is not "
                "offered yet."
            ) % {"where": where}
        if self.broken:
            node, tool, reason = self.broken[0]
            return gettext(
                "INT8 (AMCT/msModelSlim) is not available on this host: %(tool)s on node "
                "%(node)s is installed but broken (%(reason)s)."
            ) % {"tool": tool, "node": node, "reason": reason}
        return gettext(
            "INT8 (AMCT/msModelSlim) is not available on this host: no build node reports "
            "either tool."
        )


def ascend_quantizer() -> AscendQuantizer:
    found: list[tuple[str, str, str]] = []
    broken: list[tuple[str, str, str]] = []
    for node, data in HostReport.objects.values_list("node", "data"):
        tools = (data or {}).get("quantise") or {}
        for key, label in TOOLS.items():
            tool = tools.get(key) or {}
            if tool.get("state") == "present":
                found.append((node, label, str(tool.get("version") or "")))
            elif tool.get("state") == "broken":
                broken.append((node, label, str(localize(tool.get("reason")) or "")))
    return AscendQuantizer(found, broken)
