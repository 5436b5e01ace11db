"""Kudu's names for a column's ENCODING and COMPRESSION, in DDL and in its output.

This module owns the vocabulary of the two column storage attributes: the names Kudu and
Impala use (``AUTO_ENCODING``, ``PLAIN_ENCODING``, ``PREFIX_ENCODING``, ``GROUP_VARINT``,
``RLE``, ``DICT_ENCODING``, ``BIT_SHUFFLE``; ``DEFAULT_COMPRESSION``, ``NO_COMPRESSION``,
``SNAPPY``, ``LZ4``, ``ZLIB``), kudusql's extra encoding ``BITPACK`` (frame of
reference bit-packing) and codec ``ZSTD``, and the short aliases the
storage layer and the Python client also accept (``plain``, ``dict``, ``none``, ...).
``encoding_name``/``compression_name`` turn what a statement says into the Kudu name
that the catalog records; ``shown_encoding``/``shown_compression`` turn what the catalog
holds (also tables made through the client API, which records short names) into the
Kudu name DESCRIBE and SHOW CREATE TABLE print.

The storage layer writes every name it is given: the ones its pages lack (SNAPPY, ZLIB,
PREFIX_ENCODING, GROUP_VARINT) with the nearest it has (``docs/SQL.md``).
"""

from __future__ import annotations

from kudusql.parser.literals import StatementError

__all__ = [
    "COMPRESSIONS",
    "ENCODINGS",
    "compression_name",
    "encoding_name",
    "shown_compression",
    "shown_encoding",
]

#: Kudu's encodings, in Kudu's order (Impala lists them so in its error message), then
#: kudusql's BITPACK.
ENCODINGS = (
    "AUTO_ENCODING",
    "PLAIN_ENCODING",
    "PREFIX_ENCODING",
    "GROUP_VARINT",
    "RLE",
    "DICT_ENCODING",
    "BIT_SHUFFLE",
    "BITPACK",
)
#: Kudu's compression codecs, then kudusql's ZSTD.
COMPRESSIONS = ("DEFAULT_COMPRESSION", "NO_COMPRESSION", "SNAPPY", "LZ4", "ZLIB", "ZSTD")

_ENCODING_ALIASES = {
    "AUTO": "AUTO_ENCODING",
    "DEFAULT": "AUTO_ENCODING",
    "PLAIN": "PLAIN_ENCODING",
    "PREFIX": "PREFIX_ENCODING",
    "DICT": "DICT_ENCODING",
    "DICTIONARY": "DICT_ENCODING",
    "BITSHUFFLE": "BIT_SHUFFLE",
}
_COMPRESSION_ALIASES = {"DEFAULT": "DEFAULT_COMPRESSION", "NONE": "NO_COMPRESSION"}


def _canonical(word: str, names: tuple[str, ...], aliases: dict[str, str]) -> str | None:
    key = word.strip().upper()
    return key if key in names else aliases.get(key)


def encoding_name(word: str, column: str) -> str:
    """The Kudu name of the encoding ``word`` (a Kudu name or an alias)."""
    name = _canonical(word, ENCODINGS, _ENCODING_ALIASES)
    if name is None:
        raise StatementError(
            f"unsupported encoding value '{word}' for column '{column}'. Supported "
            f"encoding values are: {', '.join(ENCODINGS)}"
        )
    return name


def compression_name(word: str, column: str) -> str:
    """The Kudu name of the compression codec ``word`` (a Kudu name or an alias)."""
    name = _canonical(word, COMPRESSIONS, _COMPRESSION_ALIASES)
    if name is None:
        raise StatementError(
            f"unsupported compression algorithm '{word}' for column '{column}'. Supported "
            f"compression algorithms are: {', '.join(COMPRESSIONS)}"
        )
    return name


def shown_encoding(stored: str | None) -> str:
    """What DESCRIBE prints for a recorded encoding (None: ``AUTO_ENCODING``)."""
    if stored is None:
        return "AUTO_ENCODING"
    return _canonical(stored, ENCODINGS, _ENCODING_ALIASES) or stored.upper()


def shown_compression(stored: str | None) -> str:
    """What DESCRIBE prints for a recorded codec (None: ``DEFAULT_COMPRESSION``)."""
    if stored is None:
        return "DEFAULT_COMPRESSION"
    return _canonical(stored, COMPRESSIONS, _COMPRESSION_ALIASES) or stored.upper()
