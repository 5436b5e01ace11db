"""Bloom filter over encoded primary keys (one per DiskRowSet).

This module owns the bloom filter's hashing scheme and its byte format (documented in
``BLOOM_FORMAT.md`` next to this file). Keys are hashed with
``(h1, h2) = MurmurHash3_x64_128(key, seed)`` (``mmh3.hash64``, unsigned). Two layouts:

* **Word** (version 2, what ``build`` writes): a key owns one 64-bit word,
  ``h1 mod (m / 64)``, and sets ``k`` bits in it, bit ``(h2 >> 6i) & 63`` for ``i`` in
  ``0..k-1``. A probe is one memory access and a mask test, for a present key as for an
  absent one: a batch probing (key, rowset) pairs does it in a handful of numpy passes
  over the pairs. The price is a higher false-positive rate per bit (keys share words):
  ~15 bits per key for 0.5%, where the classic layout reaches 0.1% with 14.4
  (``_word_size_for`` sizes from the rate through a model of the layout).
* **Classic** (version 1, written before 2026-11-26, still read and probed): probe ``i``
  tests bit ``(h1 + i*h2) mod m``, computed exactly (no 64-bit wrap-around; vectorized as
  ``(h1 mod m) + i*(h2 mod m)`` reduced mod m step by step); ``m = ceil(-n ln p /
  ln(2)**2)`` bits and ``k = round(m/n ln 2)`` probes. Each probe of a present key is
  another random memory access and another round of numpy passes (the sustained random
  load's writer spent 40% of its time here at a tablet height of 8).
* Bit ``b`` lives in byte ``b >> 3`` at bit position ``b & 7`` (LSB first) in both; the
  word layout's word ``w`` is bytes ``8w .. 8w + 7``, little-endian.

Build and batch probes are vectorized with numpy; ``may_contain_one`` is a scalar fast
path for single-key lookups on the write path. ``BloomFilterSet`` packs the filters of
many rowsets so that a batch probes (key, filter) pairs of all of them in one pass;
``BloomArena`` keeps filters packed across sets, so a new set over mostly the same
filters copies only the new ones.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Iterator

import mmh3
import numpy as np

from kudusql.common.errors import CorruptionError, ProgrammingError
from kudusql.common.keys import ArrowArray, single_array
from kudusql.common.murmur import murmur3_x64_128
from kudusql.storage.cfile.arena import Arena
from kudusql.storage.fs.checksum import crc32

__all__ = [
    "BLOOM_CLASSIC",
    "BLOOM_MAGIC",
    "BLOOM_VERSION",
    "BLOOM_WORD",
    "BloomArena",
    "BloomFilter",
    "BloomFilterSet",
]

# DO NOT CHANGE: on-disk format constants.
BLOOM_MAGIC = b"KSQBLOOM"
BLOOM_CLASSIC = 1  # version 1: k probes over the whole bitmap
BLOOM_WORD = 2  # version 2: k bits in one 64-bit word per key
BLOOM_VERSION = BLOOM_WORD  # what ``BloomFilter.build`` writes
HASH_MURMUR3_X64_128 = 1
_HEADER = struct.Struct("<8sHBBIQ")  # magic, version, hash algorithm, k, seed, num_bits
_CRC = struct.Struct("<I")
_MAX_HASHES = 32
_MAX_WORD_HASHES = 10  # six bits of h2 per bit of the word
_MIN_BITS = 64
_MAX_WORD_BITS_PER_KEY = 64  # a rate the word layout cannot reach gets its best at this size


def _size_for(n: int, fp_rate: float) -> tuple[int, int]:
    """(num_bits, num_hashes) for ``n`` keys at false-positive rate ``fp_rate``."""
    if not 0.0 < fp_rate < 1.0:
        raise ProgrammingError(f"bloom fp_rate must be in (0, 1), got {fp_rate}")
    n = max(n, 1)
    ln2 = math.log(2)
    bits = math.ceil(-n * math.log(fp_rate) / (ln2 * ln2))
    bits = max(_MIN_BITS, (bits + 63) // 64 * 64)
    k = round(bits / n * ln2)
    return bits, min(_MAX_HASHES, max(1, k))


def _word_fpr(bits_per_key: float, k: int) -> float:
    """False-positive rate of the word layout: keys land on words Poisson-distributed
    (``64 / bits_per_key`` per word on average); a word holding ``j`` keys has each bit
    set with probability ``1 - (63/64)**(k j)``, and an absent key is taken when all ``k``
    of its bits are, counted as independent. The true rate is slightly higher (the set
    bits of one word are not independent; measured: 0.00518 where the model says 0.005
    at 15 bits per key), which the sizing accepts."""
    lam = 64.0 / bits_per_key
    p_j = math.exp(-lam)
    total = 0.0
    j = 0
    while True:
        total += p_j * (1.0 - (63.0 / 64.0) ** (k * j)) ** k
        j += 1
        p_j *= lam / j
        if j > lam and p_j < 1e-15:
            return total


@functools.lru_cache(maxsize=64)
def _word_bits_per_key(fp_rate: float) -> tuple[int, int]:
    """(bits per key, k) of the smallest word filter whose rate is at most ``fp_rate``;
    past ``_MAX_WORD_BITS_PER_KEY`` bits, the best k at that size."""
    if not 0.0 < fp_rate < 1.0:
        raise ProgrammingError(f"bloom fp_rate must be in (0, 1), got {fp_rate}")
    for bpk in range(1, _MAX_WORD_BITS_PER_KEY + 1):
        rate, k = min((_word_fpr(bpk, k), k) for k in range(1, _MAX_WORD_HASHES + 1))
        if rate <= fp_rate or bpk == _MAX_WORD_BITS_PER_KEY:
            return bpk, k
    raise AssertionError("unreachable")


def _word_size_for(n: int, fp_rate: float) -> tuple[int, int]:
    """(num_bits, num_hashes) of a word filter for ``n`` keys at ``fp_rate``."""
    bpk, k = _word_bits_per_key(fp_rate)
    bits = max(_MIN_BITS, (max(n, 1) * bpk + 63) // 64 * 64)
    return bits, k


def _word_masks(h2: np.ndarray, k: int) -> np.ndarray:
    """Per key, the word layout's mask: bits ``(h2 >> 6i) & 63`` for ``i < k``.

    In place in one scratch array: a temporary per operation (three per bit) cost 21 ms
    for a rowset's 800k keys, mostly faulting in fresh pages; this takes 7."""
    mask = np.zeros(len(h2), dtype=np.uint64)
    bit = np.empty(len(h2), dtype=np.uint64)
    one, six_bits = np.uint64(1), np.uint64(63)
    for i in range(k):
        np.right_shift(h2, np.uint64(6 * i), out=bit)
        np.bitwise_and(bit, six_bits, out=bit)
        np.left_shift(one, bit, out=bit)
        mask |= bit
    return mask


def _word_mask_one(h2: int, k: int) -> int:
    mask = 0
    for i in range(k):
        mask |= 1 << ((h2 >> (6 * i)) & 63)
    return mask


_CHUNK_KEYS = 1 << 18  # keys hashed and probed per numpy pass (bounds temporaries)
_ALL_PROBES_AT_ONCE = 1 << 14  # up to this many (key, probe) pairs: one pass, no early exit


def _first_probes(
    keys: ArrowArray, seed: int, num_bits: int
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Per chunk of keys: (index of its first key, h1 mod m, h2 mod m) as int64 arrays,
    i.e. probe 0's bit and the per-probe step of every key in the chunk."""
    arr = single_array(keys)
    m = np.uint64(num_bits)
    for start in range(0, len(arr), _CHUNK_KEYS):
        h1, h2 = murmur3_x64_128(arr.slice(start, _CHUNK_KEYS), seed)
        np.remainder(h1, m, out=h1)
        np.remainder(h2, m, out=h2)
        yield start, h1.view(np.int64), h2.view(np.int64)


def _next_probe(pos: np.ndarray, step: np.ndarray, num_bits: int) -> None:
    """In place: pos = (pos + step) mod m, for pos and step already in [0, m).

    As unsigned numbers, ``pos + step - m`` wraps around (past 2**64 - m) exactly when
    ``pos + step < m``, so the smaller of the two is the sum reduced: two plain passes
    instead of a comparison and a masked subtraction (building a filter of a million
    keys took 0.15 s that way and 0.11 s this way; probing them 0.12 s and 0.08 s)."""
    u = pos.view(np.uint64)
    u += step.view(np.uint64)
    np.minimum(u, u - np.uint64(num_bits), out=u)


class BloomFilter:
    """An immutable bloom filter; build with ``build``, load with ``from_bytes``.
    ``version`` is its layout (``BLOOM_WORD``, or ``BLOOM_CLASSIC`` for filters written
    before the word layout existed)."""

    __slots__ = (
        "__weakref__",
        "_bits",
        "_bytes",
        "_words",
        "num_bits",
        "num_hashes",
        "seed",
        "version",
    )

    num_hashes: int
    num_bits: int
    seed: int
    version: int

    def __init__(
        self,
        bitmap: bytes,
        num_bits: int,
        num_hashes: int,
        seed: int = 0,
        *,
        version: int,
    ) -> None:
        if num_bits <= 0 or num_bits % 8 or len(bitmap) != num_bits // 8:
            raise ProgrammingError("bloom bitmap size does not match num_bits")
        if version == BLOOM_WORD:
            if num_bits % 64:
                raise ProgrammingError(f"a word bloom filter's num_bits is {num_bits}")
            if not 1 <= num_hashes <= _MAX_WORD_HASHES:
                raise ProgrammingError(f"word bloom num_hashes out of range: {num_hashes}")
        elif version != BLOOM_CLASSIC:
            raise ProgrammingError(f"unknown bloom filter version {version}")
        if not 1 <= num_hashes <= 255:
            raise ProgrammingError(f"bloom num_hashes out of range: {num_hashes}")
        self._bytes = bytes(bitmap)
        self._bits = np.frombuffer(self._bytes, dtype=np.uint8)
        self._words = np.frombuffer(self._bytes, dtype="<u8") if version == BLOOM_WORD else None
        self.num_bits = num_bits
        self.num_hashes = num_hashes
        self.seed = seed
        self.version = version

    # -- building -------------------------------------------------------------------------
    @classmethod
    def build(
        cls, keys: ArrowArray, fp_rate: float = 0.005, version: int = BLOOM_VERSION
    ) -> BloomFilter:
        """A filter sized for ``len(keys)`` keys at ``fp_rate``, containing every key, in
        layout ``version`` (the classic one only to test that old filters still read)."""
        if version == BLOOM_CLASSIC:
            return cls._build_classic(keys, fp_rate)
        if version != BLOOM_WORD:
            raise ProgrammingError(f"unknown bloom filter version {version}")
        num_bits, k = _word_size_for(len(keys), fp_rate)
        nwords = np.uint64(num_bits // 64)
        words = np.zeros(num_bits // 64, dtype=np.uint64)
        arr = single_array(keys)
        for start in range(0, len(arr), _CHUNK_KEYS):
            h1, h2 = murmur3_x64_128(arr.slice(start, _CHUNK_KEYS), 0)
            np.bitwise_or.at(words, np.remainder(h1, nwords).view(np.int64), _word_masks(h2, k))
        return cls(words.astype("<u8", copy=False).tobytes(), num_bits, k, 0, version=BLOOM_WORD)

    @classmethod
    def _build_classic(cls, keys: ArrowArray, fp_rate: float) -> BloomFilter:
        num_bits, k = _size_for(len(keys), fp_rate)
        bits = np.zeros(num_bits, dtype=np.bool_)
        for _, pos, step in _first_probes(keys, 0, num_bits):
            for i in range(k):
                if i:
                    _next_probe(pos, step, num_bits)
                bits[pos] = True
        bitmap = np.packbits(bits, bitorder="little").tobytes()
        return cls(bitmap, num_bits, k, 0, version=BLOOM_CLASSIC)

    # -- probing --------------------------------------------------------------------------
    def may_contain(self, keys: ArrowArray) -> np.ndarray:
        """Per key: False if the key is certainly absent, True if it may be present."""
        n = len(keys)
        result = np.zeros(n, dtype=np.bool_)
        if n == 0:
            return result
        if self._words is not None:
            arr = single_array(keys)
            for start in range(0, n, _CHUNK_KEYS):
                h1, h2 = murmur3_x64_128(arr.slice(start, _CHUNK_KEYS), self.seed)
                result[start : start + len(h1)] = self._probe_words(h1, h2)
            return result
        for start, pos, step in _first_probes(keys, self.seed, self.num_bits):
            self._probe(pos, step, start, result)
        return result

    def may_contain_hashes(self, h1: np.ndarray, h2: np.ndarray, seed: int = 0) -> np.ndarray:
        """``may_contain`` for keys already hashed with ``seed`` (the uint64 pair of
        ``murmur3_x64_128``): a batch probing many rowsets hashes its keys once. The
        arrays are not changed. A filter built with another seed is a caller's bug."""
        if seed != self.seed:
            raise ProgrammingError(f"bloom seed is {self.seed}, keys were hashed with {seed}")
        if self._words is not None:
            return self._probe_words(h1, h2)
        result = np.zeros(len(h1), dtype=np.bool_)
        if len(h1):
            m = np.uint64(self.num_bits)
            pos = np.remainder(h1, m).view(np.int64)
            step = np.remainder(h2, m).view(np.int64)
            self._probe(pos, step, 0, result)
        return result

    def _probe_words(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """The word layout's answer for keys hashed to ``(h1, h2)``."""
        assert self._words is not None
        mask = _word_masks(h2, self.num_hashes)
        word = self._words.take(np.remainder(h1, np.uint64(len(self._words))).view(np.int64))
        return np.asarray((word & mask) == mask)

    def _probe(self, pos: np.ndarray, step: np.ndarray, start: int, result: np.ndarray) -> None:
        """Classic layout: set ``result[start + j]`` for each key j whose k probes (probe
        0 at ``pos[j]``, then ``step[j]`` apart; both changed in place) all hit set bits."""
        bm = self._bits
        k = self.num_hashes
        if len(pos) * k <= _ALL_PROBES_AT_ONCE:
            # Few keys: all k probes of every key in one pass (the numpy calls, not the
            # bits, are the cost here). pos + i*step stays far below 2**63.
            probes = pos[:, None] + step[:, None] * np.arange(k, dtype=np.int64)
            np.remainder(probes, self.num_bits, out=probes)
            bits = (bm[probes >> 3] >> (probes & 7).astype(np.uint8)) & 1
            result[start : start + len(pos)] = bits.all(axis=1)
            return
        # Only keys that passed every probe so far are probed again, so a batch of
        # absent keys costs about two probes per key instead of k.
        alive = np.arange(start, start + len(pos), dtype=np.int64)
        for i in range(self.num_hashes):
            if i:
                _next_probe(pos, step, self.num_bits)
            hit = ((bm[pos >> 3] >> (pos & 7).astype(np.uint8)) & 1).astype(np.bool_)
            if not bool(hit.all()):
                alive, pos, step = alive[hit], pos[hit], step[hit]
                if len(alive) == 0:
                    return
        result[alive] = True

    def may_contain_one(self, key: bytes) -> bool:
        """Scalar ``may_contain`` for one key (a few microseconds)."""
        h1, h2 = mmh3.hash64(key, self.seed, signed=False)
        bm = self._bytes
        if self._words is not None:
            w = h1 % len(self._words)
            mask = _word_mask_one(h2, self.num_hashes)
            return int.from_bytes(bm[8 * w : 8 * w + 8], "little") & mask == mask
        nb = self.num_bits
        for i in range(self.num_hashes):
            b = (h1 + i * h2) % nb
            if not (bm[b >> 3] >> (b & 7)) & 1:
                return False
        return True

    # -- serialization --------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The self-describing serialized form (see BLOOM_FORMAT.md)."""
        head = _HEADER.pack(
            BLOOM_MAGIC,
            self.version,
            HASH_MURMUR3_X64_128,
            self.num_hashes,
            self.seed,
            self.num_bits,
        )
        body = head + self._bytes
        return body + _CRC.pack(crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes, path: str, base_offset: int = 0) -> BloomFilter:
        """Parse and verify ``to_bytes`` output; CorruptionError(path, offset, what) on any
        problem. ``base_offset`` is where ``data`` starts inside ``path`` (for messages)."""
        data = bytes(data)
        hs = _HEADER.size
        if len(data) < hs + _CRC.size:
            raise CorruptionError(path, base_offset, f"bloom filter truncated ({len(data)} bytes)")
        magic, version, algo, k, seed, num_bits = _HEADER.unpack_from(data, 0)
        if magic != BLOOM_MAGIC:
            raise CorruptionError(path, base_offset, f"bad bloom filter magic {magic!r}")
        crc_at = len(data) - _CRC.size
        (stored,) = _CRC.unpack_from(data, crc_at)
        actual = crc32(memoryview(data)[:crc_at])
        if stored != actual:
            raise CorruptionError(
                path,
                base_offset + crc_at,
                f"bloom filter checksum mismatch (stored {stored:#010x}, computed {actual:#010x})",
            )
        if version not in (BLOOM_CLASSIC, BLOOM_WORD):
            raise CorruptionError(
                path, base_offset + 8, f"unsupported bloom filter version {version}"
            )
        if algo != HASH_MURMUR3_X64_128:
            raise CorruptionError(path, base_offset + 10, f"unknown bloom hash algorithm {algo}")
        max_k = _MAX_WORD_HASHES if version == BLOOM_WORD else _MAX_HASHES
        if not 1 <= k <= max_k:
            raise CorruptionError(path, base_offset + 11, f"bad bloom num_hashes {k}")
        unit = 64 if version == BLOOM_WORD else 8
        if num_bits <= 0 or num_bits % unit or num_bits // 8 != crc_at - hs:
            raise CorruptionError(
                path, base_offset + 16, f"bloom num_bits {num_bits} does not match the bitmap size"
            )
        return cls(data[hs:crc_at], num_bits, k, seed, version=version)

    def __repr__(self) -> str:
        return (
            f"BloomFilter(version={self.version}, num_bits={self.num_bits}, "
            f"num_hashes={self.num_hashes})"
        )


class BloomFilterSet:
    """Several filters built with one seed, packed side by side: ``may_contain_hashes``
    answers (key, filter) pairs of any of them in a few numpy passes, where probing each
    filter in turn would cost a round of numpy calls per filter. Filters of both layouts
    may be mixed (a tablet written before the word layout, then compacted in part)."""

    __slots__ = (
        "_bit_base",
        "_bits",
        "_k",
        "_num_bits",
        "_num_words",
        "_word_base",
        "_word_k",
        "_word_of",
        "_words",
        "seed",
    )

    def __init__(self, filters: list[BloomFilter], arena: BloomArena | None = None) -> None:
        """Pack ``filters`` (filter j answers pairs with ``which == j``): into a new
        buffer, or, given an ``arena``, where the arena keeps them (copying only the
        filters it does not hold yet). Every bitmap is placed at a multiple of 8 bytes
        (``_bitmap`` pads), so word filters are read as ``uint64`` in place."""
        seeds = {f.seed for f in filters}
        if len(seeds) > 1:
            raise ProgrammingError(f"bloom filters of a set need one seed, got {sorted(seeds)}")
        self.seed = seeds.pop() if seeds else 0
        sizes = np.array([f.num_bits for f in filters], dtype=np.int64)
        if arena is not None:
            self._bits, byte_base = arena.place(filters)
        else:
            parts = [_bitmap(f) for f in filters]
            self._bits = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)
            lengths = np.array([len(p) for p in parts], dtype=np.int64)
            byte_base = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self._bit_base = byte_base * 8
        self._num_bits = sizes.astype(np.uint64)
        self._k = np.array([f.num_hashes for f in filters], dtype=np.int64)
        word = np.array([f.version == BLOOM_WORD for f in filters], dtype=np.bool_)
        self._word_of = word
        self._word_k = sorted({f.num_hashes for f in filters if f.version == BLOOM_WORD})
        self._words = self._bits[: len(self._bits) // 8 * 8].view("<u8")
        if bool((byte_base[word] % 8).any()):  # _bitmap pads every bitmap: never
            raise ProgrammingError("a word bloom filter was packed off an 8-byte boundary")
        self._word_base = (byte_base // 8).astype(np.uint64)
        self._num_words = (sizes // 64).astype(np.uint64)

    def __len__(self) -> int:
        return len(self._k)

    def may_contain_hashes(
        self,
        which: np.ndarray,
        h1: np.ndarray,
        h2: np.ndarray,
        key: np.ndarray | None = None,
    ) -> np.ndarray:
        """Per pair j: may filter ``which[j]`` hold the key hashed (with the set's seed)
        to ``(h1[key[j]], h2[key[j]])`` (or ``(h1[j], h2[j])`` without ``key``)? The
        same answer as that filter's ``may_contain_hashes``. With ``key``, the hashes are
        per key: each key's word mask is made once for all its pairs, and only for the
        keys the pairs name when they are fewer than half the keys."""
        n = len(which)
        if not n:
            return np.zeros(0, dtype=np.bool_)
        word = self._word_of.take(which)
        if bool(word.all()):
            return self._probe_words(which, h1, h2, key)
        if not bool(word.any()):
            if key is not None:
                h1, h2 = h1.take(key), h2.take(key)
            return self._probe_classic(which, h1, h2)
        result = np.zeros(n, dtype=np.bool_)
        at = np.flatnonzero(word)
        part = key.take(at) if key is not None else at
        result[at] = self._probe_words(which.take(at), h1, h2, part)
        at = np.flatnonzero(~word)
        part = key.take(at) if key is not None else at
        result[at] = self._probe_classic(which.take(at), h1.take(part), h2.take(part))
        return result

    def _probe_words(
        self, which: np.ndarray, h1: np.ndarray, h2: np.ndarray, key: np.ndarray | None
    ) -> np.ndarray:
        """Word-layout pairs: one gather of each pair's word, one mask test."""
        if key is not None:
            h1 = h1.take(key)
        at = np.remainder(h1, self._num_words.take(which))
        at += self._word_base.take(which)
        word = self._words.take(at.view(np.int64))
        ks = self._word_k
        if len(ks) == 1:
            if key is None:
                mask = _word_masks(h2, ks[0])
            elif 2 * len(key) < len(h2):  # few pairs: mask only the keys they probe
                mask = _word_masks(h2.take(key), ks[0])
            else:  # a key's mask made once for all its pairs
                mask = _word_masks(h2, ks[0]).take(key)
        else:  # filters built for different rates: each pair's mask for its filter's k
            pair_k = self._k.take(which)
            mask = np.zeros(len(which), dtype=np.uint64)
            for k in ks:
                sel = np.flatnonzero(pair_k == k)
                if len(sel):
                    mask[sel] = _word_masks(h2.take(key.take(sel) if key is not None else sel), k)
        return np.asarray((word & mask) == mask)

    def _probe_classic(self, which: np.ndarray, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """Classic-layout pairs (hashes per pair): probe after probe, each round only
        for the pairs every earlier probe kept."""
        result = np.zeros(len(which), dtype=np.bool_)
        if not len(which):
            return result
        m = self._num_bits[which]
        pos = np.remainder(h1, m).view(np.int64)
        step = np.remainder(h2, m).view(np.int64)
        m_i = m.view(np.int64)
        base = self._bit_base[which]
        k = self._k[which]
        alive = np.arange(len(which), dtype=np.int64)
        bm = self._bits
        for i in range(int(k.max())):
            if i:
                _next_probe_each(pos, step, m_i)
                done = k <= i  # filters with fewer probes: every probe passed
                if done.any():
                    result[alive[done]] = True
                    keep = np.flatnonzero(~done)
                    alive, pos, step, m_i, base, k = (
                        a.take(keep) for a in (alive, pos, step, m_i, base, k)
                    )
                    if not len(alive):
                        return result
            b = base + pos
            hit = np.flatnonzero((bm.take(b >> 3) >> (b & 7).astype(np.uint8)) & 1)
            if len(hit) < len(alive):
                alive, pos, step, m_i, base, k = (
                    a.take(hit) for a in (alive, pos, step, m_i, base, k)
                )
                if not len(alive):
                    return result
        result[alive] = True
        return result


def _bitmap(f: BloomFilter) -> np.ndarray:
    """A filter's bitmap as packed: padded to a multiple of 8 bytes, so that every
    packed filter starts at a multiple of 8 (word filters are read as ``uint64``)."""
    bits = f._bits
    pad = -len(bits) % 8
    return np.concatenate([bits, np.zeros(pad, dtype=np.uint8)]) if pad else bits


class BloomArena(Arena[BloomFilter]):
    """The bitmaps of many filters side by side in one buffer, each copied in once
    (see ``arena``): a new ``BloomFilterSet`` over mostly the same filters copies only
    the new ones."""

    def __init__(self, min_bytes: int = 1 << 16) -> None:
        super().__init__(np.uint8, _bitmap, min_bytes)


def _next_probe_each(pos: np.ndarray, step: np.ndarray, num_bits: np.ndarray) -> None:
    """``_next_probe`` with a modulus per element."""
    u = pos.view(np.uint64)
    u += step.view(np.uint64)
    np.minimum(u, u - num_bits.view(np.uint64), out=u)
