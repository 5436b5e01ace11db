"""Decode speed of each CFile page encoding on 64k-row pages (a tool, not a rival
benchmark): ``python -m benchmarks.page_decode``. The figures quoted at the top of
kudusql/storage/cfile/encodings.py come from it."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.storage.cfile.encodings import Compression, Encoding
from kudusql.storage.cfile.page import decode_page, encode_page


def main() -> None:

    rng = np.random.default_rng(1)
    n = 65536
    cases: list[tuple[str, pa.Array[Any], Encoding, Compression]] = [
        ("int64 PLAIN none", pa.array(rng.integers(0, 10**6, n)), Encoding.PLAIN, Compression.NONE),
        ("int64 PLAIN lz4", pa.array(rng.integers(0, 10**6, n)), Encoding.PLAIN, Compression.LZ4),
        ("int64 PLAIN zstd", pa.array(rng.integers(0, 10**6, n)), Encoding.PLAIN, Compression.ZSTD),
        (
            "int64 BITPACK 20b",
            pa.array(rng.integers(0, 10**6, n)),
            Encoding.BITPACK,
            Compression.NONE,
        ),
        ("int64 BITPACK 8b", pa.array(rng.integers(0, 200, n)), Encoding.BITPACK, Compression.NONE),
        (
            "int64 RLE runs~64",
            pa.array(np.repeat(rng.integers(0, 10**9, n // 64), 64)),
            Encoding.RLE,
            Compression.NONE,
        ),
        (
            "int32 BITPACK 13b",
            pa.array(rng.integers(0, 8000, n).astype(np.int32)),
            Encoding.BITPACK,
            Compression.NONE,
        ),
        ("float64 PLAIN lz4", pa.array(rng.random(n).round(3)), Encoding.PLAIN, Compression.LZ4),
        (
            "bool RLE",
            pa.array(np.repeat(rng.integers(0, 2, n // 16).astype(bool), 16)),
            Encoding.RLE,
            Compression.NONE,
        ),
        (
            "string PLAIN lz4",
            pa.array([f"customer#{i:011d}" for i in range(n)]),
            Encoding.PLAIN,
            Compression.LZ4,
        ),
        (
            "string DICT lz4",
            pa.array([f"value-{i % 100:014d}" for i in range(n)]),
            Encoding.DICT,
            Compression.LZ4,
        ),
    ]
    for name, arr, enc, comp in cases:
        page = pa.py_buffer(encode_page(arr, enc, comp))
        reps = 50
        t0 = time.perf_counter()
        for _ in range(reps):
            out = decode_page(page, arr.type, "bench", 0)
        dt = (time.perf_counter() - t0) / reps
        print(
            f"{name:22s} {out.nbytes / dt / 1e6:7.0f} MB/s {n / dt / 1e6:6.0f} Mvalues/s "
            f"{dt * 1e6:6.0f} us/page  stored {page.size / arr.nbytes:5.0%}"
        )


if __name__ == "__main__":
    main()
