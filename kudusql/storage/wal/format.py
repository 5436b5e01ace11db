"""Owns the WAL's on-disk byte layout: segment names, headers, record framing, footers.

Everything here is pure (no file IO): encoding a record or a footer into bytes, and
parsing a whole segment held in memory into a list of record locations plus a verdict
on any damage found. The verdict separates *soft* damage (what a crash mid-write can
leave: a short or checksum-failing tail) from *hard* damage (impossible from a crash:
a bad segment header, seq going backwards, bytes after a footer). Deciding whether soft
damage is a torn tail or corruption needs to know whether the segment is the last one,
and checking a segment header's link (``prev_seq``) needs the segments before it, which
is the reader's job (see ``reader.py``). The layout is documented in FORMAT.md.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field

from kudusql.storage.fs.checksum import crc32

_U32 = struct.Struct("<I")

# --- segment header -------------------------------------------------------------------
SEGMENT_MAGIC = b"KSQLWAL\x00"
#: Written by this version. Version 1 segments (no link to the log before them) are read.
FORMAT_VERSION = 2
# v1: magic(8s) version(u32) segment_number(u64) -> followed by crc32 of those 20 bytes
_SEG_HDR_V1_BODY = struct.Struct("<8sIQ")
SEGMENT_HEADER_V1_SIZE = _SEG_HDR_V1_BODY.size + 4  # 24
# v2: magic(8s) version(u32) segment_number(u64) prev_seq(u64) header_flags(u32)
# -> followed by crc32 of those 32 bytes (u32)
_SEG_HDR_BODY = struct.Struct("<8sIQQI")
SEGMENT_HEADER_SIZE = _SEG_HDR_BODY.size + 4  # 36
#: header_flags bit 0: the log held a record before this segment; ``prev_seq`` is the
#: seq of the last one.
HEADER_HAS_PREV = 0x1
_KNOWN_HEADER_FLAGS = HEADER_HAS_PREV

# --- record ---------------------------------------------------------------------------
RECORD_MARKER = b"KREC"
FLAG_LZ4 = 0x1
KNOWN_FLAGS = FLAG_LZ4
# marker(4s) stored_len(u32) raw_len(u32) flags(u32) seq(u64) ts(u64) payload_crc(u32)
# -> followed by crc32 of those 36 bytes (u32)
_REC_HDR_BODY = struct.Struct("<4sIIIQQI")
_REC_HDR = struct.Struct("<4sIIIQQII")
RECORD_HEADER_SIZE = _REC_HDR.size  # 40
MAX_PAYLOAD = 0xFFFFFFFF

# --- footer (written when a segment is closed cleanly) ----------------------------------
FOOTER_MARKER = b"KFTR"
# marker(4s) record_count(u32) first_seq(u64) last_seq(u64) min_ts(u64) max_ts(u64)
# -> followed by crc32 of those 40 bytes (u32)
_FTR_BODY = struct.Struct("<4sIQQQQ")
_FTR = struct.Struct("<4sIQQQQI")
FOOTER_SIZE = _FTR.size  # 44

# --- naming ---------------------------------------------------------------------------
_SEGMENT_RE = re.compile(r"^wal-(\d{12})\.log$")


def segment_name(number: int) -> str:
    """File name of segment ``number`` (12 zero-padded digits, so names sort in order)."""
    return f"wal-{number:012d}.log"


def parse_segment_name(name: str) -> int | None:
    """The segment number encoded in ``name``, or None if it is not a segment file."""
    m = _SEGMENT_RE.match(name)
    return int(m.group(1)) if m else None


def encode_segment_header(number: int, prev_seq: int | None) -> bytes:
    """The header of segment ``number``; ``prev_seq`` is the seq of the last record the
    log held when the segment was made (None: no record)."""
    flags = 0 if prev_seq is None else HEADER_HAS_PREV
    body = _SEG_HDR_BODY.pack(SEGMENT_MAGIC, FORMAT_VERSION, number, prev_seq or 0, flags)
    return body + crc32(body).to_bytes(4, "little")


def encode_segment_header_v1(number: int) -> bytes:
    """A version 1 header (for tests of logs written by earlier versions)."""
    body = _SEG_HDR_V1_BODY.pack(SEGMENT_MAGIC, 1, number)
    return body + crc32(body).to_bytes(4, "little")


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    """A segment header that passed its checks."""

    version: int
    size: int
    #: Version 2 on: the seq of the last record before this segment, None if none.
    prev_seq: int | None

    @property
    def linked(self) -> bool:
        """Whether the header records the log before the segment (version 2 on)."""
        return self.version >= 2


def decode_segment_header(data: bytes | memoryview, number: int) -> SegmentHeader | str:
    """The header at the start of ``data`` of segment ``number``, or what is wrong."""
    if len(data) < SEGMENT_HEADER_V1_SIZE:
        return f"segment header incomplete ({len(data)} bytes)"
    magic, version, stored_number = _SEG_HDR_V1_BODY.unpack_from(data, 0)
    if magic != SEGMENT_MAGIC:
        return f"bad segment magic {bytes(magic)!r}"
    mv = memoryview(data)
    if version == 1:
        body, size, prev_seq, flags = _SEG_HDR_V1_BODY.size, SEGMENT_HEADER_V1_SIZE, 0, 0
    elif len(data) < SEGMENT_HEADER_SIZE:
        return f"segment header incomplete ({len(data)} of {SEGMENT_HEADER_SIZE} bytes)"
    else:
        _, version, stored_number, prev_seq, flags = _SEG_HDR_BODY.unpack_from(data, 0)
        body, size = _SEG_HDR_BODY.size, SEGMENT_HEADER_SIZE
    if crc32(mv[:body]) != int.from_bytes(mv[body:size], "little"):
        return "segment header checksum mismatch"
    if version not in (1, FORMAT_VERSION):
        return f"unsupported WAL format version {version}"
    if flags & ~_KNOWN_HEADER_FLAGS:
        return f"unknown segment header flags {flags:#x}"
    if stored_number != number:
        return f"segment header says segment {stored_number}, file name says {number}"
    return SegmentHeader(version, size, prev_seq if flags & HEADER_HAS_PREV else None)


def encode_record_header(
    stored: bytes | bytearray | memoryview, raw_len: int, flags: int, seq: int, ts: int
) -> bytes:
    """The 40-byte header framing ``stored`` (struct.error if a field is out of range)."""
    # zlib.crc32 directly (already unsigned): this runs once per WAL append.
    body = _REC_HDR_BODY.pack(
        RECORD_MARKER, len(stored), raw_len, flags, seq, ts, zlib.crc32(stored)
    )
    return body + _U32.pack(zlib.crc32(body))


@dataclass(frozen=True, slots=True)
class Footer:
    count: int
    first_seq: int
    last_seq: int
    min_ts: int
    max_ts: int


def encode_footer(f: Footer) -> bytes:
    body = _FTR_BODY.pack(FOOTER_MARKER, f.count, f.first_seq, f.last_seq, f.min_ts, f.max_ts)
    return body + crc32(body).to_bytes(4, "little")


def decode_footer(data: bytes | memoryview, pos: int) -> Footer | None:
    """The footer at ``pos`` if one is there and its checksum holds, else None."""
    if len(data) - pos < FOOTER_SIZE:
        return None
    marker, count, first, last, lo, hi, crc = _FTR.unpack_from(data, pos)
    if marker != FOOTER_MARKER or crc32(memoryview(data)[pos : pos + FOOTER_SIZE - 4]) != crc:
        return None
    return Footer(count, first, last, lo, hi)


def _valid_record_header_at(data: bytes, mv: memoryview, pos: int) -> bool:
    if len(data) - pos < RECORD_HEADER_SIZE:
        return False
    hcrc = int.from_bytes(data[pos + RECORD_HEADER_SIZE - 4 : pos + RECORD_HEADER_SIZE], "little")
    return crc32(mv[pos : pos + RECORD_HEADER_SIZE - 4]) == hcrc


def valid_structure_after(data: bytes, start: int) -> int | None:
    """Offset of the first checksum-valid record header or footer at or after ``start``.

    Used to tell a torn tail (nothing valid follows the damage) from corruption. The
    markers are found with ``bytes.find`` so even a long damaged tail is scanned quickly.
    """
    mv = memoryview(data)
    best: int | None = None
    for marker in (RECORD_MARKER, FOOTER_MARKER):
        q = data.find(marker, start)
        while q != -1 and (best is None or q < best):
            if marker == RECORD_MARKER:
                ok = _valid_record_header_at(data, mv, q)
            else:
                ok = decode_footer(data, q) is not None
            if ok:
                best = q
                break
            q = data.find(marker, q + 1)
    return best


# One parsed record: (offset, seq, ts, flags, raw_len, payload_start, payload_end).
Entry = tuple[int, int, int, int, int, int, int]


@dataclass(slots=True)
class ParsedSegment:
    """What ``parse_segment`` found.

    ``entries`` are the records that passed every check, in order. ``end`` is the offset
    just past the last good structure. ``damage`` is (offset, what, hard) for the first
    problem found, or None if the segment is clean.
    """

    entries: list[Entry] = field(default_factory=list)
    header: SegmentHeader | None = None
    footer: Footer | None = None
    end: int = 0
    damage: tuple[int, str, bool] | None = None


def parse_segment(data: bytes, number: int, prev_seq: int | None) -> ParsedSegment:
    """Parse a whole segment; ``prev_seq`` is the last seq of the segments before it."""
    out = ParsedSegment()
    size = len(data)
    header = decode_segment_header(data, number)
    if isinstance(header, str):
        # Soft when short or zero-filled: what a crash while a version 1 writer created
        # the file left (version 2 writers name a segment only once its header is
        # durable; the reader knows which wrote the log).
        soft = size < SEGMENT_HEADER_SIZE or data.count(0) == size
        out.damage = (0, header, not soft)
        return out
    out.header = header
    mv = memoryview(data)
    entries = out.entries
    last_seq = prev_seq
    unpack = _REC_HDR.unpack_from
    hdr_body = RECORD_HEADER_SIZE - 4
    p = out.end = header.size
    zcrc = zlib.crc32  # unsigned already (one call per record and per payload)
    startswith = data.startswith
    while p < size:
        if startswith(RECORD_MARKER, p):
            if size - p < RECORD_HEADER_SIZE:
                out.damage = (p, "incomplete record header", False)
                break
            _, stored_len, raw_len, flags, seq, ts, pcrc, hcrc = unpack(data, p)
            if zcrc(mv[p : p + hdr_body]) != hcrc:
                out.damage = (p, "record header checksum mismatch", False)
                break
            ps = p + RECORD_HEADER_SIZE
            pe = ps + stored_len
            if pe > size:
                out.damage = (p, f"record of {stored_len} bytes extends past end of segment", False)
                break
            if zcrc(mv[ps:pe]) != pcrc:
                out.damage = (p, "record payload checksum mismatch", False)
                break
            if flags & ~KNOWN_FLAGS:
                out.damage = (p, f"unknown record flags {flags:#x}", True)
                break
            if not flags & FLAG_LZ4 and raw_len != stored_len:
                out.damage = (p, "uncompressed record with raw length != stored length", True)
                break
            if last_seq is not None and seq <= last_seq:
                out.damage = (p, f"seq went backwards ({seq} after {last_seq})", True)
                break
            last_seq = seq
            entries.append((p, seq, ts, flags, raw_len, ps, pe))
            p = out.end = pe
        elif startswith(FOOTER_MARKER, p):
            footer = decode_footer(data, p)
            if footer is None:
                out.damage = (p, "incomplete or damaged segment footer", False)
                break
            if p + FOOTER_SIZE != size:
                out.damage = (p + FOOTER_SIZE, "data after segment footer", True)
                break
            if footer.count != len(entries) or (
                entries and (footer.first_seq, footer.last_seq) != (entries[0][1], entries[-1][1])
            ):
                out.damage = (p, "segment footer does not match the records", True)
                break
            out.footer = footer
            p = out.end = size
        else:
            out.damage = (p, "bad or incomplete record marker", False)
            break
    return out
