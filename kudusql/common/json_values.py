"""Cell values in JSON metadata (column defaults, range partition bounds): bytes,
decimals, timestamps and dates as small tagged objects, everything else as is."""

from __future__ import annotations

import base64
import datetime
import decimal
from typing import Any

import numpy as np

from kudusql.common.errors import CorruptionError


def to_json_value(v: Any) -> Any:
    """A JSON-able, self-describing form of a cell value."""
    if isinstance(v, bytes):
        return {"b64": base64.b64encode(v).decode("ascii")}
    if isinstance(v, decimal.Decimal):
        return {"dec": str(v)}
    if isinstance(v, datetime.datetime):
        return {"ts": v.isoformat()}
    if isinstance(v, datetime.date):
        return {"date": v.isoformat()}
    if isinstance(v, np.generic):
        return v.item()
    return v


def from_json_value(v: Any, where: str = "metadata") -> Any:
    """The value ``to_json_value`` encoded."""
    if not isinstance(v, dict):
        return v
    if "b64" in v:
        return base64.b64decode(v["b64"])
    if "dec" in v:
        return decimal.Decimal(v["dec"])
    if "ts" in v:
        return datetime.datetime.fromisoformat(v["ts"])
    if "date" in v:
        return datetime.date.fromisoformat(v["date"])
    raise CorruptionError(where, 0, f"unknown tagged value {v!r}")
