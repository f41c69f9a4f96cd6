"""Security finding 7 (transport): the TLS proxy of docker-compose.yml, run for real.

deploy/proxy/entrypoint.sh starts Caddy (the one on PATH: Debian's 2.6 here; compose runs the
caddy:2 image) on deploy/proxy/Caddyfile, unchanged: only the environment differs from
compose's. The site is 127.0.0.1 on free ports with Caddy's internal CA (`tls internal`, as
when the operator gives no certificate); the client trusts the root Caddy generated in its data
directory. Behind it, uvicorn (as in the web service: proxy headers trusted from any peer) serves
a small ASGI app that reports what arrives.

Checked: a websocket passes and echoes; a 32 MiB PUT (the hub's upload chunk) is streamed, the
upstream sees its first bytes while the client is still sending, and all bytes arrive intact;
a streamed response flows; a request that takes 5 s is not cut; X-Forwarded-Proto: https and
the real client address reach the upstream even when the client sends its own; plain HTTP
is redirected to the HTTPS port; an operator's own certificate files are served.

Long requests: the product has requests of minutes (a `?wait=true` switch waits up to 210 s, a
slow upload or log download longer). A test that waits that long is too slow for the suite,
so one 5 s request proves that nothing short cuts in, and the configuration Caddy derives from
the Caddyfile (`caddy adapt`) is checked to contain no timeout on reading the request body,
writing the response or waiting for the upstream: with no such setting, neither Caddy's
server nor its reverse proxy has a deadline for them (Caddy's defaults limit only the request
headers and idle keep-alive connections).
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import http.client
import ipaddress
import json
import os
import shutil
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from websockets.sync.client import connect

from model_store import spawn
from tests.fixtures.ports import free_ports
from tests.fixtures.waiting import wait_until
from webapp.env import env_bytes

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CADDYFILE = ROOT / "deploy" / "proxy" / "Caddyfile"
ENTRYPOINT = ROOT / "deploy" / "proxy" / "entrypoint.sh"
ENV_EXAMPLE = ROOT / "deploy" / "production.env.example"
UPLOAD_CHUNK = 32 << 20  # a chunked upload's PUT body (UPLOAD_CHUNK_BYTES, default)
PIECE = 1 << 20
SLOW_SECONDS = 5.0


def caddy_binary() -> str:
    caddy = shutil.which("caddy")
    if caddy:
        return caddy
    # In CI a missing Caddy is a broken CI set-up, not a reason to skip.
    if os.environ.get("CI") == "true":
        pytest.fail("caddy is not installed; .ci/run installs it with apt-get")
    pytest.skip("no Caddy: `apt-get install -y caddy` (CI does)")


def free_port() -> int:
    return free_ports(1)[0]


# --- the upstream: uvicorn with an app that reports what reaches it ---------------------------


@dataclass
class Upstream:
    port: int = field(default_factory=free_port)
    body_started: threading.Event = field(default_factory=threading.Event)
    body_received: int = 0
    release_stream: threading.Event = field(default_factory=threading.Event)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await self._echo(scope, receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _echo(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            # The scheme uvicorn derived from the proxy's X-Forwarded-Proto: wss.
            await send({"type": "websocket.send", "text": f"{scope['scheme']}:{message['text']}"})

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope["path"]
        if path == "/upload":
            digest, length = hashlib.sha256(), 0
            while True:
                message = await receive()
                chunk = message.get("body", b"")
                if chunk:
                    self.body_started.set()
                    digest.update(chunk)
                    length += len(chunk)
                    self.body_received = length
                if not message.get("more_body"):
                    break
            declared = dict(scope["headers"]).get(b"content-length", b"").decode()
            body = {"length": length, "sha256": digest.hexdigest(), "content_length": declared}
            await self._json(send, body)
        elif path == "/slow":
            seconds = float(parse_qs(scope["query_string"].decode())["seconds"][0])
            await asyncio.sleep(seconds)
            await self._json(send, {"slept": seconds})
        elif path == "/stream":
            # With a Content-Length, as a file download has one: Caddy passes such a body on
            # at once only because of `flush_interval -1` (a chunked one it flushes anyway).
            size = str(len(b"first\nsecond\n")).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-length", size)],
                }
            )
            await send({"type": "http.response.body", "body": b"first\n", "more_body": True})
            # The rest only once the client has the first line: buffering would deadlock here.
            await asyncio.to_thread(self.release_stream.wait, 15)
            await send({"type": "http.response.body", "body": b"second\n"})
        else:
            seen = {k.decode(): v.decode() for k, v in scope["headers"]}
            client = scope["client"][0] if scope.get("client") else None
            await self._json(send, {"headers": seen, "scheme": scope["scheme"], "client": client})

    @staticmethod
    async def _json(send: Any, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    app = Upstream()
    # The web service's uvicorn flags that matter here (docker-compose.yml).
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=app.port,
        http="httptools",
        ws="websockets-sansio",
        lifespan="off",
        proxy_headers=True,
        forwarded_allow_ips="*",
        timeout_keep_alive=60,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="proxy-test-upstream", daemon=True)
    thread.start()

    def started() -> bool:
        assert thread.is_alive(), "the upstream stopped"
        return bool(server.started)

    wait_until(started, 15, message="the upstream did not start")
    try:
        yield app
    finally:
        app.release_stream.set()
        server.should_exit = True
        thread.join(timeout=10)


# --- the proxy ----------------------------------------------------------------------------------


@dataclass
class Proxy:
    https_port: int
    http_port: int
    health_port: int
    context: ssl.SSLContext
    log: Path

    def https(self, timeout: float = 30) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "127.0.0.1", self.https_port, context=self.context, timeout=timeout
        )


def _get(connection: http.client.HTTPConnection, path: str, **headers: str) -> Any:
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        assert response.status == 200, (response.status, response.read())
        return json.loads(response.read())
    finally:
        connection.close()


@contextmanager
def running_proxy(
    home: Path, upstream_port: int, tls: str, ca_file: Path | None
) -> Iterator[Proxy]:
    """deploy/proxy/entrypoint.sh with the Caddyfile, on free loopback ports."""
    caddy = caddy_binary()
    https_port, http_port, health_port = free_port(), free_port(), free_port()
    data = home / "data"
    env = {
        "PATH": f"{Path(caddy).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "XDG_DATA_HOME": str(data),
        "XDG_CONFIG_HOME": str(home / "config"),
        "HUB_CADDYFILE": str(CADDYFILE),
        "HUB_SITE_ADDRESS": "127.0.0.1",
        "HUB_TLS": tls,
        "HUB_UPSTREAM": f"127.0.0.1:{upstream_port}",
        "HUB_PROXY_BIND": "127.0.0.1",
        "HUB_PROXY_HTTPS_PORT": str(https_port),
        "HUB_PROXY_HTTP_PORT": str(http_port),
        "HUB_PUBLIC_HTTPS_PORT": str(https_port),
        "HUB_PROXY_HEALTH_PORT": str(health_port),
    }
    log = home / "caddy.log"
    with log.open("wb") as out:
        proc = spawn.start(
            ["sh", str(ENTRYPOINT)],
            env=env,
            cwd=home,
            stdout=out,
            stderr=subprocess.STDOUT,
            die_with_parent=signal.SIGTERM,
        )
    try:
        # The internal CA's root appears in the data directory once Caddy has made it.
        root = ca_file or data / "caddy" / "pki" / "authorities" / "local" / "root.crt"
        problem = "not started"

        def answering() -> Proxy | None:
            nonlocal problem
            if proc.poll() is not None:
                pytest.fail(f"caddy exited ({proc.returncode}):\n{log.read_text()}")
            try:
                context = ssl.create_default_context(cafile=str(root))
                proxy = Proxy(https_port, http_port, health_port, context, log)
                _get(proxy.https(timeout=5), "/ready")
                return proxy
            except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
                problem = repr(exc)
                return None

        yield wait_until(
            answering, 20, interval=0.2,
            message=lambda: f"the proxy did not answer over HTTPS ({problem}):\n{log.read_text()}",
        )  # fmt: skip
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def proxy(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    # Empty: the entrypoint makes it `internal` (compose already does: ${HUB_TLS:-internal}).
    with running_proxy(tmp_path_factory.mktemp("caddy"), upstream.port, "", None) as running:
        yield running


# --- what the proxy must do ---------------------------------------------------------------------


def test_the_log_says_the_certificate_is_self_signed(proxy: Proxy) -> None:
    log = proxy.log.read_text()
    assert "hub-proxy: no certificate configured (HUB_TLS=internal)" in log
    assert "SELF-SIGNED" in log


def test_a_websocket_passes_and_echoes(proxy: Proxy) -> None:
    url = f"wss://127.0.0.1:{proxy.https_port}/ws/live/"
    with connect(url, ssl=proxy.context, open_timeout=10, close_timeout=5) as websocket:
        for text in ("hello", "again"):
            websocket.send(text)
            assert websocket.recv(timeout=10) == f"wss:{text}"


def test_a_32_mib_put_is_streamed_to_the_upstream_not_buffered(
    proxy: Proxy, upstream: Upstream
) -> None:
    body = os.urandom(UPLOAD_CHUNK)
    upstream.body_started.clear()
    upstream.body_received = 0
    with closing(proxy.https()) as connection:
        connection.putrequest("PUT", "/upload")
        connection.putheader("Content-Type", "application/octet-stream")
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders()
        seen_before_the_end: list[int] = []
        for offset in range(0, len(body), PIECE):
            connection.send(body[offset : offset + PIECE])
            if offset == 4 * PIECE:
                # 27 MiB still unsent: a buffering proxy would have passed nothing on yet.
                assert upstream.body_started.wait(timeout=10), "the upstream got no bytes yet"
            if offset + PIECE < len(body):
                seen_before_the_end.append(upstream.body_received)
                time.sleep(0.02)  # a slow client
        response = connection.getresponse()
        assert response.status == 200, response.read()
        received = json.loads(response.read())
        assert received == {
            "length": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
            # Passed on as the client declared it, not re-chunked: the hub answers 411 to a body
            # of unknown length.
            "content_length": str(len(body)),
        }
    assert 0 < seen_before_the_end[-1] < len(body)
    # The upstream's count grew while the client was still sending.
    assert len({n for n in seen_before_the_end if n}) > 3


def test_a_streamed_response_flows(proxy: Proxy, upstream: Upstream) -> None:
    upstream.release_stream.clear()
    with closing(proxy.https(timeout=10)) as connection:
        connection.request("GET", "/stream")
        response = connection.getresponse()
        assert response.status == 200
        first = b""
        while not first.endswith(b"\n"):
            piece = response.read1(64)
            assert piece, "the stream ended early"
            first += piece
        assert first == b"first\n"
        upstream.release_stream.set()
        assert response.read() == b"second\n"


def test_a_slow_request_is_not_cut(proxy: Proxy) -> None:
    started = time.monotonic()
    answer = _get(proxy.https(timeout=60), f"/slow?seconds={SLOW_SECONDS}")
    assert answer == {"slept": SLOW_SECONDS}
    assert time.monotonic() - started >= SLOW_SECONDS


def test_x_forwarded_proto_https_and_the_real_client_reach_the_upstream(proxy: Proxy) -> None:
    seen = _get(
        proxy.https(),
        "/headers",
        **{"X-Forwarded-Proto": "http", "X-Forwarded-For": "203.0.113.9"},
    )
    # Caddy replaces what the client claimed; uvicorn (trusting the proxy) uses it.
    assert seen["headers"]["x-forwarded-proto"] == "https"
    assert seen["headers"]["x-forwarded-for"] == "127.0.0.1"
    assert seen["scheme"] == "https"
    assert seen["client"] == "127.0.0.1"
    # The Host header is kept: Django checks it against ALLOWED_HOSTS.
    assert seen["headers"]["host"] == f"127.0.0.1:{proxy.https_port}"


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_plain_http_is_redirected_to_the_https_port(proxy: Proxy, method: str) -> None:
    with closing(
        http.client.HTTPConnection("127.0.0.1", proxy.http_port, timeout=10)
    ) as connection:
        connection.request(
            method, "/models/mlp/?tab=versions", headers={"Host": "hub.example.test"}
        )
        response = connection.getresponse()
        assert response.status == 308
        expected = f"https://hub.example.test:{proxy.https_port}/models/mlp/?tab=versions"
        assert response.getheader("Location") == expected


def test_the_health_site_answers_on_loopback(proxy: Proxy) -> None:
    with closing(
        http.client.HTTPConnection("127.0.0.1", proxy.health_port, timeout=10)
    ) as connection:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, b"ok")


# --- the configuration Caddy makes of the Caddyfile, as compose runs it ----------------------


def _adapt(**env: str) -> dict[str, Any]:
    caddy = caddy_binary()
    done = spawn.run(
        [caddy, "adapt", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = json.loads(done.stdout)
    return config


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key, value
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield path, str(index), value
            yield from _walk(value, f"{path}/{index}")


def _handlers(config: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [v for _, k, v in _walk(config) if isinstance(v, dict) and v.get("handler") == name]


COMPOSE_ENV = {
    # What docker-compose.yml gives the proxy, with an operator's certificate.
    "HUB_SITE_ADDRESS": "hub.example.internal, hub",
    "HUB_TLS": "/certs/cert.pem /certs/key.pem",
    "HUB_UPSTREAM": "web:8080",
    "HUB_PUBLIC_HTTPS_PORT": "443",
    "HUB_PROXY_MAX_BODY": "5GB",
}


def test_the_caddyfile_sets_no_timeout_that_cuts_long_requests() -> None:
    config = _adapt(**COMPOSE_ENV)
    timeouts = [(path, key, value) for path, key, value in _walk(config) if "timeout" in key]
    # The only one: idle connections to the upstream close before uvicorn closes them (60 s).
    assert len(timeouts) == 1, timeouts
    [(path, key, value)] = timeouts
    assert (key, value) == ("idle_timeout", 30 * 10**9)
    assert path.endswith("/transport/keep_alive")
    for handler in _handlers(config, "reverse_proxy"):
        assert handler["flush_interval"] == -1
        assert "stream_timeout" not in handler


def test_the_caddyfile_as_compose_runs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _adapt(**COMPOSE_ENV)
    servers = config["apps"]["http"]["servers"]
    listens = {address for server in servers.values() for address in server["listen"]}
    assert listens == {":443", ":80", "127.0.0.1:8081"}
    assert config["admin"] == {"disabled": True}
    assert config["apps"]["pki"]["certificate_authorities"]["local"]["install_trust"] is False
    assert all(server.get("protocols") == ["h1", "h2"] for server in servers.values())
    (proxy,) = _handlers(config, "reverse_proxy")
    assert proxy["upstreams"] == [{"dial": "web:8080"}]
    # HUB_TLS expanded to two words: the operator's certificate and key.
    files = config["apps"]["tls"]["certificates"]["load_files"]
    assert [(f["certificate"], f["key"]) for f in files] == [("/certs/cert.pem", "/certs/key.pem")]
    hosts = [v for _, k, v in _walk(servers) if k == "host"]
    assert ["hub.example.internal", "hub"] in hosts
    # The body cap stays above the largest upload the hub accepts (the example's setting).
    (limit,) = _handlers(config, "request_body")
    upload_max = next(
        line.partition("=")[2]
        for line in ENV_EXAMPLE.read_text().splitlines()
        if line.startswith("UPLOAD_MAX_BYTES=")
    )
    monkeypatch.setenv("UPLOAD_MAX_BYTES", upload_max)
    assert limit["max_size"] > env_bytes("UPLOAD_MAX_BYTES", default=0) + (1 << 20)


# --- the operator's own certificate -------------------------------------------------------------


def _self_signed(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hub-proxy-test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_file.chmod(0o600)
    return cert_file, key_file


def test_the_operators_certificate_is_served(upstream: Upstream, tmp_path: Path) -> None:
    cert_file, key_file = _self_signed(tmp_path)
    tls = f"{cert_file} {key_file}"
    with running_proxy(tmp_path, upstream.port, tls, ca_file=cert_file) as running:
        # running_proxy's handshake trusted our certificate alone, so it is what Caddy serves.
        assert "serving the configured certificate and key" in running.log.read_text()
        assert _get(running.https(), "/headers")["scheme"] == "https"
