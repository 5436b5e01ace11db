"""BIT_SHUFFLE in files: format 1 files (whose BIT_SHUFFLE columns hold frame-of-reference
BITPACK pages) still read; SQL's ENCODING BIT_SHUFFLE and the client's
ENCODING_BIT_SHUFFLE write bitshuffle pages, BITPACK writes bit-packed ones."""

from __future__ import annotations

import glob
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import kudusql
import kudusql.client as kudu
from kudusql.common.errors import CorruptionError
from kudusql.storage.cfile import CFileReader, CFileWriter, Encoding
from kudusql.storage.cfile.cfile import FORMAT_VERSION, TRAILER, TRAILER_SIZE

FIXTURE = Path(__file__).parent / "fixtures" / "v1_bitpack.cfile"


def test_a_format_1_file_reads_unchanged() -> None:
    """Written by the format 1 writer for a column with encoding 'bit_shuffle' (which
    then meant frame-of-reference bit-packing): its pages are BITPACK and read as such."""
    with CFileReader(str(FIXTURE), pa.int64()) as r:
        assert r.page_encodings == [Encoding.BITPACK, Encoding.BITPACK, Encoding.PLAIN,
                                    Encoding.BITPACK]  # fmt: skip
        assert r.encoding_name == "BITPACK"
        assert r.metadata == {"note": "format 1, BITPACK pages"}
        got = r.read_all().to_pylist()
    assert got == [5, None, -3, 2**40, None, 7, *range(1000, 1300), *[42] * 20]
    assert FIXTURE.read_bytes()[8:12] == struct.pack("<I", 1)


def test_files_are_written_as_format_2_and_unknown_versions_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.cfile"
    w = CFileWriter(str(path), pa.int64(), encoding=Encoding.BIT_SHUFFLE, sync=False)
    w.append_page(pa.array(np.arange(1000)))
    w.finish()
    data = bytearray(path.read_bytes())
    assert FORMAT_VERSION == 2 and data[8:12] == struct.pack("<I", 2)
    with CFileReader(str(path), pa.int64()) as r:
        assert r.page_encodings == [Encoding.BIT_SHUFFLE]
        assert r.read_all().to_pylist() == list(range(1000))
    toff = len(data) - TRAILER_SIZE
    foff, flen, fcrc, _, _, magic = TRAILER.unpack_from(data, toff)
    TRAILER.pack_into(data, toff, foff, flen, fcrc, 3, 0, magic)
    struct.pack_into("<I", data, toff + 20, zlib.crc32(data[toff : toff + 20]))
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="unsupported CFile format version 3"):
        CFileReader(str(path), pa.int64())


def _page_encodings(db: str, column_id: int) -> set[int]:
    out: set[int] = set()
    for f in glob.glob(os.path.join(db, "tablets", "*", "rowsets", "*", f"c{column_id}.cfile")):
        with CFileReader(f, pa.int64() if column_id != 3 else pa.float64()) as r:
            out.update(r.page_encodings)
    return out


def test_sql_bit_shuffle_writes_bitshuffle_pages(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    with kudusql.connect(db, maintenance=False) as c:
        c.execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT ENCODING BIT_SHUFFLE, "
            "w BIGINT ENCODING BITPACK, f DOUBLE ENCODING BIT_SHUFFLE) "
            "PARTITION BY HASH (id) PARTITIONS 2"
        )
        c.execute("INSERT INTO t SELECT i, i * 7, i % 100, i / 4 FROM range(0, 5000) r(i)")
        c.execute("ALTER TABLE t EXECUTE FLUSH")
        assert c.execute("SELECT sum(v), sum(w), sum(f) FROM t").fetchall() == [
            (7 * 4999 * 5000 // 2, 50 * 4950, 4999 * 5000 / 2 / 4)
        ]
        shown = [(r[0], r[7]) for r in c.execute("DESCRIBE t").fetchall()]
        assert shown[1:] == [("v", "BIT_SHUFFLE"), ("w", "BITPACK"), ("f", "BIT_SHUFFLE")]
    assert _page_encodings(db, 1) == {Encoding.BIT_SHUFFLE}
    assert _page_encodings(db, 2) == {Encoding.BITPACK}
    assert _page_encodings(db, 3) == {Encoding.BIT_SHUFFLE}


def test_client_encoding_bit_shuffle_writes_bitshuffle_pages(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    client = kudu.connect(db)
    try:
        b = kudu.schema_builder()
        b.add_column("id", kudu.int64, primary_key=True)
        b.add_column("v", kudu.int64, encoding=kudu.ENCODING_BIT_SHUFFLE)
        schema = b.build()
        assert schema["v"].encoding == "bit_shuffle"
        table = client.create_table("t", schema, kudu.Partitioning().add_hash_partitions(["id"], 2))
        session = client.new_session()
        for i in range(300):
            op = table.new_insert({"id": i, "v": i * 3})
            session.apply(op)
        session.flush()
    finally:
        client.close()
    with kudusql.connect(db, maintenance=False) as c:
        c.execute("ALTER TABLE t EXECUTE FLUSH")
        assert c.execute("SELECT sum(v) FROM t").fetchall() == [(3 * 299 * 300 // 2,)]
    assert _page_encodings(db, 1) == {Encoding.BIT_SHUFFLE}
