"""YCSB's key chooser, record shape and the Kudu paper's workloads (§6: A, B, C, F).

Owns the pieces of the YCSB benchmark that are pure and seeded: the Zipfian generator
of Gray et al. ("Quickly generating billion-record synthetic databases", SIGMOD 1994)
as YCSB's ``ZipfianGenerator`` draws it, YCSB's ``ScrambledZipfianGenerator`` (ranks
drawn over 10^10 items, spread over the table by FNV-1a 64-bit hashing), YCSB's key
names and 100-byte field values, and each workload's operation mix. Nothing here
touches a database or a clock: the same seed gives the same keys and operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

#: Gray et al.'s skew as YCSB uses it (``zipfian.constant``).
ZIPFIAN_CONSTANT = 0.99
#: YCSB's ScrambledZipfianGenerator draws ranks over this many items ...
SCRAMBLED_ITEMS = 10_000_000_000
#: ... whose zeta(10^10, 0.99) YCSB precomputes (``ScrambledZipfianGenerator.ZETAN``).
SCRAMBLED_ZETAN = 26.46902820178302

FNV_OFFSET_BASIS_64 = np.uint64(0xCBF29CE484222325)
FNV_PRIME_64 = np.uint64(1099511628211)

FIELDS = 10
FIELD_BYTES = 100
KEY_PREFIX = "user"


def zeta(n: int, theta: float) -> float:
    """sum_{i=1..n} 1 / i^theta, in chunks so that memory stays flat for large n."""
    total = 0.0
    step = 1 << 22
    for lo in range(1, n + 1, step):
        i = np.arange(lo, min(n, lo + step - 1) + 1, dtype=np.float64)
        total += float(np.sum(i**-theta))
    return total


class ZipfianGenerator:
    """Ranks 0..items-1, rank r drawn with probability ~ 1/(r+1)^theta (rank 0 hottest).

    Gray et al.'s inversion, as YCSB's ``ZipfianGenerator.nextLong``: ranks 0 and 1 are
    exact; higher ranks come from a closed-form approximation of the inverse CDF.
    """

    def __init__(self, items: int, theta: float = ZIPFIAN_CONSTANT, zetan: float | None = None):
        if items < 2:
            raise ValueError("a Zipfian generator needs at least 2 items")
        self.items = items
        self.theta = theta
        self.zetan = zeta(items, theta) if zetan is None else zetan
        self.alpha = 1.0 / (1.0 - theta)
        zeta2 = 1.0 + 0.5**theta
        self.eta = (1.0 - (2.0 / items) ** (1.0 - theta)) / (1.0 - zeta2 / self.zetan)
        self._second = 1.0 + 0.5**theta

    def probability(self, rank: int) -> float:
        """The analytic Zipf probability of ``rank``."""
        return float((rank + 1) ** -self.theta / self.zetan)

    def ranks(self, rng: np.random.Generator, size: int) -> np.ndarray:
        u = rng.random(size)
        uz = u * self.zetan
        tail = np.floor(self.items * (self.eta * u - self.eta + 1.0) ** self.alpha)
        out: np.ndarray = np.minimum(tail, self.items - 1).astype(np.int64)
        out[uz < self._second] = 1
        out[uz < 1.0] = 0
        return out


def fnv64(values: np.ndarray) -> np.ndarray:
    """YCSB's ``Utils.fnvhash64``: FNV-1a over the value's 8 little-endian bytes, then
    the absolute value as a signed 64-bit integer."""
    v = values.astype(np.uint64)
    h = np.full(v.shape, FNV_OFFSET_BASIS_64, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for shift in range(0, 64, 8):
            h ^= (v >> np.uint64(shift)) & np.uint64(0xFF)
            h *= FNV_PRIME_64
    out: np.ndarray = np.abs(h.view(np.int64))
    return out


class ScrambledZipfianGenerator:
    """Record numbers 0..records-1 with YCSB's scrambled Zipfian popularity: a rank over
    10^10 items, hashed with FNV-64 and reduced modulo ``records``, so the hot records
    are spread over the key space instead of clustered at its start."""

    def __init__(self, records: int):
        self.records = records
        self.zipf = ZipfianGenerator(SCRAMBLED_ITEMS, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN)

    def record_of_rank(self, ranks: np.ndarray) -> np.ndarray:
        return fnv64(ranks) % self.records

    def records_for(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.record_of_rank(self.zipf.ranks(rng, size))


def key_names(records: np.ndarray) -> list[str]:
    """YCSB's key of a record number with hashed insert order: ``"user"`` followed by
    the FNV-64 hash of the number in decimal (``CoreWorkload.buildKeyName``)."""
    return [KEY_PREFIX + str(h) for h in fnv64(records).tolist()]


def field_values(rng: np.random.Generator, rows: int, width: int = FIELD_BYTES) -> pa.Array[Any]:
    """``rows`` random printable ASCII strings of ``width`` bytes, as one Arrow array."""
    data = rng.integers(ord(" ") + 1, ord("~") + 1, size=rows * width, dtype=np.uint8)
    offsets = np.arange(0, rows * width + 1, width, dtype=np.int32)
    buffers = [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data.tobytes())]
    out: pa.Array[Any] = pa.Array.from_buffers(pa.string(), rows, buffers)
    return out


def field_names() -> list[str]:
    return [f"field{i}" for i in range(FIELDS)]


def records_table(start: int, stop: int, seed: int) -> pa.Table:
    """Records ``start..stop-1``: ``ycsb_key`` then ``field0..field9`` (100 bytes each)."""
    rng = np.random.default_rng([seed, start])
    n = stop - start
    cols: dict[str, pa.Array[Any]] = {
        "ycsb_key": pa.array(key_names(np.arange(start, stop, dtype=np.int64)), pa.string())
    }
    for name in field_names():
        cols[name] = field_values(rng, n)
    return pa.table(cols)


# -- workloads --------------------------------------------------------------------------------
READ = "read"
UPDATE = "update"
RMW = "read-modify-write"
OP_NAMES = (READ, UPDATE, RMW)


@dataclass(frozen=True)
class Workload:
    """A YCSB core workload: the share of each operation (they sum to 1)."""

    name: str
    description: str
    read: float
    update: float = 0.0
    rmw: float = 0.0


WORKLOADS = {
    "A": Workload("A", "update heavy: read 50%, update 50%", 0.5, update=0.5),
    "B": Workload("B", "read mostly: read 95%, update 5%", 0.95, update=0.05),
    "C": Workload("C", "read only: read 100%", 1.0),
    "F": Workload("F", "read 50%, read-modify-write 50%", 0.5, rmw=0.5),
}


@dataclass(frozen=True)
class Operation:
    kind: str
    record: int
    #: The updated field's index (update and read-modify-write; -1 for a read).
    field: int


def operations(workload: Workload, records: int, count: int, seed: int) -> list[Operation]:
    """``count`` operations of ``workload`` over ``records`` records, the same for a
    given seed (so both systems run exactly the same sequence)."""
    rng = np.random.default_rng([seed, ord(workload.name)])
    recs = ScrambledZipfianGenerator(records).records_for(rng, count)
    u = rng.random(count)
    kinds = np.where(
        u < workload.read, 0, np.where(u < workload.read + workload.update, 1, 2)
    ).tolist()
    fields = rng.integers(0, FIELDS, count).tolist()
    return [
        Operation(OP_NAMES[k], r, -1 if k == 0 else f)
        for k, r, f in zip(kinds, recs.tolist(), fields, strict=True)
    ]
