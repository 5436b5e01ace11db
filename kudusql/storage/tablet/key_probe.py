"""A write batch's encoded primary keys, prepared once to probe many DiskRowSets.

Deciding a batch (``write_path.locate``) asks every DiskRowSet whose key range may hold
some of the batch's keys which of them it has. With random keys every rowset of a
tablet gets a few, so what a probe costs per rowset is what a batch costs per rowset.
``KeyProbe`` does the per-batch work once: the keys sorted (a rowset's share is then
two binary searches on its min and max key, not a comparison of every key) and hashed
(each rowset's bloom filter probes with the shared hashes, not its own murmur pass).
Fixed-width keys (any key of fixed-width columns) sort as one numpy array.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.murmur import murmur3_x64_128
from kudusql.storage.cfile import key_array
from kudusql.storage.cfile.encodings import var_parts

#: The seed every DiskRowSet bloom filter is built with (``BloomFilter.build``).
BLOOM_SEED = 0


class KeyProbe:
    """Encoded keys (binary, no nulls) sorted and hashed for many rowset probes.

    Keys of one width are kept sorted as a numpy array (``key_array``); others as a
    sorted Python list, or, past ``_MAX_LISTED`` keys, not sorted at all: each range
    is then a vectorized comparison of every key (what a huge batch pays anyway)."""

    __slots__ = ("_hashes", "_order", "_sorted", "_sorted_np", "_width", "keys")

    _MAX_LISTED = 1 << 16

    def __init__(self, keys: pa.Array[Any]) -> None:
        self.keys = keys
        self._hashes: tuple[np.ndarray, np.ndarray] | None = None
        self._sorted: list[bytes] | None = None
        self._sorted_np: np.ndarray | None = None
        self._order = np.zeros(0, dtype=np.int64)
        self._width = key_array.fixed_width(keys)
        if self._width < 0 and len(keys) > self._MAX_LISTED:
            return
        if self._width > 0:
            _, data = var_parts(keys)
            arr = key_array.sortable(data, self._width, len(keys))
            self._order = np.argsort(arr, kind="stable")
            self._sorted_np = arr[self._order]
        else:
            self._order = pc.sort_indices(keys).to_numpy().astype(np.int64, copy=False)
            self._sorted = keys.take(self._order).to_pylist()  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def width(self) -> int:
        """The keys' common width in bytes, or -1 when they differ."""
        return self._width

    def sorted_values(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(the keys in ``key_array.sortable`` form, in key order; the batch position of
        each), fixed width only."""
        if self._sorted_np is None:
            return None
        return self._sorted_np, self._order

    def in_range(self, lo: bytes, hi: bytes) -> np.ndarray:
        """Batch positions of the keys in ``[lo, hi]`` (in key order when sorted)."""
        if self._sorted_np is not None:
            a = key_array.first_at_least(self._sorted_np, self._width, lo)
            b = key_array.first_above(self._sorted_np, self._width, hi)
            return self._order[a : max(a, b)]
        if self._sorted is not None:
            a = bisect.bisect_left(self._sorted, lo)
            b = bisect.bisect_right(self._sorted, hi, lo=a)
            return self._order[a:b]
        inr = pc.and_(
            pc.greater_equal(self.keys, pa.scalar(lo, pa.binary())),
            pc.less_equal(self.keys, pa.scalar(hi, pa.binary())),
        )
        return np.flatnonzero(np.asarray(inr.to_numpy(zero_copy_only=False), dtype=bool))

    def hashes(self) -> tuple[np.ndarray, np.ndarray]:
        """MurmurHash3_x64_128 (h1, h2) of every key with the bloom seed (computed once)."""
        h = self._hashes
        if h is None:
            h = self._hashes = murmur3_x64_128(self.keys, BLOOM_SEED)
        return h

    def pair_hashes(
        self, positions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Hashes for (key, rowset) pairs of the keys at batch ``positions`` (repeats
        allowed): ``(h1, h2, key)``, pair j's hashes at ``key[j]``, or at j when ``key``
        is None. Only those keys are hashed when the batch's hashes are not known yet
        and they are few (where a few rowsets overlap, only the keys in the overlap need
        a bloom probe); else the batch's hashes, indexed by ``positions``."""
        h = self._hashes
        if h is None and 4 * len(positions) < len(self.keys):
            h1, h2 = murmur3_x64_128(self.keys.take(positions), BLOOM_SEED)
            return h1, h2, None
        h1, h2 = self.hashes()
        return h1, h2, positions
