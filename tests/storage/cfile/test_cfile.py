"""CFileWriter/CFileReader: layout, zone maps, ranges, value index, corruption."""

from __future__ import annotations

import bisect
import datetime
import decimal
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kudusql.common.errors import CorruptionError, OperationalError, ProgrammingError
from kudusql.storage.cfile import BlockCache, CFileReader, CFileWriter, Compression, Encoding
from kudusql.storage.cfile.cfile import HEADER_SIZE, MAGIC, TRAILER_SIZE
from tests.support.tmpfs import small_tmpfs

from .test_encodings import assert_same

D = decimal.Decimal


def write(
    path: Path,
    t: pa.DataType,
    pages: list[pa.Array[Any]],
    *,
    encoding: Encoding | None = None,
    compression: Compression = Compression.LZ4,
    metadata: dict[str, str] | None = None,
) -> int:
    w = CFileWriter(str(path), t, encoding=encoding, compression=compression, sync=False)
    for p in pages:
        w.append_page(p)
    return w.finish(metadata)


TYPED_PAGES: list[tuple[pa.DataType, list[list[Any]]]] = [
    (pa.bool_(), [[True, None, False], [], [None, None], [True, True]]),
    (pa.int8(), [[-128, 127, None], [], [None], [0, 0, 0]]),
    (pa.int16(), [[-(2**15), 2**15 - 1], [None, 5]]),
    (pa.int32(), [[-(2**31), None, 2**31 - 1], [7] * 100]),
    (pa.int64(), [[-(2**63), 2**63 - 1, None], list(range(1000)), [None] * 3]),
    (pa.float32(), [[1.5, float("nan"), None, -float("inf")], [float("nan")], []]),
    (pa.float64(), [[0.5, float("inf"), float("nan"), None, -2.5], [None, float("nan")]]),
    (
        pa.decimal128(38, 4),
        [[D("-" + "9" * 34 + ".9999"), D("1.5"), None], [D("9" * 34 + ".9999")]],
    ),
    (pa.string(), [["b", "a\x00", None, "a"], ["x" * 100_000, ""], [None]]),
    (pa.binary(), [[b"\x00", b"\xff\x00", b""], [], [b"q"] * 50]),
    (pa.date32(), [[datetime.date(2000, 1, 1), None], [datetime.date(1969, 12, 31)]]),
    (pa.timestamp("us"), [[0, 10**15, None], [-(10**15)]]),
]


@pytest.mark.parametrize("compression", list(Compression))
@pytest.mark.parametrize("encoding", [None, *Encoding])
@pytest.mark.parametrize(("t", "page_values"), TYPED_PAGES, ids=lambda x: str(x)[:20])
def test_round_trip_and_zone_maps(
    tmp_path: Path,
    t: pa.DataType,
    page_values: list[list[Any]],
    encoding: Encoding | None,
    compression: Compression,
) -> None:
    pages = [pa.array(v, t) for v in page_values]
    path = tmp_path / "c.cfile"
    size = write(path, t, pages, encoding=encoding, compression=compression)
    assert size == os.path.getsize(path)
    r = CFileReader(str(path), t)
    total = sum(len(p) for p in pages)
    assert r.num_pages == len(pages)
    assert r.num_values == total
    assert r.page_offsets.dtype == np.int64
    assert r.page_offsets.tolist() == [0, *np.cumsum([len(p) for p in pages]).tolist()]
    assert r.null_counts.tolist() == [p.null_count for p in pages]
    for i, p in enumerate(pages):
        assert_same(r.read_page(i), p)
        vals = [v for v in p.to_pylist() if v is not None]
        nans = [v for v in vals if isinstance(v, float) and math.isnan(v)]
        assert r.nan_counts[i] == len(nans)
        vals = [v for v in vals if not (isinstance(v, float) and math.isnan(v))]
        assert r.page_mins[i].as_py() == (min(vals) if vals else None)
        assert r.page_maxs[i].as_py() == (max(vals) if vals else None)
    assert r.page_mins.type == t
    whole = r.read_all()
    assert whole.type == t
    assert_same(whole.combine_chunks(), pa.concat_arrays(pages))
    r.close()


def test_sliced_pages(tmp_path: Path) -> None:
    base = pa.array([None if i % 7 == 0 else i * 3 for i in range(1000)], pa.int64())
    pages = [base.slice(3, 100), base.slice(103, 1), base.slice(104, 500)]
    write(tmp_path / "s", pa.int64(), pages)
    r = CFileReader(str(tmp_path / "s"), pa.int64())
    assert_same(r.read_all().combine_chunks(), base.slice(3, 601))


def test_read_range_across_pages(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    sizes = [0, 5, 1, 0, 17, 64, 3, 0, 100]
    data = pa.array(rng.integers(0, 1000, sum(sizes)))
    pages, at = [], 0
    for s in sizes:
        pages.append(data.slice(at, s))
        at += s
    write(tmp_path / "r", pa.int64(), pages)
    cache = BlockCache(1 << 20)
    r = CFileReader(str(tmp_path / "r"), pa.int64(), cache)
    n = len(data)
    for start in range(0, n + 1, 3):
        for stop in (start, start + 1, start + 7, start + 40, n, n + 5):
            got = r.read_range(start, stop)
            assert got.type == pa.int64()
            want = data.slice(start, max(0, min(stop, n) - start))
            assert got.to_pylist() == want.to_pylist()
    with pytest.raises(ProgrammingError):
        r.read_range(-1, 3)


def test_empty_file(tmp_path: Path) -> None:
    write(tmp_path / "e", pa.string(), [])
    r = CFileReader(str(tmp_path / "e"), pa.string())
    assert r.num_pages == 0
    assert r.num_values == 0
    assert r.page_offsets.tolist() == [0]
    assert len(r.read_all()) == 0
    assert len(r.read_range(0, 10)) == 0
    assert r.lower_bound(b"x") == 0
    assert r.find_keys(pa.array([b"x", None], pa.binary())).tolist() == [-1, -1]


def test_metadata_round_trip(tmp_path: Path) -> None:
    meta = {"min_key": "\x00\x01", "max_key": "zz", "ünï": "çødé"}
    write(tmp_path / "m", pa.int32(), [pa.array([1], pa.int32())], metadata=meta)
    r = CFileReader(str(tmp_path / "m"), pa.int32())
    assert r.metadata == meta


def test_writer_rejects_wrong_type_and_reuse(tmp_path: Path) -> None:
    w = CFileWriter(str(tmp_path / "w"), pa.int64(), sync=False)
    with pytest.raises(ProgrammingError):
        w.append_page(pa.array([1], pa.int32()))
    w.append_page(pa.chunked_array([[1], [2, 3]]))
    w.finish()
    with pytest.raises(ProgrammingError):
        w.append_page(pa.array([1]))
    assert CFileReader(str(tmp_path / "w"), pa.int64()).read_all().to_pylist() == [1, 2, 3]
    with pytest.raises(ProgrammingError):
        CFileWriter(str(tmp_path / "x"), pa.list_(pa.int8()))


def test_abort_deletes(tmp_path: Path) -> None:
    w = CFileWriter(str(tmp_path / "a"), pa.int64())
    w.append_page(pa.array([1, 2]))
    w.abort()
    assert not (tmp_path / "a").exists()
    w.abort()  # idempotent


def test_wrong_type_on_open(tmp_path: Path) -> None:
    write(tmp_path / "t", pa.int64(), [pa.array([1])])
    with pytest.raises(CorruptionError):
        CFileReader(str(tmp_path / "t"), pa.int32())


def test_page_alignment(tmp_path: Path) -> None:
    pages = [pa.array(["a" * i for i in range(k)]) for k in range(1, 9)]
    write(tmp_path / "al", pa.string(), pages, compression=Compression.NONE)
    r = CFileReader(str(tmp_path / "al"), pa.string())
    assert all(off % 8 == 0 for off in r._offsets_list)


def test_plain_pages_are_zero_copy_from_the_map(tmp_path: Path) -> None:
    arr = pa.array(np.arange(50_000, dtype=np.int64) * 7919 % 1_000_003)
    write(tmp_path / "z", pa.int64(), [arr], encoding=Encoding.PLAIN, compression=Compression.NONE)
    r = CFileReader(str(tmp_path / "z"), pa.int64())
    page = r.read_page(0)
    buf = r._buf
    assert buf is not None
    data = page.buffers()[1]
    assert data is not None
    assert buf.address <= data.address < buf.address + buf.size
    assert data.address % 8 == 0
    r.close()
    assert page.to_pylist()[:3] == arr.to_pylist()[:3]  # still valid after close


def test_cache_use(tmp_path: Path) -> None:
    pages = [pa.array(np.arange(i * 100, (i + 1) * 100)) for i in range(5)]
    write(tmp_path / "c", pa.int64(), pages)
    cache = BlockCache(1 << 20)
    r = CFileReader(str(tmp_path / "c"), pa.int64(), cache)
    p0 = r.read_page(0)
    assert cache.misses == 1
    assert r.read_page(0) is p0
    assert cache.hits == 1
    r2 = CFileReader(str(tmp_path / "c"), pa.int64(), cache)
    assert r2.uid == r.uid
    assert r2.read_page(0) is p0
    cache.invalidate_file(r.uid)
    assert r.read_page(0) is not p0
    with pytest.raises(ProgrammingError):
        r.read_page(5)
    # a rewritten file at the same path gets a new uid
    time.sleep(0.01)
    write(tmp_path / "c", pa.int64(), pages[:2])
    r3 = CFileReader(str(tmp_path / "c"), pa.int64(), cache)
    assert r3.uid != r.uid


# --------------------------------------------------------------------------- corruption


def make_file(tmp_path: Path) -> tuple[Path, CFileReader]:
    pages = [pa.array([f"value-{i:05d}" for i in range(k * 100, k * 100 + 100)]) for k in range(4)]
    path = tmp_path / "col.cfile"
    write(path, pa.string(), pages)
    return path, CFileReader(str(path), pa.string())


def flip(path: Path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x10
    path.write_bytes(bytes(data))


def test_flipped_page_byte(tmp_path: Path) -> None:
    path, r = make_file(tmp_path)
    off, length = r._offsets_list[2], r._lengths_list[2]
    r.close()
    flip(path, off + length // 2)
    r = CFileReader(str(path), pa.string())  # open only reads the footer
    assert r.read_page(1).to_pylist()[0] == "value-00100"
    with pytest.raises(CorruptionError) as ei:
        r.read_page(2)
    assert ei.value.path == str(path)
    assert ei.value.offset == off
    assert str(path) in str(ei.value)
    with pytest.raises(CorruptionError):
        r.read_all()
    with pytest.raises(CorruptionError):
        r.read_range(250, 260)


def test_flipped_footer_byte(tmp_path: Path) -> None:
    path, r = make_file(tmp_path)
    foff = r._footer_offset
    r.close()
    size = path.stat().st_size
    for pos in (foff, foff + 40, size - TRAILER_SIZE - 1):
        p2 = tmp_path / f"copy{pos}"
        p2.write_bytes(path.read_bytes())
        flip(p2, pos)
        with pytest.raises(CorruptionError) as ei:
            CFileReader(str(p2), pa.string())
        assert ei.value.path == str(p2)


@pytest.mark.parametrize("where", ["header", "trailer", "trailer_magic", "trailer_offset"])
def test_flipped_header_or_trailer(tmp_path: Path, where: str) -> None:
    path, r = make_file(tmp_path)
    r.close()
    size = path.stat().st_size
    pos = {
        "header": 3,
        "trailer": size - TRAILER_SIZE + 17,
        "trailer_magic": size - 2,
        "trailer_offset": size - TRAILER_SIZE,
    }[where]
    flip(path, pos)
    with pytest.raises(CorruptionError):
        CFileReader(str(path), pa.string())


def test_truncated(tmp_path: Path) -> None:
    path, r = make_file(tmp_path)
    r.close()
    data = path.read_bytes()
    for cut in (0, 1, HEADER_SIZE, len(data) // 2, len(data) - TRAILER_SIZE, len(data) - 1):
        p2 = tmp_path / f"cut{cut}"
        p2.write_bytes(data[:cut])
        with pytest.raises(CorruptionError) as ei:
            CFileReader(str(p2), pa.string())
        assert str(p2) in str(ei.value)
    assert data[:8] == MAGIC
    assert data[-8:] == MAGIC


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(OperationalError, match=r"nope\.cfile"):
        CFileReader(str(tmp_path / "nope.cfile"), pa.int64())


# --------------------------------------------------------------------------- value index


def write_keys(tmp_path: Path, keys: list[bytes], page_size: int, name: str = "k") -> CFileReader:
    pages = [pa.array(keys[i : i + page_size], pa.binary()) for i in range(0, len(keys), page_size)]
    # some empty pages in between must be skipped by the index
    if len(pages) > 2:
        pages.insert(1, pa.array([], pa.binary()))
        pages.append(pa.array([], pa.binary()))
    path = tmp_path / name
    write(path, pa.binary(), pages, encoding=Encoding.PLAIN)
    return CFileReader(str(path), pa.binary(), BlockCache(1 << 24))


def oracle_lower_bound(keys: list[bytes], k: bytes) -> int:
    return bisect.bisect_left(keys, k)


def probes(keys: list[bytes], rng: np.random.Generator, width: int | None) -> list[bytes]:
    out = list(keys[:: max(1, len(keys) // 50)])
    out += [k + b"\x00" for k in out[:20]] + [k[:-1] for k in out[:20] if k]
    out += [b"", b"\x00", b"\xff" * 40]
    for _ in range(200):
        n = width if width is not None else int(rng.integers(0, 6))
        out.append(bytes(rng.integers(0, 3, n).astype(np.uint8)))
    return out


@pytest.mark.parametrize("width", [None, 1, 3, 4, 8, 12])
@pytest.mark.parametrize("page_size", [1, 7, 100, 5000])
def test_lower_bound_and_find_keys_vs_oracle(width: int | None, page_size: int) -> None:
    import tempfile

    rng = np.random.default_rng(page_size * 10 + (width or 0))
    if width is None:
        raw = {
            bytes(rng.integers(0, 3, int(rng.integers(0, 6))).astype(np.uint8)) for _ in range(700)
        }
    else:
        raw = {bytes(rng.integers(0, 3, width).astype(np.uint8)) for _ in range(700)}
    keys = sorted(raw)
    with tempfile.TemporaryDirectory() as d:
        r = write_keys(Path(d), keys, page_size)
        ps = probes(keys, rng, width)
        for k in ps:
            assert r.lower_bound(k) == oracle_lower_bound(keys, k), k
        want = [keys.index(k) if k in raw else -1 for k in ps]
        got = r.find_keys(pa.array(ps, pa.binary()))
        assert got.dtype == np.int64
        assert got.tolist() == want
        # fixed-width query batches (vectorized path) of every width, incl. other widths
        for w in (1, 2, 3, 4, 8, 9):
            fixed = [k for k in ps if len(k) == w] + [
                bytes(rng.integers(0, 3, w).astype(np.uint8)) for _ in range(100)
            ]
            if not fixed:
                continue
            got = r.find_keys(pa.array(fixed, pa.binary()))
            assert got.tolist() == [keys.index(k) if k in raw else -1 for k in fixed]
        r.close()


@pytest.mark.parametrize("width", [4, 8, 5])
def test_find_keys_whole_file_array_equals_page_search(tmp_path: Path, width: int) -> None:
    """A batch touching many pages is answered from one sorted array of the whole key
    file (kept in the block cache, evicted like a page); a small batch, or a reader
    without a cache, searches page by page. All answer alike, including keys whose
    bytes straddle the sign bit and keys with trailing NUL bytes."""
    rng = np.random.default_rng(width)
    raw = {rng.bytes(width) for _ in range(5000)} | {b"\x00" * width, b"\xff" * width}
    raw |= {
        b"\x7f" + b"\xff" * (width - 1),
        b"\x80" + b"\x00" * (width - 1),
        b"a" + b"\x00" * (width - 1),
    }
    keys = sorted(raw)
    r = write_keys(tmp_path, keys, 64)
    assert r.cache is not None
    plain = CFileReader(r.path, pa.binary(), None)
    absent = [rng.bytes(width) for _ in range(300)]
    batch = [k for k in keys[::7]] + absent
    want = [keys.index(k) if k in raw else -1 for k in batch]
    assert plain.find_keys(pa.array(batch, pa.binary())).tolist() == want
    small = r.find_keys(pa.array(batch[:3], pa.binary()))  # 3 keys: page by page
    assert small.tolist() == want[:3]
    assert (r.uid, -1) not in r.cache._entries
    assert r.find_keys(pa.array(batch, pa.binary())).tolist() == want
    assert (r.uid, -1) in r.cache._entries  # built once, then served from the cache
    assert r.find_keys(pa.array(batch[:3], pa.binary())).tolist() == want[:3]
    r.cache.clear()
    tiny = CFileReader(r.path, pa.binary(), BlockCache(1024))  # too small to hold it
    assert tiny.find_keys(pa.array(batch, pa.binary())).tolist() == want
    assert tiny.cache is not None and (tiny.uid, -1) not in tiny.cache._entries
    other = [k + b"\x00" for k in keys[::7]]  # another width than the file's: all absent
    assert r.find_keys(pa.array(other, pa.binary())).tolist() == [-1] * len(other)


def test_find_keys_nulls_and_types(tmp_path: Path) -> None:
    keys = [b"a", b"a\x00", b"ab", b"b"]
    r = write_keys(tmp_path, keys, 2)
    got = r.find_keys(pa.array([b"ab", None, b"a\x00", b"zz", b"a"], pa.binary()))
    assert got.tolist() == [2, -1, 1, -1, 0]
    assert r.find_keys([b"b", b"c"]).tolist() == [3, -1]
    assert r.find_keys(pa.chunked_array([[b"b"], [b"a"]], pa.binary())).tolist() == [3, 0]
    assert r.find_keys(pa.array(["ab"])).tolist() == [2]
    assert r.lower_bound(b"a\x00\x00") == 2
    assert r.lower_bound(b"") == 0
    assert r.lower_bound(b"c") == 4
    with pytest.raises(ProgrammingError):
        r.find_keys(pa.array([1, 2]))
    ints = tmp_path / "ints"
    write(ints, pa.int64(), [pa.array([1])])
    with pytest.raises(ProgrammingError):
        CFileReader(str(ints), pa.int64()).lower_bound(b"x")


def test_string_key_file(tmp_path: Path) -> None:
    keys = sorted(["apple", "banana", "cherry", "é"])
    write(tmp_path / "s", pa.string(), [pa.array(keys[:2]), pa.array(keys[2:])])
    r = CFileReader(str(tmp_path / "s"), pa.string())
    assert r.lower_bound(b"b") == 1
    assert r.find_keys(pa.array([b"cherry", "é".encode(), b"x"])).tolist() == [2, 3, -1]


@settings(max_examples=30, deadline=None)
@given(
    st.sets(st.binary(max_size=5), max_size=80),
    st.lists(st.binary(max_size=6), max_size=40),
    st.integers(1, 20),
)
def test_hypothesis_value_index(raw: set[bytes], queries: list[bytes], page_size: int) -> None:
    import tempfile

    keys = sorted(raw)
    with tempfile.TemporaryDirectory() as d:
        r = write_keys(Path(d), keys, page_size)
        for q in queries:
            assert r.lower_bound(q) == bisect.bisect_left(keys, q)
        got = r.find_keys(pa.array(queries, pa.binary())).tolist()
        assert got == [keys.index(q) if q in raw else -1 for q in queries]
        r.close()


def test_value_index_over_large_pages(tmp_path: Path) -> None:
    """Point and batch lookups over a 200k-key file of 32k-key LZ4 pages (speed is
    measured by benchmarks/bench_point_lookup.py, not asserted here)."""
    n = 200_000
    ints = (np.arange(n, dtype=np.uint64) * 3).astype(">u8")  # big-endian = memcmp order
    data = ints.tobytes()
    keys_arr = pa.Array.from_buffers(
        pa.binary(),
        n,
        [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * 8), pa.py_buffer(data)],
    )
    pages = [keys_arr.slice(i, 32_768) for i in range(0, n, 32_768)]
    write(tmp_path / "pk", pa.binary(), pages, compression=Compression.LZ4)
    r = CFileReader(str(tmp_path / "pk"), pa.binary(), BlockCache(1 << 26))
    probe = (12_345 * 3).to_bytes(8, "big")
    assert r.lower_bound(probe) == 12_345
    assert r.lower_bound(((n - 1) * 3 + 1).to_bytes(8, "big")) == n
    rng = np.random.default_rng(0)
    q = rng.integers(0, 3 * n, 100_000).astype(">u8")
    qarr = pa.Array.from_buffers(
        pa.binary(),
        len(q),
        [None, pa.py_buffer(np.arange(len(q) + 1, dtype=np.int32) * 8), pa.py_buffer(q.tobytes())],
    )
    few = r.find_keys(qarr[:10])  # page by page
    got = r.find_keys(qarr)  # one batch over the whole-file key array
    qi = q.astype(np.int64)
    want = np.where(qi % 3 == 0, qi // 3, -1)
    assert np.array_equal(got, want)
    assert np.array_equal(few, want[:10])


def test_open_readers_hold_no_file_descriptors(tmp_path: Path) -> None:
    write(tmp_path / "fd", pa.int64(), [pa.array(np.arange(1000))], compression=Compression.NONE)
    before = len(os.listdir("/proc/self/fd"))
    readers = [CFileReader(str(tmp_path / "fd"), pa.int64()) for _ in range(50)]
    assert len(os.listdir("/proc/self/fd")) - before < 5
    os.unlink(tmp_path / "fd")  # like compaction deleting an input rowset
    assert readers[7].read_all().to_pylist() == list(range(1000))


def test_zone_maps_exact_for_dict_and_decimal_pages(tmp_path: Path) -> None:
    """Zone maps from the DICT dictionary / the decimal fast path equal pc.min_max."""
    import pyarrow.compute as pc

    rng = np.random.default_rng(11)
    words = ["", "a", "a\x00", "ab", "b", "\xff", "zz", "Z"]
    str_pages = [
        pa.array([words[i] if i >= 0 else None for i in rng.integers(-1, len(words), 500)]),
        pa.array(["x"] * 40 + [None] * 3 + [""]),
        pa.array([None, None], type=pa.string()),
        pa.array([f"{v:020d}" for v in rng.integers(0, 10**6, 9000)]),
    ]
    big = 2**64
    dec_vals: list[Any] = [D(int(v)) / 100 for v in rng.integers(-(10**15), 10**15, 300)] + [
        D(big * 3 + 5) / 100,
        D(-big * 3 + 1) / 100,
        D(-1) / 100,
        D(big - 1) / 100,
        None,
    ]
    dec_pages = [
        pa.array(dec_vals, type=pa.decimal128(38, 2)),
        pa.array([D(-big) / 100, D(-big + 1) / 100, None], type=pa.decimal128(38, 2)),
        pa.array([None], type=pa.decimal128(38, 2)),
    ]
    for t, pages in ((pa.string(), str_pages), (pa.decimal128(38, 2), dec_pages)):
        for enc in (None, Encoding.DICT, Encoding.PLAIN):
            path = tmp_path / f"z-{t}-{enc}"
            write(path, t, [p.slice(1) for p in pages], encoding=enc)
            r = CFileReader(str(path), t)
            for i, p in enumerate(pages):
                p = p.slice(1)
                mm = pc.min_max(p)
                assert r.page_mins[i].as_py() == mm["min"].as_py(), (t, enc, i)
                assert r.page_maxs[i].as_py() == mm["max"].as_py(), (t, enc, i)
            assert_same(
                r.read_all().combine_chunks(), pa.concat_arrays([p.slice(1) for p in pages])
            )
            r.close()


@settings(max_examples=60, deadline=None)
@given(
    width=st.sampled_from([4, 8]),
    values=st.lists(st.binary(min_size=8, max_size=8), min_size=1, max_size=60),
    skip=st.integers(0, 3),
    as_string=st.booleans(),
)
def test_zone_maps_of_word_width_pages_equal_pc_min_max(
    tmp_path_factory: pytest.TempPathFactory,
    width: int,
    values: list[bytes],
    skip: int,
    as_string: bool,
) -> None:
    """Pages whose values are all 4 or 8 bytes (integer primary-key files) get their
    zone maps from machine-word comparisons; they equal Arrow's string comparisons,
    with NUL and 0xff bytes, on sliced pages, and for string columns."""
    import pyarrow.compute as pc

    vals = [v[:width] for v in values]
    t = pa.string() if as_string else pa.binary()
    if as_string:
        vals = [bytes(b & 0x7F for b in v) for v in vals]  # valid UTF-8
    page = pa.array([v.decode() if as_string else v for v in vals], t)
    page = page.slice(min(skip, len(page) - 1))
    path = tmp_path_factory.mktemp("words") / "c.cfile"
    write(path, t, [page], encoding=Encoding.PLAIN)  # no dictionary: the word path
    r = CFileReader(str(path), t)
    mm = pc.min_max(page)
    assert r.page_mins[0].as_py() == mm["min"].as_py()
    assert r.page_maxs[0].as_py() == mm["max"].as_py()
    r.close()


@pytest.mark.parametrize("t", [pa.float32(), pa.float64()])
def test_float_zone_maps_of_sliced_pages_equal_arrow(tmp_path: Path, t: pa.DataType) -> None:
    """Float zone maps (numpy's ``fmin``/``fmax``, NaNs counted apart) of pages that
    start inside their buffers, with NULLs, NaNs, infinities and both zeros, equal
    the pages' own NaN count and the min and max of their other values."""

    rng = np.random.default_rng(5)
    specials = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, None]
    values = [
        specials[i] if i < len(specials) else float(v)
        for i, v in zip(rng.integers(0, 12, 400), rng.normal(size=400), strict=True)
    ]
    whole = pa.array(values, t)
    pages = [
        whole.slice(3, 150),
        whole.slice(157, 200),
        pa.array([None, float("nan")], t),
        pa.array([-0.0, 0.0], t),
    ]
    path = tmp_path / "f.cfile"
    write(path, t, pages)
    r = CFileReader(str(path), t)
    for i, p in enumerate(pages):
        vals = [v for v in p.to_pylist() if v is not None]
        assert r.nan_counts[i] == sum(math.isnan(v) for v in vals)
        vals = [v for v in vals if not math.isnan(v)]
        assert r.page_mins[i].as_py() == (min(vals) if vals else None), i
        assert r.page_maxs[i].as_py() == (max(vals) if vals else None), i
    r.close()


@pytest.mark.parametrize("pages", [1, 40])
def test_a_full_disk_is_an_operational_error_and_leaves_no_file(tmp_path: Path, pages: int) -> None:
    """The disk fills in a page write or in finish's flush; either way the writer's
    abort (whose close flushes the buffer again, and fails again) raises nothing of its
    own, and the partial file is gone."""
    with small_tmpfs(tmp_path / "mnt", "256k") as mnt:
        path = mnt / "c"
        w = CFileWriter(str(path), pa.binary(), compression=Compression.NONE, sync=True)
        rows = 400_000 // pages
        with pytest.raises(OperationalError, match="could not write") as e:
            try:
                for _ in range(pages):
                    w.append_page(pa.array([os.urandom(16) for _ in range(rows // 16)]))
                w.finish()
            except OperationalError:
                w.abort()
                raise
        assert str(path) in str(e.value)
        assert not path.exists()
