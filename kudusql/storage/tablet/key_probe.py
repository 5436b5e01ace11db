"""A write batch's encoded primary keys, prepared once to probe many DiskRowSets.

Deciding a batch (``write_path.locate``) asks every DiskRowSet whose key range may hold
some of the batch's keys which of them it has. With random keys every rowset of a
tablet gets a few, so what a probe costs per rowset is what a batch costs per rowset.
``KeyProbe`` does the per-batch work once: the keys sorted (a rowset's share is then
two binary searches on its min and max key, not a comparison of every key) and hashed
(each rowset's bloom filter probes with the shared hashes, not its own murmur pass).
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.murmur import murmur3_x64_128

#: The seed every DiskRowSet bloom filter is built with (``BloomFilter.build``).
BLOOM_SEED = 0


class KeyProbe:
    """Encoded keys (binary, no nulls) sorted and hashed for many rowset probes."""

    __slots__ = ("_hashes", "_order", "_sorted", "keys")

    def __init__(self, keys: pa.Array[Any]) -> None:
        self.keys = keys
        order = pc.sort_indices(keys).to_numpy().astype(np.int64, copy=False)
        self._order = order
        self._sorted: list[bytes] = keys.take(order).to_pylist()  # type: ignore[assignment]
        self._hashes: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def in_range(self, lo: bytes, hi: bytes) -> np.ndarray:
        """Batch positions of the keys in ``[lo, hi]``, in key order."""
        a = bisect.bisect_left(self._sorted, lo)
        b = bisect.bisect_right(self._sorted, hi, lo=a)
        return self._order[a:b]

    def hashes(self) -> tuple[np.ndarray, np.ndarray]:
        """MurmurHash3_x64_128 (h1, h2) of every key with the bloom seed (computed once)."""
        h = self._hashes
        if h is None:
            h = self._hashes = murmur3_x64_128(self.keys, BLOOM_SEED)
        return h
