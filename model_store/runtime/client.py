"""A thin, typed client for one Triton Inference Server.

``TritonRuntime`` wraps tritonclient's HTTP client (control plane and
inference) and, optionally, its gRPC client (inference). It exists so that the
rest of the product sees plain dicts and numpy arrays, and three exception
types instead of tritonclient's single ``InferenceServerException`` plus
whatever the transport raises:

* ``TritonUnavailable``: nothing answered (refused, reset, timed out);
* ``TritonRequestError``: Triton answered with an error; its message is kept;
* ``is_live``/``is_ready`` return False instead of raising, because they are
  the questions a health check asks.

Triton's repository API (index, load, unload) answers only requests that carry
the hub's key (``model_store.runtime.access``): give it as ``api_key`` and it is
sent on those calls alone; without it, or with a wrong one, they raise
``TritonAccessDenied``.

tritonclient's HTTP client runs on gevent and is not safe to share between
threads (one connection, one gevent hub per thread), while Django and Celery
call us from several threads. Each thread therefore gets its own HTTP client,
created on first use.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from model_store.runtime import access
from model_store.runtime.errors import TritonAccessDenied, TritonRequestError, TritonUnavailable

try:  # gevent.Timeout derives from BaseException, so it has to be named explicitly
    from gevent import Timeout as _GeventTimeout
except ImportError:  # pragma: no cover - gevent comes with tritonclient[http]
    _GeventTimeout = TimeoutError

T = TypeVar("T")

Protocol = Literal["http", "grpc"]

#: Errors that mean "no usable answer came back" on the HTTP transport.
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, DNS, socket timeouts
    http.client.HTTPException,  # geventhttpclient's parse errors / closed connections
    _GeventTimeout,
)

#: gRPC status codes that mean the server was not reached or did not answer in time.
_GRPC_UNAVAILABLE = {"StatusCode.UNAVAILABLE", "StatusCode.DEADLINE_EXCEEDED"}


class TritonRuntime:
    """Client for one Triton server.

    ``http_url``/``grpc_url``/``metrics_url`` are ``host:port`` without scheme,
    as tritonclient expects. ``timeout`` bounds ordinary calls; loads can take
    much longer (the GE backend compiles the model at load time), so they get
    ``load_timeout``. ``api_key`` is the key Triton's restricted repository API
    expects (``TRITON_API_KEY``); never shown in ``repr`` or messages.
    """

    def __init__(
        self,
        http_url: str = "127.0.0.1:8000",
        grpc_url: str | None = None,
        metrics_url: str | None = None,
        timeout: float = 30.0,
        *,
        load_timeout: float = 600.0,
        connection_timeout: float = 5.0,
        api_key: str | None = None,
    ) -> None:
        self.http_url = _strip_scheme(http_url)
        self.grpc_url = _strip_scheme(grpc_url) if grpc_url else None
        self.metrics_url = _strip_scheme(metrics_url) if metrics_url else None
        self.timeout = timeout
        self.load_timeout = load_timeout
        self.connection_timeout = connection_timeout
        # Sent only on repository calls: inference and the rest need no key.
        self._http_key = {access.API_KEY_HEADER: api_key} if api_key else None
        self._grpc_key = {access.GRPC_API_KEY_HEADER: api_key} if api_key else None
        self._local = threading.local()
        self._grpc_lock = threading.Lock()
        self._grpc: Any = None

    def __repr__(self) -> str:
        return (
            f"<TritonRuntime http={self.http_url} grpc={self.grpc_url} metrics={self.metrics_url}>"
        )

    # ----------------------------------------------------------------- clients

    def _new_http_client(self, network_timeout: float) -> httpclient.InferenceServerClient:
        return httpclient.InferenceServerClient(
            self.http_url,
            connection_timeout=min(self.connection_timeout, network_timeout),
            network_timeout=network_timeout,
        )

    def _http(self) -> httpclient.InferenceServerClient:
        """This thread's HTTP client (one keep-alive connection per thread)."""
        client: httpclient.InferenceServerClient | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self._new_http_client(self.timeout)
        return client

    def _grpc_client(self) -> Any:
        if self.grpc_url is None:
            raise TritonUnavailable("no gRPC address configured for this Triton runtime")
        with self._grpc_lock:
            if self._grpc is None:
                import tritonclient.grpc as grpcclient

                # gRPC channels are thread-safe, so one client serves all threads.
                self._grpc = grpcclient.InferenceServerClient(self.grpc_url)
            return self._grpc

    def close(self) -> None:
        """Close this thread's HTTP connection and the shared gRPC channel.

        Worth calling: Triton 2.5x waits, on shutdown, for open HTTP connections
        (idle keep-alive ones included) until ``--exit-timeout-secs`` expires.
        Other threads' connections close when those threads end.
        """
        self._drop_http_client()
        with self._grpc_lock:
            if self._grpc is not None:
                self._grpc.close()
                self._grpc = None

    def __enter__(self) -> TritonRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _translate(self, what: str, url: str) -> Iterator[None]:
        """Turn tritonclient and transport exceptions into ours."""
        try:
            yield
        except InferenceServerException as exc:
            status = str(exc.status()) if exc.status() is not None else None
            message = exc.message() or str(exc)
            # Before the UNAVAILABLE test: that is the status Triton's gRPC refusal comes with.
            if access.is_refusal(message):
                raise TritonAccessDenied(
                    f"{what}: Triton at {url} refused it: its repository API needs the hub's "
                    "key, and TRITON_API_KEY is missing or does not match the key Triton was "
                    f"started with ({message})",
                    status=status,
                    triton_message=message,
                ) from exc
            if status in _GRPC_UNAVAILABLE:
                raise TritonUnavailable(
                    f"{what}: Triton at {url} did not answer: {message}"
                ) from exc
            raise TritonRequestError(
                f"{what}: {message}", status=status, triton_message=message
            ) from exc
        except _TRANSPORT_ERRORS as exc:
            # A dead pooled connection would otherwise be reused and fail again.
            self._drop_http_client()
            raise TritonUnavailable(
                f"{what}: cannot reach Triton at {url}: {exc or type(exc).__name__}"
            ) from exc

    def _drop_http_client(self) -> None:
        client = getattr(self._local, "client", None)
        self._local.client = None
        if client is not None:
            # The client is being thrown away; a failure to close it changes nothing.
            with contextlib.suppress(Exception):
                client.close()

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        with self._translate(what, self.http_url):
            return fn()

    # ----------------------------------------------------------------- health and metadata

    def is_live(self) -> bool:
        """True when the server answers ``/v2/health/live``; never raises."""
        try:
            return bool(self._call("live", lambda: self._http().is_server_live()))
        except (TritonUnavailable, TritonRequestError):
            return False

    def is_ready(self) -> bool:
        """True when the server answers ``/v2/health/ready`` with 200; never raises."""
        try:
            return bool(self._call("ready", lambda: self._http().is_server_ready()))
        except (TritonUnavailable, TritonRequestError):
            return False

    def server_metadata(self) -> dict[str, Any]:
        """``{"name", "version", "extensions": [...]}``."""
        meta = self._call("server metadata", lambda: self._http().get_server_metadata())
        return {
            "name": meta.get("name", ""),
            "version": meta.get("version", ""),
            "extensions": list(meta.get("extensions", [])),
        }

    # ----------------------------------------------------------------- repository

    def repository_index(self, protocol: Protocol = "http") -> list[dict[str, str]]:
        """Every model Triton knows in the repository, with ``name``, ``version``,
        ``state`` (READY, UNAVAILABLE, LOADING, UNLOADING, or "" if never loaded)
        and ``reason`` (why it is not READY, "" otherwise). Over HTTP unless
        ``protocol="grpc"`` (the diagnostics ask both ports)."""
        if protocol == "grpc":
            with self._translate("repository index", self.grpc_url or ""):
                answer = self._grpc_client().get_model_repository_index(
                    headers=self._grpc_key, as_json=True, client_timeout=self.timeout
                )
            rows = answer.get("models", [])
        else:
            rows = self._call(
                "repository index",
                lambda: self._http().get_model_repository_index(headers=self._http_key),
            )
        return [
            {
                "name": str(row.get("name", "")),
                "version": str(row.get("version", "")),
                "state": str(row.get("state", "")),
                "reason": str(row.get("reason", "")),
            }
            for row in rows
        ]

    def load(self, name: str, config: dict[str, Any] | None = None) -> None:
        """Load or reload ``name`` and return when Triton has finished trying.

        ``config`` is a ModelConfig as JSON-able dict (field names as in
        model_config.proto, e.g. ``{"version_policy": {"specific": {"versions":
        [2]}}}``); Triton then uses it instead of config.pbtxt. Raises
        ``TritonRequestError`` with Triton's reason when the load fails.
        """
        config_json = json.dumps(config) if config is not None else None
        if self.grpc_url is not None:
            # Over gRPC when we can: Triton 2.51 holds some HTTP inference connections for the
            # whole of an HTTP load call, so clients' requests stall for the load's duration
            # (measured in bench/switch_latency.py); a gRPC load holds none.
            with self._translate(f"load model '{name}'", self.grpc_url):
                self._grpc_client().load_model(
                    name,
                    headers=self._grpc_key,
                    config=config_json,
                    client_timeout=self.load_timeout,
                )
            return

        def load() -> None:
            # A short-lived client of its own: loads need a much longer network
            # timeout than every other call, and a second pooled connection per
            # thread would only delay Triton's shutdown (see close()).
            with self._new_http_client(self.load_timeout) as client:
                client.load_model(name, headers=self._http_key, config=config_json)

        self._call(f"load model '{name}'", load)

    def unload(self, name: str, unload_dependents: bool = False) -> None:
        """Ask Triton to unload ``name``.

        Returns at once: Triton answers before the model is gone (the index
        shows UNLOADING for a moment, then UNAVAILABLE with reason "unloaded").
        """
        self._call(
            f"unload model '{name}'",
            lambda: self._http().unload_model(
                name, headers=self._http_key, unload_dependents=unload_dependents
            ),
        )

    # ----------------------------------------------------------------- per model

    def model_ready(self, name: str, version: str = "") -> bool:
        """True when that model (version) is READY; raises only if Triton is unreachable."""
        return bool(
            self._call(
                f"model '{name}' ready",
                lambda: self._http().is_model_ready(name, model_version=str(version)),
            )
        )

    def model_metadata(self, name: str, version: str = "") -> dict[str, Any]:
        """Model metadata: ``name``, ``versions``, ``platform``, ``inputs``, ``outputs``."""
        return dict(
            self._call(
                f"metadata of model '{name}'",
                lambda: self._http().get_model_metadata(name, model_version=str(version)),
            )
        )

    def model_config(self, name: str) -> dict[str, Any]:
        """The effective ModelConfig of a loaded model, as JSON."""
        return dict(
            self._call(f"config of model '{name}'", lambda: self._http().get_model_config(name))
        )

    def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        """``{"model_stats": [...]}`` for one model (version) or for all (``name=""``)."""
        return dict(
            self._call(
                "statistics",
                lambda: self._http().get_inference_statistics(name, model_version=str(version)),
            )
        )

    # ----------------------------------------------------------------- inference

    def infer(
        self,
        name: str,
        inputs: dict[str, np.ndarray],
        outputs: list[str] | None = None,
        version: str = "",
        protocol: Protocol = "http",
    ) -> dict[str, np.ndarray]:
        """Run one inference request and return ``{output name: array}``.

        ``outputs=None`` asks for every output the model produces. Arrays of
        Python strings are sent as Triton BYTES.
        """
        prepared = {key: _as_sendable(key, value) for key, value in inputs.items()}
        if protocol == "http":
            return self._infer_http(name, prepared, outputs, str(version))
        if protocol == "grpc":
            return self._infer_grpc(name, prepared, outputs, str(version))
        raise ValueError(f"unknown protocol {protocol!r}; use 'http' or 'grpc'")

    def _infer_http(
        self,
        name: str,
        inputs: dict[str, np.ndarray],
        outputs: list[str] | None,
        version: str,
    ) -> dict[str, np.ndarray]:
        tensors = []
        for key, array in inputs.items():
            tensor = httpclient.InferInput(key, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_data_from_numpy(array, binary_data=True)
            tensors.append(tensor)
        requested = (
            [httpclient.InferRequestedOutput(o, binary_data=True) for o in outputs]
            if outputs
            else None
        )
        with self._translate(f"infer model '{name}'", self.http_url):
            result = self._http().infer(name, tensors, model_version=version, outputs=requested)
            names = outputs or [o["name"] for o in result.get_response().get("outputs", [])]
            return {o: result.as_numpy(o) for o in names}

    def _infer_grpc(
        self,
        name: str,
        inputs: dict[str, np.ndarray],
        outputs: list[str] | None,
        version: str,
    ) -> dict[str, np.ndarray]:
        import tritonclient.grpc as grpcclient

        client = self._grpc_client()
        tensors = []
        for key, array in inputs.items():
            tensor = grpcclient.InferInput(key, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        requested = [grpcclient.InferRequestedOutput(o) for o in outputs] if outputs else None
        with self._translate(f"infer model '{name}'", self.grpc_url or ""):
            result = client.infer(
                name, tensors, model_version=version, outputs=requested, client_timeout=self.timeout
            )
            names = outputs or [o.name for o in result.get_response().outputs]
            return {o: result.as_numpy(o) for o in names}

    # ----------------------------------------------------------------- metrics

    def scrape_metrics(self) -> str:
        """The Prometheus text from ``http://<metrics_url>/metrics``, unparsed."""
        if self.metrics_url is None:
            raise TritonUnavailable("no metrics address configured for this Triton runtime")
        url = f"http://{self.metrics_url}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as resp:
                return str(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise TritonRequestError(
                f"metrics scrape {url}: HTTP {exc.code}", status=str(exc.code)
            ) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise TritonUnavailable(f"cannot scrape metrics at {url}: {exc}") from exc


def _strip_scheme(url: str) -> str:
    """tritonclient wants ``host:port``; accept ``http://host:port/`` too."""
    for scheme in ("http://", "https://", "grpc://"):
        if url.startswith(scheme):
            url = url[len(scheme) :]
    return url.rstrip("/")


def _as_sendable(name: str, array: Any) -> np.ndarray:
    """A numpy array whose dtype Triton understands (str arrays become BYTES)."""
    array = np.asarray(array)
    if array.dtype.kind == "U":
        encoded = [s.encode("utf-8") for s in array.ravel().tolist()]
        array = np.array(encoded, dtype=np.object_).reshape(array.shape)
    if np_to_triton_dtype(array.dtype) is None:
        raise ValueError(f"input '{name}': numpy dtype {array.dtype} has no Triton data type")
    return array
