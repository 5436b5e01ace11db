"""Owns writing a tablet copy's consensus log: the destination's whole log at once.

``write_copied_log`` builds the log in ``<dir>.copying`` beside its final place (every
segment fsynced), then renames it into place and fsyncs the parent directory. A copy
interrupted midway leaves only the ``.copying`` directory, which nothing opens as a log
(the next copy removes it); a log that was at ``<dir>`` before is moved aside to
``<dir>.deleting`` and removed first, so ``<dir>`` holds the old log, no log, or the
whole new one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from kudusql.common.errors import OperationalError
from kudusql.consensus.messages import ReplicateMsg
from kudusql.consensus.opid import OpId
from kudusql.storage.consensus.log import DEFAULT_SEGMENT_SIZE, ConsensusLog
from kudusql.storage.fs import faults
from kudusql.storage.fs.files import fsync_dir

COPYING_SUFFIX = ".copying"
DELETING_SUFFIX = ".deleting"


def _remove_tree(path: str) -> None:
    if os.path.lexists(path):
        faults.check("delete", path)
        shutil.rmtree(path)


def write_copied_log(
    directory: str,
    entries: Sequence[ReplicateMsg],
    preceding: OpId,
    *,
    segment_size: int = DEFAULT_SEGMENT_SIZE,
) -> None:
    """Make ``directory`` a log holding exactly ``entries``, whose first follows
    ``preceding`` (the source's GCed prefix ends there; MINIMUM_OPID if it kept all)."""
    path = os.path.abspath(directory)
    parent = os.path.dirname(path)
    tmp, old = path + COPYING_SUFFIX, path + DELETING_SUFFIX
    try:
        _remove_tree(tmp)
        _remove_tree(old)
        if os.path.lexists(path):
            faults.check("rename", path)
            os.rename(path, old)
            fsync_dir(parent)
            _remove_tree(old)
        with ConsensusLog.open(tmp, create_after=preceding, segment_size=segment_size) as log:
            log.append(entries)
            log.sync()
        faults.check("rename", path)
        os.rename(tmp, path)
    except OSError as e:
        raise OperationalError(f"cannot write the copied log {path}: {e.strerror or e}") from e
    fsync_dir(parent)
