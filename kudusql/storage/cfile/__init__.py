"""CFile: the immutable columnar file holding one column of one DiskRowSet.

The package owns everything below the rowset: value encodings (PLAIN, DICT, RLE,
BITPACK) and compression (encodings.py), the checksummed page container (page.py),
the file layout with its page index, zone maps and value index over sorted binary
keys (cfile.py), and the shared LRU of decoded pages (block_cache.py). The byte
format is specified in FORMAT.md. Bloom filter files live in bloom.py (separately).
"""

from kudusql.storage.cfile.block_cache import BlockCache
from kudusql.storage.cfile.cfile import CFileReader, CFileWriter
from kudusql.storage.cfile.encodings import (
    Compression,
    Encoding,
    parse_compression,
    parse_encoding,
)
from kudusql.storage.cfile.page import decode_page, encode_page

__all__ = [
    "BlockCache",
    "CFileReader",
    "CFileWriter",
    "Compression",
    "Encoding",
    "decode_page",
    "encode_page",
    "parse_compression",
    "parse_encoding",
]
