"""Owns the consensus log's byte layout: segment names, segment headers and records.

Pure (no file IO): encoding a ``ReplicateMsg`` into a checksummed record, decoding one,
and parsing a whole segment held in memory into its entries plus a verdict on the first
damage found. The verdict separates *soft* damage (what a crash mid-write leaves: a
short or checksum-failing tail with nothing valid after it) from *hard* damage (a bad
header, a valid record after the damage, indexes out of order). Whether soft damage is
a torn tail depends on the segment being the last one, which is the log's call. The
layout is documented byte by byte in FORMAT.md beside this file.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field

from kudusql.consensus.messages import OpType, ReplicateMsg
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import MemberType, RaftConfig, RaftPeer

# DO NOT CHANGE: on-disk (FORMAT.md).
SEGMENT_MAGIC = b"KSQLCLOG"
FORMAT_VERSION = 1
# magic(8s) version(u32) segment_number(u64) prev_term(u64) prev_index(u64)
# -> followed by crc32 of those 36 bytes (u32)
_SEG_HDR_BODY = struct.Struct("<8sIQQQ")
SEGMENT_HEADER_SIZE = _SEG_HDR_BODY.size + 4  # 40

RECORD_MARKER = b"CREC"
# marker(4s) body_len(u32) body_crc(u32) -> followed by crc32 of those 12 bytes (u32)
_REC_HDR_BODY = struct.Struct("<4sII")
_REC_HDR = struct.Struct("<4sIII")
RECORD_HEADER_SIZE = _REC_HDR.size  # 16
# term(u64) index(u64) timestamp(u64) op_type(u8) fields(u8)
_ENTRY = struct.Struct("<QQQBB")
_U32 = struct.Struct("<I")
_CONFIG = struct.Struct("<QI")  # opid_index(u64) peer_count(u32)
_PEER = struct.Struct("<BBH")  # member_type(u8) promote(u8) uuid_len(u16)

HAS_PAYLOAD = 0x1
HAS_CONFIG = 0x2
_KNOWN_FIELDS = HAS_PAYLOAD | HAS_CONFIG

_OP_CODES = {OpType.NO_OP: 0, OpType.WRITE: 1, OpType.CHANGE_CONFIG: 2}
_OP_TYPES = {v: k for k, v in _OP_CODES.items()}
_MEMBER_CODES = {MemberType.VOTER: 0, MemberType.NON_VOTER: 1}
_MEMBER_TYPES = {v: k for k, v in _MEMBER_CODES.items()}

_SEGMENT_RE = re.compile(r"^clog-(\d{12})$")


def segment_name(number: int) -> str:
    """File name of segment ``number`` (12 zero-padded digits, so names sort in order)."""
    return f"clog-{number:012d}"


def parse_segment_name(name: str) -> int | None:
    m = _SEGMENT_RE.match(name)
    return int(m.group(1)) if m else None


def encode_segment_header(number: int, prev: OpId) -> bytes:
    """The header of segment ``number``; ``prev`` is the OpId of the entry just before
    its first one (the log's last OpId when the segment was made)."""
    body = _SEG_HDR_BODY.pack(SEGMENT_MAGIC, FORMAT_VERSION, number, prev.term, prev.index)
    return body + _U32.pack(zlib.crc32(body))


def decode_segment_header(data: bytes, number: int) -> OpId | str:
    """The ``prev`` OpId the header of segment ``number`` records, or what is wrong."""
    if len(data) < SEGMENT_HEADER_SIZE:
        return f"segment header incomplete ({len(data)} of {SEGMENT_HEADER_SIZE} bytes)"
    magic, version, stored_number, term, index = _SEG_HDR_BODY.unpack_from(data, 0)
    if magic != SEGMENT_MAGIC:
        return f"bad segment magic {bytes(magic)!r}"
    (crc,) = _U32.unpack_from(data, _SEG_HDR_BODY.size)
    if zlib.crc32(memoryview(data)[: _SEG_HDR_BODY.size]) != crc:
        return "segment header checksum mismatch"
    if version != FORMAT_VERSION:
        return f"unsupported consensus log format version {version}"
    if stored_number != number:
        return f"segment header says segment {stored_number}, file name says {number}"
    return OpId(term, index)


def encode_entry(msg: ReplicateMsg) -> bytes:
    """The record of one entry: its 16-byte header, then the body."""
    fields = 0
    parts: list[bytes] = []
    if msg.payload is not None:
        fields |= HAS_PAYLOAD
        raw = msg.payload.encode()
        parts += (_U32.pack(len(raw)), raw)
    if msg.config is not None:
        fields |= HAS_CONFIG
        parts.append(_CONFIG.pack(msg.config.opid_index, len(msg.config.peers)))
        for peer in msg.config.peers:
            uuid = peer.uuid.encode()
            parts += (_PEER.pack(_MEMBER_CODES[peer.member_type], peer.promote, len(uuid)), uuid)
    head = _ENTRY.pack(msg.id.term, msg.id.index, msg.timestamp, _OP_CODES[msg.op_type], fields)
    body = b"".join((head, *parts))
    hdr = _REC_HDR_BODY.pack(RECORD_MARKER, len(body), zlib.crc32(body))
    return hdr + _U32.pack(zlib.crc32(hdr)) + body


def decode_body(body: bytes | memoryview) -> ReplicateMsg:
    """The entry of a record body whose checksum held; ValueError if it does not parse."""
    try:
        term, index, ts, op, fields = _ENTRY.unpack_from(body, 0)
        if op not in _OP_TYPES or fields & ~_KNOWN_FIELDS:
            raise ValueError(f"unknown op type {op} or fields {fields:#x}")
        p = _ENTRY.size
        payload: str | None = None
        config: RaftConfig | None = None
        if fields & HAS_PAYLOAD:
            (n,) = _U32.unpack_from(body, p)
            p += 4
            if len(body) < p + n:
                raise ValueError("payload extends past the record")
            payload = bytes(body[p : p + n]).decode()
            p += n
        if fields & HAS_CONFIG:
            opid_index, count = _CONFIG.unpack_from(body, p)
            p += _CONFIG.size
            peers = []
            for _ in range(count):
                member, promote, n = _PEER.unpack_from(body, p)
                p += _PEER.size
                if member not in _MEMBER_TYPES or len(body) < p + n:
                    raise ValueError("bad peer")
                peers.append(
                    RaftPeer(bytes(body[p : p + n]).decode(), _MEMBER_TYPES[member], bool(promote))
                )
                p += n
            config = RaftConfig(tuple(peers), opid_index)
        if p != len(body):
            raise ValueError(f"{len(body) - p} stray bytes after the entry")
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(str(e)) from e
    return ReplicateMsg(OpId(term, index), ts, _OP_TYPES[op], payload, config)


def check_record_header(data: bytes | memoryview, pos: int) -> tuple[int, int] | str:
    """(body length, body crc) of the record header at ``pos``, or what is wrong."""
    if len(data) - pos < RECORD_HEADER_SIZE:
        return "incomplete record header"
    marker, length, body_crc, hcrc = _REC_HDR.unpack_from(data, pos)
    if marker != RECORD_MARKER:
        return "bad record marker"
    if zlib.crc32(memoryview(data)[pos : pos + RECORD_HEADER_SIZE - 4]) != hcrc:
        return "record header checksum mismatch"
    return length, body_crc


def valid_record_after(data: bytes, start: int) -> int | None:
    """Offset of the first record header with a valid checksum at or after ``start``:
    damage followed by one is corruption, not a torn tail."""
    q = data.find(RECORD_MARKER, start)
    while q != -1:
        if not isinstance(check_record_header(data, q), str):
            return q
        q = data.find(RECORD_MARKER, q + 1)
    return None


#: One parsed record: (term, index, record offset, record size).
Parsed = tuple[int, int, int, int]


@dataclass(slots=True)
class ParsedSegment:
    """What ``parse_segment`` found: the header's ``prev`` OpId, the good records in
    order, ``end`` just past the last of them, and the first damage as (offset, what,
    hard), None if the segment is clean."""

    prev: OpId | None = None
    records: list[Parsed] = field(default_factory=list)
    end: int = 0
    damage: tuple[int, str, bool] | None = None


def parse_segment(data: bytes, number: int) -> ParsedSegment:
    """Parse a whole segment: its header, then records whose indexes follow on from the
    header's ``prev`` one by one with terms that never decrease. Bodies are checked by
    their CRC and their fixed fields; the rest is decoded when an entry is read."""
    out = ParsedSegment()
    prev = decode_segment_header(data, number)
    if isinstance(prev, str):
        out.damage = (0, prev, True)
        return out
    out.prev = last = prev
    p = out.end = SEGMENT_HEADER_SIZE
    mv = memoryview(data)
    while p < len(data):
        hdr = check_record_header(data, p)
        if isinstance(hdr, str):
            out.damage = (p, hdr, valid_record_after(data, p + 1) is not None)
            break
        length, body_crc = hdr
        start, end = p + RECORD_HEADER_SIZE, p + RECORD_HEADER_SIZE + length
        if end > len(data):
            out.damage = (p, f"record of {length} bytes extends past the end", False)
            break
        if zlib.crc32(mv[start:end]) != body_crc:
            out.damage = (p, "record checksum mismatch", valid_record_after(data, end) is not None)
            break
        if length < _ENTRY.size:
            out.damage = (p, f"record body of {length} bytes is too short", True)
            break
        term, index, _, op, fields = _ENTRY.unpack_from(data, start)
        if op not in _OP_TYPES or fields & ~_KNOWN_FIELDS:
            out.damage = (p, f"unknown op type {op} or fields {fields:#x}", True)
            break
        if index != last.index + 1 or term < last.term:
            out.damage = (p, f"entry {OpId(term, index)} does not follow {last}", True)
            break
        out.records.append((term, index, p, end - p))
        last = OpId(term, index)
        p = out.end = end
    return out
