"""Typed control messages and the envelope that carries them (wire format: FORMAT.md).

A message is a frozen dataclass registered under a wire type name with ``@message``.
Its fields are JSON values: ``int``, ``float``, ``str``, ``bool``, ``None`` (in an
``X | None``), ``list[X]``, ``dict[str, X]`` and nested dataclasses of the same. Every
message travels in one envelope::

    {"v": 1, "type": "ping", "body": {...}, "timestamp": 7170000000000000000}

``timestamp`` is a HybridTime: on a request, the largest the client has observed (or
null); on a response, the server's clock when it answered (never null).

Decoding is strict: bad JSON, another version, an unknown type, a missing or extra key,
or a value of the wrong type raises ``MalformedMessage`` naming what is wrong. A
request names its response type, and whether a retry of it is harmless
(``IDEMPOTENT``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import pyarrow as pa

from kudusql.cluster.errors import MalformedMessage, error_code
from kudusql.common.errors import Error

__all__ = [
    "PROTOCOL_VERSION",
    "Envelope",
    "ErrorResponse",
    "GetResponse",
    "Message",
    "Ping",
    "PingResponse",
    "Request",
    "Response",
    "decode",
    "encode",
    "message",
    "message_types",
]

#: The envelope's version. A change to the envelope or to an existing message's fields
#: is a new version; a new message type is not.
PROTOCOL_VERSION = 1

#: The largest HybridTime (64 bits, unsigned).
_MAX_TIMESTAMP = (1 << 64) - 1


@dataclass(frozen=True)
class Message:
    """A message with a registered wire ``TYPE``."""

    TYPE: ClassVar[str] = ""


@dataclass(frozen=True)
class Response(Message):
    """A server's answer; its envelope always carries the server's timestamp."""


@dataclass(frozen=True)
class Request(Message):
    """A client's call. ``RESPONSE`` is the type of a successful answer; ``IDEMPOTENT``
    says that running it twice has the effect of running it once (only such calls are
    retried)."""

    RESPONSE: ClassVar[type[Response]] = Response
    IDEMPOTENT: ClassVar[bool] = False


_REGISTRY: dict[str, type[Message]] = {}

M = TypeVar("M", bound=type[Message])


def message(type_name: str) -> Callable[[M], M]:
    """Register a message dataclass under its wire type name (unique, never reused)."""

    def register(cls: M) -> M:
        if type_name in _REGISTRY:
            raise ValueError(f"message type {type_name!r} is registered twice")
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a dataclass")
        cls.TYPE = type_name
        _REGISTRY[type_name] = cls
        return cls

    return register


def message_types() -> dict[str, type[Message]]:
    """Every registered message type by wire name (Flight's ``list_actions``)."""
    return dict(_REGISTRY)


@message("error")
@dataclass(frozen=True)
class ErrorResponse(Response):
    """A call failed: ``code`` names the error's class (``errors.py``), ``message`` is
    the text the user sees."""

    code: str
    message: str

    @classmethod
    def of(cls, exc: Error) -> ErrorResponse:
        return cls(code=error_code(exc), message=str(exc))


@message("get_response")
@dataclass(frozen=True)
class GetResponse(Response):
    """A do_get stream started; it rides on the stream's first batch (the answer is the
    data, the envelope brings the server's timestamp)."""


@message("ping_response")
@dataclass(frozen=True)
class PingResponse(Response):
    """A server is up: its kind (``master``, ``tablet server``) and its uuid."""

    server_kind: str
    server_uuid: str


@message("ping")
@dataclass(frozen=True)
class Ping(Request):
    """Is the server up? Changes nothing."""

    RESPONSE: ClassVar[type[Response]] = PingResponse
    IDEMPOTENT: ClassVar[bool] = True


@dataclass(frozen=True)
class Envelope:
    """A decoded message and the HybridTime its envelope carried."""

    message: Message
    timestamp: int | None


# -- encoding ---------------------------------------------------------------------------


def _to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    return value


def encode(msg: Message, timestamp: int | None = None) -> bytes:
    """The envelope of a message as UTF-8 JSON bytes."""
    if type(msg).TYPE not in _REGISTRY or _REGISTRY[type(msg).TYPE] is not type(msg):
        raise TypeError(f"{type(msg).__name__} is not a registered message")
    if isinstance(msg, Response) and timestamp is None:
        raise ValueError("a response carries the server's timestamp")
    envelope = {"v": PROTOCOL_VERSION, "type": msg.TYPE, "body": _to_json(msg)}
    envelope["timestamp"] = timestamp
    return json.dumps(envelope, separators=(",", ":"), allow_nan=False).encode()


# -- strict decoding --------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_timestamp(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= _MAX_TIMESTAMP:
        raise MalformedMessage(f"{where}: timestamp must be a 64-bit HybridTime, not {value!r}")
    return value


def _convert(value: Any, hint: Any, where: str) -> Any:
    """``value`` (parsed JSON) checked against the type ``hint``, dataclasses built."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(value, option, where)
            except MalformedMessage:
                continue
        raise MalformedMessage(f"{where}: {value!r} is not a {hint}")
    if origin is list:
        (item,) = typing.get_args(hint)
        if type(value) is not list:
            raise MalformedMessage(f"{where}: expected a list, got {value!r}")
        return [_convert(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        key, item = typing.get_args(hint)
        if key is not str or type(value) is not dict:
            raise MalformedMessage(f"{where}: expected an object, got {value!r}")
        return {k: _convert(v, item, f"{where}.{k}") for k, v in value.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    if hint is float and type(value) in (int, float):
        return float(value)
    if hint in (int, str, bool, float) and type(value) is hint:
        return value
    if hint is Any:
        return value
    raise MalformedMessage(f"{where}: expected {getattr(hint, '__name__', hint)}, got {value!r}")


_Shape = tuple[dict[str, Any], dict[str, "dataclasses.Field[Any]"]]
_SHAPES: dict[type[Any], _Shape] = {}


def _shape(cls: type[Any]) -> _Shape:
    """The type hints and fields of a message class (computed once per class)."""
    shape = _SHAPES.get(cls)
    if shape is None:
        shape = (typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)})
        _SHAPES[cls] = shape
    return shape


def _build(cls: type[Any], body: Any, where: str) -> Any:
    if type(body) is not dict:
        raise MalformedMessage(f"{where}: expected an object, got {body!r}")
    hints, fields = _shape(cls)
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise MalformedMessage(f"{where}: unknown field(s) {', '.join(unknown)}")
    values = {}
    for name, f in fields.items():
        if name in body:
            values[name] = _convert(body[name], hints[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise MalformedMessage(f"{where}: missing field {name}")
    return cls(**values)


def decode(data: bytes) -> Envelope:
    """The message of an envelope; ``MalformedMessage`` if anything in it is wrong."""
    try:
        raw = json.loads(data, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"a message is not valid JSON: {exc}") from None
    if type(raw) is not dict:
        raise MalformedMessage("a message envelope is a JSON object")
    keys = set(raw)
    if keys != {"v", "type", "body", "timestamp"}:
        missing = sorted({"v", "type", "body", "timestamp"} - keys)
        extra = sorted(keys - {"v", "type", "body", "timestamp"})
        raise MalformedMessage(
            f"a message envelope has the keys v, type, body, timestamp"
            f" (missing: {', '.join(missing) or 'none'}; unknown: {', '.join(extra) or 'none'})"
        )
    if raw["v"] != PROTOCOL_VERSION or type(raw["v"]) is not int:
        raise MalformedMessage(
            f"message version {raw['v']!r} is not supported (this side speaks version"
            f" {PROTOCOL_VERSION}); are the servers and the client the same release?"
        )
    type_name = raw["type"]
    cls = _REGISTRY.get(type_name) if type(type_name) is str else None
    if cls is None:
        raise MalformedMessage(f"unknown message type {type_name!r}")
    timestamp = _check_timestamp(raw["timestamp"], type_name)
    if issubclass(cls, Response) and timestamp is None:
        raise MalformedMessage(f"{type_name}: a response carries the server's timestamp")
    return Envelope(_build(cls, raw["body"], type_name), timestamp)


def encode_arrow(table: pa.Table) -> str:
    """``table`` as a message field: the base64 of one Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")


def decode_arrow(text: str, what: str) -> pa.Table:
    """The table an ``encode_arrow`` field holds; ``MalformedMessage`` naming ``what``
    when it holds something else."""
    try:
        return pa.ipc.open_stream(base64.b64decode(text, validate=True)).read_all()
    except (binascii.Error, ValueError, pa.ArrowInvalid) as exc:
        raise MalformedMessage(f"{what} is not an Arrow IPC stream: {exc}") from None
