"""Read a Triton metrics endpoint whose address came from somewhere the hub does not trust.

A node reports its own Triton's metrics URL, so a compromised host can name any address: a
port that never answers, an endpoint that streams gigabytes, a redirect to somewhere else.
:func:`fetch_metrics_text` bounds all of them: http(s) only, no redirects followed, a short
timeout and a size cap. A plain ``host:port`` (what nodes report, as ``TRITON_METRICS_URL``
is written) means ``http://host:port/metrics``, Triton's metrics path.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from model_store.runtime.errors import TritonRequestError, TritonUnavailable

__all__ = ["MAX_METRICS_BYTES", "METRICS_TIMEOUT_S", "MetricsURLRefused", "fetch_metrics_text"]

#: A Triton with a few hundred models writes well under 1 MiB; 8 MiB is a generous ceiling.
MAX_METRICS_BYTES = 8 * 1024 * 1024
METRICS_TIMEOUT_S = 5.0
_CHUNK = 64 * 1024


class MetricsURLRefused(TritonRequestError):
    """The metrics address, or what it answered, is not something the hub will read."""

    code = "metrics_url_refused"


def metrics_url(address: str) -> str:
    """The URL to read for ``address`` (``host:port`` or an http(s) URL); refused otherwise."""
    address = address.strip()
    if "://" not in address:
        address = f"http://{address}"
    parts = urllib.parse.urlsplit(address)
    if parts.scheme not in ("http", "https"):
        raise MetricsURLRefused(f"metrics URL {address[:80]!r}: only http and https are read")
    if not parts.hostname:
        raise MetricsURLRefused(f"metrics URL {address[:80]!r} names no host")
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx then surfaces as an HTTPError


_opener = urllib.request.build_opener(_NoRedirects)


def fetch_metrics_text(
    address: str,
    *,
    timeout: float = METRICS_TIMEOUT_S,
    max_bytes: int = MAX_METRICS_BYTES,
) -> str:
    """The Prometheus text at ``address``, unparsed.

    Raises :class:`MetricsURLRefused` for a non-http(s) address or a body over ``max_bytes``
    (read no further than that), ``TritonRequestError`` for an HTTP error status (a redirect
    included) and ``TritonUnavailable`` when nothing answers within ``timeout``. ``timeout``
    bounds the whole read too, not only each socket wait: a server that trickles bytes is cut.
    """
    url = metrics_url(address)
    deadline = time.monotonic() + timeout
    try:
        with _opener.open(url, timeout=timeout) as resp:
            declared = resp.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                raise MetricsURLRefused(
                    f"metrics at {url} are {int(declared)} bytes; at most {max_bytes} are read"
                )
            body = bytearray()
            while chunk := resp.read(_CHUNK):
                body += chunk
                if len(body) > max_bytes:
                    raise MetricsURLRefused(f"metrics at {url} are over {max_bytes} bytes; refused")
                if time.monotonic() > deadline:
                    raise TritonUnavailable(f"metrics at {url} took over {timeout:g} s; cut")
    except urllib.error.HTTPError as exc:
        raise TritonRequestError(
            f"metrics scrape {url}: HTTP {exc.code}", status=str(exc.code)
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise TritonUnavailable(f"cannot scrape metrics at {url}: {exc}") from exc
    return body.decode("utf-8", errors="replace")
