"""One CFile page: fixed header + (validity bitmap + encoded values, maybe compressed) + CRC.

This module owns the page container (FORMAT.md, "Page"): choosing an encoding when the
caller leaves it open, compressing the body (kept raw unless it shrinks below 90%),
checksumming, and the reverse, where every failure becomes a CorruptionError naming the
file and the page's byte offset. Decoding is zero-copy where it can be: an uncompressed
PLAIN page wraps the caller's (memory-mapped) buffer.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import lz4.block
import numpy as np
import pyarrow as pa

from kudusql.common.errors import CorruptionError, ProgrammingError
from kudusql.storage.cfile.encodings import (
    Bytesish,
    Compression,
    Encoding,
    FormatError,
    Kind,
    TypeInfo,
    applicable,
    bit_width_of_range,
    bitmap_bytes,
    bitpack_size,
    bitshuffle,
    bool_values,
    count_runs,
    decode_bitpack,
    decode_bitshuffle,
    decode_dict,
    decode_plain,
    decode_rle,
    dict_sizes,
    dict_unlikely,
    encode_bitpack,
    encode_bitshuffle,
    encode_dict,
    encode_plain,
    encode_rle,
    int_values,
    pad8,
    type_info,
)

# encoding u8, compression u8, flags u8, reserved u8, num_values u32, null_count u32,
# uncompressed body size u32, stored body size u32, reserved u32
PAGE_HEADER = struct.Struct("<BBBBIIIII")
HEADER_SIZE = PAGE_HEADER.size  # 24
CRC_SIZE = 4
PAGE_OVERHEAD = HEADER_SIZE + CRC_SIZE
FLAG_VALIDITY = 0x01

# Compressed bodies are kept only when they are below this fraction of the raw size.
MIN_COMPRESSION_RATIO = 0.9
# Automatic choice: a specialised encoding must be below this fraction of PLAIN.
_AUTO_INT_RATIO = 0.85
_AUTO_BOOL_RATIO = 0.5
_AUTO_DICT_RATIO = 0.7
# Automatic choice: BIT_SHUFFLE (decoding 3-20x slower than BITPACK or PLAIN, see
# benchmarks/bitshuffle.py) must be below this fraction of the other choice's size,
# estimated from the page's first _BS_SAMPLE values shuffled and LZ4-compressed.
_AUTO_BS_RATIO = 0.5
_BS_SAMPLE = 4096

_ZSTD: pa.Codec | None = None
# Arrow's "lz4_raw" is the same raw LZ4 block format lz4.block writes; decompressing
# through Arrow reuses its memory pool (64-byte aligned) and is ~5x faster on 512 KiB
# pages than lz4.block.decompress, which allocates a fresh bytes object each time.
_LZ4_RAW: pa.Codec | None = pa.Codec("lz4_raw") if pa.Codec.is_available("lz4_raw") else None


def _zstd() -> pa.Codec:
    global _ZSTD
    if _ZSTD is None:
        _ZSTD = pa.Codec("zstd")
    return _ZSTD


def _lz4_decompress(stored: pa.Buffer, usize: int) -> pa.Buffer:
    if _LZ4_RAW is not None:
        return _LZ4_RAW.decompress(stored, decompressed_size=usize)
    return pa.py_buffer(lz4.block.decompress(stored, uncompressed_size=usize))


def _valid_mask(arr: pa.Array[Any]) -> np.ndarray | None:
    if arr.null_count == 0:
        return None
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _encode_values(
    arr: pa.Array[Any], info: TypeInfo, requested: Encoding | None, compressed: bool = True
) -> tuple[Encoding, list[Bytesish], pa.Array[Any] | None]:
    """Encode the values of ``arr`` (validity excluded).

    Returns (encoding used, byte chunks, the dictionary when DICT was used). The
    automatic choice estimates sizes from cheap statistics (runs, min/max bit width,
    a distinct-count sample for strings, a compressed sample for BIT_SHUFFLE, which it
    considers only for a ``compressed`` page) and encodes only the winner.
    """
    n = len(arr)
    if requested is not None and not applicable(requested, info):
        requested = Encoding.PLAIN
    if requested is Encoding.PLAIN or n == 0:
        return Encoding.PLAIN, encode_plain(arr, info), None
    if requested is Encoding.BIT_SHUFFLE:
        return Encoding.BIT_SHUFFLE, encode_bitshuffle(arr, info), None
    if info.kind is Kind.VAR:
        if requested is Encoding.DICT:
            denc = arr.dictionary_encode()
            return Encoding.DICT, encode_dict(arr, denc), denc.dictionary
        if not dict_unlikely(arr):
            plain, dsize, maybe = dict_sizes(arr)
            if maybe is not None and dsize < _AUTO_DICT_RATIO * plain:
                return Encoding.DICT, encode_dict(arr, maybe), maybe.dictionary
        return Encoding.PLAIN, encode_plain(arr, info), None
    if info.kind is Kind.BOOL:
        bvals = bool_values(arr)
        if requested is Encoding.RLE:
            return Encoding.RLE, encode_rle(bvals), None
        runs = count_runs(bvals)
        if 8 + pad8(runs) + 4 * runs < _AUTO_BOOL_RATIO * ((n + 7) // 8):
            return Encoding.RLE, encode_rle(bvals), None
        return Encoding.PLAIN, encode_plain(arr, info), None
    if info.int_dtype is None:  # floats, decimals
        if requested is None and compressed and _bitshuffle_pays(arr, info, None):
            return Encoding.BIT_SHUFFLE, encode_bitshuffle(arr, info), None
        return Encoding.PLAIN, encode_plain(arr, info), None
    vals = int_values(arr, info, _valid_mask(arr))
    if requested is Encoding.RLE:
        return Encoding.RLE, encode_rle(vals), None
    lo_bits = bit_width_of_range(vals)
    if requested is Encoding.BITPACK:
        return Encoding.BITPACK, encode_bitpack(vals, lo_bits), None
    plain = n * info.width
    bp = bitpack_size(n, lo_bits[1])
    runs = count_runs(vals)
    rle = 8 + pad8(runs * info.width) + runs * (1 if n < 256 else 2)
    best = min(rle, bp) if min(rle, bp) < _AUTO_INT_RATIO * plain else plain
    if compressed and _bitshuffle_pays(arr, info, best / n):
        return Encoding.BIT_SHUFFLE, encode_bitshuffle(arr, info), None
    if best < plain:
        if rle <= bp:
            return Encoding.RLE, encode_rle(vals), None
        return Encoding.BITPACK, encode_bitpack(vals, lo_bits), None
    return Encoding.PLAIN, encode_plain(arr, info), None


def _bitshuffle_pays(arr: pa.Array[Any], info: TypeInfo, rival: float | None) -> bool:
    """Whether AUTO takes BIT_SHUFFLE for a fixed-width page: its LZ4-compressed size,
    estimated on the first ``_BS_SAMPLE`` values, is below ``_AUTO_BS_RATIO`` of the
    rival's (``rival`` bytes per value; None: PLAIN compressed with LZ4, estimated on
    the same sample)."""
    m = min(len(arr), _BS_SAMPLE) & ~7
    if m == 0:
        return False
    sample = encode_plain(arr.slice(0, m), info)[0]
    shuffled = lz4.block.compress(bitshuffle(sample, m, info.width), store_size=False)
    if rival is None:
        rival = len(lz4.block.compress(sample, store_size=False)) / m
    return len(shuffled) < _AUTO_BS_RATIO * rival * m


def encode_page(arr: pa.Array[Any], encoding: Encoding | None, compression: Compression) -> bytes:
    """Serialize ``arr`` as one page (header, body, crc).

    ``encoding`` None chooses per page by encoded size; an encoding that does not apply
    to the type falls back to PLAIN. Arrays with a non-zero offset are handled.
    """
    return encode_page_dict(arr, encoding, compression)[0]


def encode_page_dict(
    arr: pa.Array[Any], encoding: Encoding | None, compression: Compression
) -> tuple[bytes, pa.Array[Any] | None]:
    """encode_page plus the page's dictionary (its distinct non-NULL values) if DICT.

    The writer computes string zone maps from the (small) dictionary instead of the
    whole page.
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    info = type_info(arr.type)
    n = len(arr)
    if n >= 1 << 32:
        raise ProgrammingError(f"a page holds at most 2**32-1 values, got {n}")
    null_count = arr.null_count
    chunks: list[Bytesish] = []
    flags = 0
    if null_count > 0:
        flags |= FLAG_VALIDITY
        vbuf = arr.buffers()[0]
        assert vbuf is not None
        bitmap = bitmap_bytes(vbuf, arr.offset, n)
        chunks.append(bitmap)
        nb = (n + 7) // 8
        if nb & 7:
            chunks.append(b"\x00" * (8 - (nb & 7)))
    enc, value_chunks, dictionary = _encode_values(
        arr, info, encoding, compression is not Compression.NONE
    )
    if enc is Encoding.BIT_SHUFFLE and compression is Compression.NONE:
        compression = Compression.LZ4  # bitshuffle's LZ4 is part of the encoding (Kudu)
    chunks.extend(value_chunks)
    body = b"".join(chunks)
    usize = len(body)
    stored: Bytesish = body
    comp = Compression.NONE
    if compression is not Compression.NONE and usize > 0:
        if compression is Compression.LZ4:
            packed = lz4.block.compress(body, store_size=False)
        elif compression is Compression.ZSTD:
            packed = _zstd().compress(body, asbytes=True)
        else:  # pragma: no cover - enum is closed
            raise ProgrammingError(f"unknown compression {compression!r}")
        if len(packed) < MIN_COMPRESSION_RATIO * usize:
            stored = packed
            comp = compression
    header = PAGE_HEADER.pack(int(enc), int(comp), flags, 0, n, null_count, usize, len(stored), 0)
    crc = zlib.crc32(stored, zlib.crc32(header)) & 0xFFFFFFFF
    return b"".join((header, stored, crc.to_bytes(4, "little"))), dictionary


def page_header(data: pa.Buffer) -> tuple[int, int, int, int, int, int, int]:
    """(encoding, compression, flags, num_values, null_count, usize, stored size)."""
    enc, comp, flags, _, n, nulls, usize, ssize, _ = PAGE_HEADER.unpack_from(data, 0)
    return enc, comp, flags, n, nulls, usize, ssize


def decode_page(
    data: memoryview | bytes | pa.Buffer, arrow_type: pa.DataType, path: str, offset: int
) -> pa.Array[Any]:
    """Verify and decode one page (exactly the bytes encode_page produced).

    Any problem - checksum, header, lengths, decoder failure - raises
    CorruptionError(path, offset, ...); ``offset`` is the page's offset in the file.
    """
    buf = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
    try:
        return _decode(buf, arrow_type, path, offset)
    except CorruptionError:
        raise
    except Exception as e:
        raise CorruptionError(path, offset, f"undecodable page: {e}") from e


def _decode(buf: pa.Buffer, t: pa.DataType, path: str, offset: int) -> pa.Array[Any]:
    size = buf.size
    if size < PAGE_OVERHEAD:
        raise CorruptionError(path, offset, f"page of {size} bytes is shorter than its header")
    enc, comp, flags, n, nulls, usize, ssize = page_header(buf)
    if HEADER_SIZE + ssize + CRC_SIZE != size:
        raise CorruptionError(
            path, offset, f"page stored size {ssize} does not match the page length {size}"
        )
    stored_crc = int.from_bytes(buf.slice(size - CRC_SIZE, CRC_SIZE).to_pybytes(), "little")
    actual = zlib.crc32(memoryview(buf)[: size - CRC_SIZE]) & 0xFFFFFFFF
    if actual != stored_crc:
        raise CorruptionError(
            path,
            offset,
            f"page checksum mismatch (stored {stored_crc:#010x}, computed {actual:#010x})",
        )
    info = type_info(t)
    stored = buf.slice(HEADER_SIZE, ssize)
    if comp == Compression.NONE:
        if usize != ssize:
            raise FormatError("uncompressed page with differing sizes")
        body = stored
    elif comp == Compression.LZ4:
        body = _lz4_decompress(stored, usize)
    elif comp == Compression.ZSTD:
        body = _zstd().decompress(stored, decompressed_size=usize)
    else:
        raise FormatError(f"unknown compression {comp}")
    if body.size != usize:
        raise FormatError(f"body decompressed to {body.size} bytes, header says {usize}")
    if nulls > n:
        raise FormatError(f"null count {nulls} exceeds value count {n}")
    pos = 0
    validity: pa.Buffer | None = None
    if flags & FLAG_VALIDITY:
        nb = (n + 7) // 8
        if nb > usize:
            raise FormatError("validity bitmap runs past the end of the body")
        validity = body.slice(0, nb)
        pos = pad8(nb)
    elif nulls:
        raise FormatError("page has nulls but no validity bitmap")
    if enc == Encoding.PLAIN:
        bufs = decode_plain(body, pos, n, info)
    elif enc == Encoding.DICT and info.kind is Kind.VAR:
        return decode_dict(body, pos, n, t, validity)
    elif enc == Encoding.RLE and (info.kind is Kind.BOOL or info.int_dtype is not None):
        bufs = [decode_rle(body, pos, n, info)]
    elif enc == Encoding.BITPACK and info.int_dtype is not None:
        bufs = [decode_bitpack(body, pos, n, info)]
    elif enc == Encoding.BIT_SHUFFLE and info.kind is Kind.FIXED:
        bufs = [decode_bitshuffle(body, pos, n, info)]
    else:
        raise FormatError(f"encoding {enc} is not valid for type {t}")
    return pa.Array.from_buffers(t, n, [validity, *bufs], null_count=nulls)
