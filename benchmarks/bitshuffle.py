"""BIT_SHUFFLE against the other encodings of fixed-width pages, on the same data: page
size and decode speed of 64k-row pages (a tool, not a rival benchmark):
``python -m benchmarks.bitshuffle``. The figures behind AUTO's choice
(``kudusql/storage/cfile/FORMAT.md``, "Choice of encoding") come from it.

Every page is LZ4-compressed where that pays (the page rule); "size" is the stored page.
For integers the rival is BITPACK (frame of reference), for floats PLAIN (BITPACK does
not apply to them). The ratios are BIT_SHUFFLE / rival: below 1 BIT_SHUFFLE is smaller
(size) or faster (time).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.storage.cfile.encodings import Compression, Encoding
from kudusql.storage.cfile.page import decode_page, encode_page

N = 65536


def _cases() -> list[tuple[str, pa.Array[Any], Encoding]]:
    rng = np.random.default_rng(7)
    ts = 1_700_000_000_000_000 + np.cumsum(rng.integers(0, 2000, N))  # sorted micros
    spiky = rng.integers(0, 1000, N)
    spiky[rng.integers(0, N, 20)] = 2**62  # a few outliers widen frame of reference
    wave = (np.sin(np.arange(N) / 500) * 40 + 20 + rng.normal(0, 0.05, N)).astype(np.float32)
    return [
        ("int64 uniform 0..1e6", pa.array(rng.integers(0, 10**6, N)), Encoding.BITPACK),
        ("int32 uniform 0..8000", pa.array(rng.integers(0, 8000, N, dtype=np.int32)),
         Encoding.BITPACK),
        ("int64 sorted timestamps", pa.array(ts), Encoding.BITPACK),
        ("int64 small + outliers", pa.array(spiky), Encoding.BITPACK),
        ("int64 ids 1..n", pa.array(np.arange(1, N + 1)), Encoding.BITPACK),
        ("float64 prices (2 dp)", pa.array((rng.random(N) * 100).round(2)), Encoding.PLAIN),
        ("float64 random", pa.array(rng.random(N)), Encoding.PLAIN),
        ("float32 sensor wave", pa.array(wave), Encoding.PLAIN),
    ]  # fmt: skip


def _best(f: Callable[[], object], rounds: int = 5, reps: int = 10) -> float:
    """Microseconds per call, best of ``rounds`` (the machine may be shared)."""
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(reps):
            f()
        best = min(best, (time.perf_counter() - t) / reps)
    return best * 1e6


def main() -> None:
    print(
        f"{'data (64k rows)':26} {'rival':8} {'size':>8} {'BS size':>8} {'ratio':>6}"
        f" {'dec us':>7} {'BS dec':>7} {'ratio':>6} {'enc us':>7} {'BS enc':>7}  AUTO (enc)"
    )
    for name, arr, rival in _cases():
        row = []
        for enc in (rival, Encoding.BIT_SHUFFLE):
            page = encode_page(arr, enc, Compression.LZ4)
            back = decode_page(page, arr.type, "bench", 0)
            assert back.equals(arr), (name, enc)
            dec = _best(lambda p=page, a=arr: decode_page(p, a.type, "bench", 0))
            enc_us = _best(lambda e=enc, a=arr: encode_page(a, e, Compression.LZ4))
            row.append((len(page), dec, enc_us))
        (rs, rd, re_), (bs, bd, be) = row
        auto = encode_page(arr, None, Compression.LZ4)
        picked = Encoding(auto[0]).name
        auto_us = _best(lambda a=arr: encode_page(a, None, Compression.LZ4))
        print(
            f"{name:26} {rival.name:8} {rs:8d} {bs:8d} {bs / rs:6.2f}"
            f" {rd:7.0f} {bd:7.0f} {bd / rd:6.2f} {re_:7.0f} {be:7.0f}"
            f"  {picked} ({auto_us:.0f} us)"
        )


if __name__ == "__main__":
    main()
