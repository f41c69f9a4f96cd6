"""The hub's HTTP API as a node uses it: post a report, download a packaged version, fetch a
build's source and send its artifact back.

Plain ``urllib`` (no new dependency). Every call has a timeout; a JSON answer is read up to
:data:`MAX_JSON_BYTES` and a download up to the caller's limit, so a wrong or hostile URL
cannot make the node hang or fill its memory or disk. The token goes only into the
``Authorization`` header: it is never in a URL, a log line, an error message or ``repr``.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_store.file_io import StreamTooLarge, save_stream
from model_store.names import validate_model_name, validate_version

#: Largest JSON answer read from the hub (a report answer is a few hundred bytes).
MAX_JSON_BYTES = 64 * 1024
#: Seconds to connect and between received bytes; a download may take longer in total.
DEFAULT_TIMEOUT_S = 30.0
_SHA256 = re.compile(r"[0-9a-f]{64}")


class HubError(Exception):
    """The hub could not be reached or gave an answer the node cannot use.

    Attributes:
        status: The HTTP status (0 when there was no answer).
        code: The hub's error code (``node_incompatible``, ...) or a node-side one.
    """

    def __init__(self, message: str, status: int = 0, code: str = "hub_unreachable") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code

    @property
    def refused(self) -> bool:
        """The hub answered and will not work with this node (token or protocol)."""
        return self.status in (401, 403, 409)


@dataclass(frozen=True)
class ReportAnswer:
    """The hub's answer to a report: the protocol it speaks and how often it wants reports."""

    protocol: int
    report_every_s: float | None


@dataclass(frozen=True)
class Download:
    """A downloaded package tar: where it is, its size and the SHA-256 the hub announced."""

    path: Path
    size: int
    announced_sha256: str | None


@dataclass
class HubClient:
    """One hub, one node token."""

    base_url: str
    token: str = field(repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S

    def post_report(self, node: str, report: dict[str, Any]) -> ReportAnswer:
        """``POST /api/v1/nodes/{node}/reports``.

        Raises:
            HubError: No answer, a refusal (401/403 token, 409 ``node_incompatible`` with the
                hub's reason) or an answer that is not the contract's.
        """
        path = f"/api/v1/nodes/{urllib.parse.quote(validate_model_name(node))}/reports"
        body = json.dumps(report, default=str).encode()
        answer = self._json("POST", path, body)
        if answer.get("accepted") is not True or not isinstance(answer.get("protocol"), int):
            raise HubError(f"The hub's answer to the report is not understood: {answer!r:.200}")
        every = answer.get("report_every_s")
        if not (isinstance(every, int | float) and 1 <= every <= 3600):
            every = None  # the node keeps its own interval
        return ReportAnswer(answer["protocol"], None if every is None else float(every))

    def download_package(self, model: str, version: int, dest: Path, *, max_bytes: int) -> Download:
        """``GET /api/v1/models/{m}/versions/{n}/package.tar`` into the new file ``dest``.

        The hash is not trusted here: the caller checks it against the SHA-256 it was told
        to place (``safe_extract``). On any failure ``dest`` is removed.

        Raises:
            HubError: No answer, an error status, or more than ``max_bytes``.
        """
        model, version = validate_model_name(model), validate_version(version)
        path = f"/api/v1/models/{urllib.parse.quote(model)}/versions/{version}/package.tar"
        with self._open("GET", path, None) as response:
            announced = (response.headers.get("X-Content-SHA256") or "").strip().lower()
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > max_bytes:
                raise HubError(
                    f"The package of {model} v{version} is {int(length)} bytes; this node takes "
                    f"at most {max_bytes}.", response.status, "too_large",
                )  # fmt: skip
            size = _save(response, dest, max_bytes)
        return Download(dest, size, announced if _SHA256.fullmatch(announced) else None)

    def download_build_source(self, node: str, job: str, dest: Path, *, max_bytes: int) -> Download:
        """``GET /api/v1/nodes/{node}/builds/{job}/source.tar`` into the new file ``dest``.

        Raises:
            HubError: No answer, an error status (404: the build is not running any more),
                or more than ``max_bytes``.
        """
        path = f"{self._build_path(node, job)}/source.tar"
        with self._open("GET", path, None) as response:
            announced = (response.headers.get("X-Content-SHA256") or "").strip().lower()
            size = _save(response, dest, max_bytes)
        return Download(dest, size, announced if _SHA256.fullmatch(announced) else None)

    def upload_build_artifact(self, node: str, job: str, tar: Path, sha256: str) -> None:
        """``PUT /api/v1/nodes/{node}/builds/{job}/artifact.tar``, streamed from ``tar``.

        Raises:
            HubError: No answer, or the hub refused the tar (its reason).
        """
        path = f"{self._build_path(node, job)}/artifact.tar"
        size = tar.stat().st_size
        with tar.open("rb") as body:
            request = urllib.request.Request(  # noqa: S310 - base URL checked to be http(s)
                self.base_url + path, data=body, method="PUT",
                headers={"Authorization": f"Token {self.token}", "Accept": "application/json",
                         "Content-Type": "application/x-tar", "Content-Length": str(size),
                         "X-Content-SHA256": sha256},
            )  # fmt: skip
            with self._send(request, "PUT", path) as response:
                response.read(MAX_JSON_BYTES)

    @staticmethod
    def _build_path(node: str, job: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{32}", job):
            raise HubError(f"{job[:40]!r} is not a build's id.", code="invalid_field")
        return f"/api/v1/nodes/{urllib.parse.quote(validate_model_name(node))}/builds/{job}"

    # -- plumbing ------------------------------------------------------------------------
    def _json(self, method: str, path: str, body: bytes | None) -> dict[str, Any]:
        with self._open(method, path, body) as response:
            data = response.read(MAX_JSON_BYTES + 1)
        if len(data) > MAX_JSON_BYTES:
            raise HubError(f"The hub's answer to {method} {path} is over {MAX_JSON_BYTES} bytes.")
        try:
            parsed = json.loads(data)
        except ValueError:
            raise HubError(f"The hub's answer to {method} {path} is not JSON.") from None
        if not isinstance(parsed, dict):
            raise HubError(f"The hub's answer to {method} {path} is not a JSON object.")
        return parsed

    def _open(self, method: str, path: str, body: bytes | None) -> Any:
        # The base URL was checked to be http(s) (settings.http_url).
        request = urllib.request.Request(  # noqa: S310
            self.base_url + path, data=body, method=method,
            headers={"Authorization": f"Token {self.token}", "Accept": "application/json",
                     **({"Content-Type": "application/json"} if body is not None else {})},
        )  # fmt: skip
        return self._send(request, method, path)

    def _send(self, request: urllib.request.Request, method: str, path: str) -> Any:
        try:
            return _OPENER.open(request, timeout=self.timeout_s)
        except urllib.error.HTTPError as exc:
            raise _refusal(method, path, exc) from None
        except (OSError, ValueError) as exc:
            # str(exc) of a URLError names the host, never the header: safe to show.
            raise HubError(
                f"The hub at {self.base_url} did not answer {method} {path}: {exc}"
            ) from None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect would send the token to wherever the hub points; the node does not follow."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def _refusal(method: str, path: str, exc: urllib.error.HTTPError) -> HubError:
    """The hub's own reason (``{"code", "error"}``) when it gave one, else the status."""
    code, reason = f"http_{exc.code}", ""
    try:
        data = json.loads(exc.read(MAX_JSON_BYTES))
        if isinstance(data, dict):
            code = str(data.get("code") or code)[:64]
            reason = str(data.get("error") or data.get("detail") or "")[:500]
    except (OSError, ValueError):
        pass
    finally:
        exc.close()
    if exc.code in (401, 403) and not reason:
        reason = "the node token was refused (revoked, expired, or for another node)"
    return HubError(
        f"The hub refused {method} {path} ({exc.code}): {reason or exc.reason}", exc.code, code
    )


def _save(response: Any, dest: Path, max_bytes: int) -> int:
    """Streams the body into the new file ``dest``, stopping past ``max_bytes``."""
    try:
        return save_stream(response.read, dest, max_bytes)
    except StreamTooLarge:
        raise HubError(
            f"The package is over {max_bytes} bytes; the node stopped reading it.",
            response.status, "too_large",
        ) from None  # fmt: skip
