"""The node's client of the hub API, against a server that answers as the contract says:
reports accepted or refused with the hub's reason, downloads bounded, the token sent only in
its header and never shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.node.conftest import ContractHub, Seen
from workers.node.hub_client import MAX_JSON_BYTES, HubClient, HubError

TOKEN = "node-token-0123456789abcdef"
REPORTS = ("POST", "/api/v1/nodes/b/reports")
TAR = ("GET", "/api/v1/models/mlp/versions/2/package.tar")


def _json(status: int, body: object) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def test_an_accepted_report_gives_the_hubs_protocol_and_interval(contract_hub: ContractHub) -> None:
    contract_hub.routes[REPORTS] = lambda seen: _json(
        200, {"accepted": True, "protocol": 1, "report_every_s": 5}
    )

    answer = HubClient(contract_hub.url, TOKEN).post_report("b", {"protocol": 1})

    assert (answer.protocol, answer.report_every_s) == (1, 5.0)
    (seen,) = contract_hub.seen
    assert seen.headers["Authorization"] == f"Token {TOKEN}"
    assert json.loads(seen.body) == {"protocol": 1}
    assert TOKEN not in seen.path


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (409, {"code": "node_incompatible", "error": "protocol 1 is too old"}, "too old"),
        (401, {"detail": "Unauthorized"}, "Unauthorized"),
        (403, {}, "the node token was refused"),
    ],
)
def test_a_refused_report_carries_the_hubs_reason(
    contract_hub: ContractHub, status: int, body: dict[str, str], expected: str
) -> None:
    contract_hub.routes[REPORTS] = lambda seen: _json(status, body)

    with pytest.raises(HubError) as caught:
        HubClient(contract_hub.url, TOKEN).post_report("b", {})

    assert caught.value.refused and caught.value.status == status
    assert expected in caught.value.message and TOKEN not in caught.value.message
    if status == 409:
        assert caught.value.code == "node_incompatible"


def test_an_answer_too_big_or_not_the_contracts_is_an_error(contract_hub: ContractHub) -> None:
    client = HubClient(contract_hub.url, TOKEN)
    contract_hub.routes[REPORTS] = lambda seen: (200, {}, b"[" * (MAX_JSON_BYTES + 10))
    with pytest.raises(HubError, match="over"):
        client.post_report("b", {})
    contract_hub.routes[REPORTS] = lambda seen: _json(200, {"accepted": False})
    with pytest.raises(HubError, match="not understood"):
        client.post_report("b", {})


def test_a_redirect_is_not_followed_so_the_token_stays_home(contract_hub: ContractHub) -> None:
    contract_hub.routes[REPORTS] = lambda seen: (
        307,
        {"Location": "http://elsewhere.invalid/"},
        b"",
    )

    with pytest.raises(HubError) as caught:
        HubClient(contract_hub.url, TOKEN).post_report("b", {})

    assert caught.value.status == 307
    assert len(contract_hub.seen) == 1


def test_no_answer_is_an_error_that_names_the_hub_not_the_token() -> None:
    client = HubClient("http://127.0.0.1:9", TOKEN, timeout_s=2)

    with pytest.raises(HubError) as caught:
        client.post_report("b", {})

    assert "127.0.0.1:9" in caught.value.message and TOKEN not in caught.value.message
    assert TOKEN not in repr(client)


def test_a_download_is_saved_with_the_announced_hash(
    contract_hub: ContractHub, tmp_path: Path
) -> None:
    payload = b"tar bytes" * 1000
    contract_hub.routes[TAR] = lambda seen: (200, {"X-Content-SHA256": "a" * 64}, payload)

    download = HubClient(contract_hub.url, TOKEN).download_package(
        "mlp", 2, tmp_path / "mlp.tar", max_bytes=1 << 20
    )

    assert download.path.read_bytes() == payload and download.size == len(payload)
    assert download.announced_sha256 == "a" * 64
    assert contract_hub.seen[0].headers["Authorization"] == f"Token {TOKEN}"


def test_a_download_over_the_limit_stops_and_leaves_no_file(
    contract_hub: ContractHub, tmp_path: Path
) -> None:
    client = HubClient(contract_hub.url, TOKEN)
    contract_hub.routes[TAR] = lambda seen: (200, {}, b"x" * 5000)
    with pytest.raises(HubError, match="is 5000 bytes; this node takes at most 4096"):
        client.download_package("mlp", 2, tmp_path / "a.tar", max_bytes=4096)

    def unknown_length(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Length": ""}, b"x" * (3 << 20)

    contract_hub.routes[TAR] = unknown_length
    with pytest.raises(HubError, match="stopped reading"):
        client.download_package("mlp", 2, tmp_path / "a.tar", max_bytes=1 << 20)
    assert not (tmp_path / "a.tar").exists()


def test_a_missing_package_is_the_hubs_404(contract_hub: ContractHub, tmp_path: Path) -> None:
    contract_hub.routes[TAR] = lambda seen: _json(
        404, {"code": "package_missing", "error": "Version 2 has no package."}
    )

    with pytest.raises(HubError, match="no package") as caught:
        HubClient(contract_hub.url, TOKEN).download_package(
            "mlp", 2, tmp_path / "a.tar", max_bytes=4096
        )

    assert caught.value.code == "package_missing" and not (tmp_path / "a.tar").exists()
