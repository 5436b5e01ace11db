"""Owns the durable consensus state of one tablet replica: its Raft log and its
consensus metadata (Kudu's log segments and cmeta).

``ConsensusLog`` (log.py) keeps ``ReplicateMsg``s in checksummed segment files;
``ConsensusMetadataFile`` (cmeta.py) keeps a ``ConsensusMetadata``; ``write_copied_log``
(tablet_copy.py) writes a tablet copy's log atomically. Byte layouts: FORMAT.md. This
package imports ``kudusql.consensus`` (pure values), ``kudusql.common`` and
``kudusql.storage.fs`` only.
"""

from kudusql.storage.consensus.cmeta import ConsensusMetadataFile
from kudusql.storage.consensus.log import (
    DEFAULT_SEGMENT_SIZE,
    ConsensusLog,
    EntriesNotInLog,
    SegmentInfo,
)
from kudusql.storage.consensus.tablet_copy import write_copied_log

__all__ = [
    "DEFAULT_SEGMENT_SIZE",
    "ConsensusLog",
    "ConsensusMetadataFile",
    "EntriesNotInLog",
    "SegmentInfo",
    "write_copied_log",
]
