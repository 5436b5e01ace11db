"""The pure parts of the RPC layer: the envelope, the timestamp tracker, the retry
policy, error codes, addresses and the bind rule."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kudusql.cluster.addresses import HostPort, parse_host_port
from kudusql.cluster.errors import MalformedMessage, ServiceUnavailable, error_code, make_error
from kudusql.cluster.messages import (
    ErrorResponse,
    Ping,
    PingResponse,
    Request,
    Response,
    decode,
    encode,
    message,
)
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.security import TlsFiles, check_bind, secret_matches
from kudusql.cluster.timestamps import LatestObserved
from kudusql.common.errors import (
    CorruptionError,
    DatabaseError,
    KuduNotFound,
    ProgrammingError,
)


@dataclass(frozen=True)
class Tablet:
    tablet_id: str
    schema_version: int


@message("test_msg_report")
@dataclass(frozen=True)
class Report(Request):
    is_incremental: bool
    tablets: list[Tablet]
    removed: list[str] = field(default_factory=list)
    load: float | None = None


def test_envelope_round_trip_with_nested_records() -> None:
    report = Report(True, [Tablet("t1", 3)], ["t0"], 0.5)
    data = encode(report, 42)
    assert json.loads(data) == {
        "v": 1,
        "type": "test_msg_report",
        "body": {
            "is_incremental": True,
            "tablets": [{"tablet_id": "t1", "schema_version": 3}],
            "removed": ["t0"],
            "load": 0.5,
        },
        "timestamp": 42,
    }
    envelope = decode(data)
    assert envelope.message == report and envelope.timestamp == 42
    assert decode(encode(Report(False, []))).message == Report(False, [])
    assert decode(encode(Ping())).timestamp is None


def _raw(**overrides: object) -> bytes:
    envelope: dict[str, object] = {"v": 1, "type": "ping", "body": {}, "timestamp": None}
    envelope.update(overrides)
    return json.dumps(envelope).encode()


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1]", "JSON object"),
        (_raw(v=2), "version 2 is not supported"),
        (_raw(type="no_such_call"), "unknown message type 'no_such_call'"),
        (_raw(body={"x": 1}), "unknown field(s) x"),
        (_raw(timestamp=-1), "64-bit HybridTime"),
        (_raw(timestamp=True), "64-bit HybridTime"),
        (_raw(type="ping_response", body={"server_kind": "m", "server_uuid": "u"}), "timestamp"),
        (_raw(type="ping_response", body={"server_kind": "m"}, timestamp=1), "missing field"),
        (_raw(type="test_msg_report", body={"is_incremental": 1, "tablets": []}), "bool"),
        (
            _raw(type="test_msg_report", body={"is_incremental": True, "tablets": [{"x": 1}]}),
            "tablets[0]",
        ),
        (b'{"v":1,"type":"ping","body":{},"timestamp":NaN}', "not valid JSON"),
        (b'{"v":1,"type":"ping","body":{}}', "missing: timestamp"),
    ],
)
def test_decoding_is_strict(data: bytes, says: str) -> None:
    with pytest.raises(MalformedMessage) as info:
        decode(data)
    assert says in str(info.value)


def test_a_response_always_carries_a_timestamp() -> None:
    with pytest.raises(ValueError, match=r"timestamp"):
        encode(PingResponse("master", "u"))
    assert Ping.RESPONSE is PingResponse and Ping.IDEMPOTENT
    assert not Report.IDEMPOTENT and Report.RESPONSE is Response


def test_latest_observed_only_moves_forward() -> None:
    latest = LatestObserved()
    assert latest.value is None
    for ts, expected in [(None, None), (10, 10), (5, 10), (None, 10), (11, 11)]:
        latest.observe(ts)
        assert latest.value == expected


def test_error_codes_round_trip_to_the_same_class() -> None:
    for exc in [ProgrammingError("p"), KuduNotFound("t"), ServiceUnavailable("s")]:
        response = ErrorResponse.of(exc)
        back = make_error(response.code, response.message)
        assert type(back) is type(exc) and str(back) == str(exc)
    corrupt = CorruptionError("/d/f", 7, "bad crc")
    back = make_error(error_code(corrupt), str(corrupt))
    assert type(back) is DatabaseError and "offset 7" in str(back)
    assert type(make_error("FromTheFuture", "x")) is DatabaseError


def test_backoff_grows_with_jitter_and_stops_at_the_deadline() -> None:
    policy = RetryPolicy(max_attempts=5, initial_backoff=0.1, max_backoff=0.4, deadline=2.0)
    rng = random.Random(7)
    waits = [policy.backoff(n, rng) for n in range(1, 6)]
    for n, wait in enumerate(waits, start=1):
        ceiling = min(0.4, 0.1 * 2 ** (n - 1))
        assert ceiling / 2 <= wait <= ceiling
    assert policy.next_wait(5, 0.0, rng) is None  # no attempt left
    assert policy.next_wait(1, 1.99, rng) is None  # past the deadline
    assert policy.next_wait(1, 0.0, rng) is not None
    assert len({RetryPolicy().backoff(3, random.Random(s)) for s in range(5)}) == 5
    with pytest.raises(ProgrammingError):
        RetryPolicy(max_attempts=0)


def test_addresses() -> None:
    assert parse_host_port("127.0.0.1:7051") == HostPort("127.0.0.1", 7051)
    assert parse_host_port("localhost:0").is_loopback
    assert not parse_host_port("10.0.0.1:7051").is_loopback
    assert not parse_host_port("example.com:1").is_loopback
    for bad in ["7051", "host:", "host:70000", "[::1]:7051", ":1"]:
        with pytest.raises(ProgrammingError, match=r"HOST:PORT|out of range"):
            parse_host_port(bad)


def test_a_reachable_address_needs_a_secret_and_tls() -> None:
    tls = TlsFiles(Path("c"), Path("k"))
    check_bind(parse_host_port("127.0.0.1:0"), secret=None, tls=None)
    check_bind(parse_host_port("0.0.0.0:7051"), secret="s", tls=tls)
    with pytest.raises(ProgrammingError, match=r"a cluster secret and TLS"):
        check_bind(parse_host_port("0.0.0.0:7051"), secret=None, tls=None)
    with pytest.raises(ProgrammingError, match=r"needs TLS"):
        check_bind(parse_host_port("192.168.1.5:7051"), secret="s", tls=None)


def test_secret_comparison() -> None:
    assert secret_matches("abc", "abc") and secret_matches("abc", b"abc")
    assert not secret_matches("abc", "abd")
    assert not secret_matches("abc", None)
    assert not secret_matches("abc", "")
