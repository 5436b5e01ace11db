"""The database directory: what it may hold, making a new one, and telling the tablet
directories the catalog explains from those it does not.

A directory is a database exactly when it holds ``catalog.meta``. A new database is
made only in a missing or empty directory, in this order: the directory, ``LOCK`` (the
writer's lock, with its pid), ``catalog.meta`` (written to ``catalog.meta.tmp`` and
renamed), then ``tablets/``. So a directory without a catalog is a creation that was
interrupted only while it holds at most ``LOCK`` (empty or a pid), ``catalog.meta.tmp``
and an empty ``tablets/`` (which earlier versions made before the catalog); anything
else there means it is not a kudusql database (or one whose catalog was lost or moved),
and it is refused and left exactly as it is.

In a database, a directory under ``tablets/`` that no table lists is deleted only when
the catalog proves it garbage (``catalog.py``): an id at or past ``next_tablet_id`` (a
CREATE or ADD RANGE PARTITION that never committed), or an id in ``pending_deletion``
(a committed DROP). Anything else (an id below ``next_tablet_id`` that no drop recorded,
a name that is no tablet id) is kept, with a warning: nothing proves it is not data.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any

from kudusql.common.errors import OperationalError, ProgrammingError
from kudusql.storage.fs import faults
from kudusql.storage.fs.lock import LOCK_FILE
from kudusql.storage.tables import catalog
from kudusql.storage.tables.catalog import CatalogState

#: The longest ``LOCK`` an interrupted creation leaves (a pid and a newline).
_MAX_LOCK_BYTES = 32


def database_path(path: Any) -> str:
    """``path`` (a non-empty string or path-like object) made absolute; ProgrammingError
    for anything else."""
    try:
        p = os.fspath(path)
    except TypeError:
        raise ProgrammingError(
            f"a database path must be a string or a path-like object, not {type(path).__name__}"
        ) from None
    if not isinstance(p, str):
        raise ProgrammingError(f"a database path must be a string, not {type(p).__name__}")
    if not p:
        raise ProgrammingError("a database path must not be empty")
    return os.path.abspath(p)


def check_openable(path: str, *, read_only: bool, create: bool) -> None:
    """Raise OperationalError unless ``path`` is a database, or (for a writer allowed to
    create) a place where a new one may be made."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise OperationalError(f"cannot open database {path}: not a directory")
    try:
        os.stat(catalog.catalog_path(path))
    except FileNotFoundError:
        pass
    except OSError as e:
        raise OperationalError(f"cannot open database {path}: {e.strerror}") from e
    else:
        return
    foreign = _foreign_entries(path)
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise OperationalError(
            f"{path} is not a kudusql database: it has no {catalog.CATALOG_FILE} and is not "
            f"empty (it holds {shown}). A new database is created only in a missing or empty "
            f"directory; if this is a database whose {catalog.CATALOG_FILE} was moved or "
            "lost, put it back"
        )
    if read_only or not create:
        raise OperationalError(f"no database at {path}: {catalog.CATALOG_FILE} is missing")


def make_directory(path: str) -> None:
    """Make the directory ``path`` if missing; its parent must exist (a mistyped path
    does not grow a tree of directories)."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise OperationalError(
            f"cannot create database directory {path}: its parent directory {parent} does not exist"
        )
    try:
        os.mkdir(path)
    except FileExistsError:
        if not os.path.isdir(path):
            raise OperationalError(f"cannot open database {path}: not a directory") from None
    except OSError as e:
        raise OperationalError(f"cannot create database directory {path}: {e.strerror}") from e


def create(path: str, *, sync: bool) -> None:
    """Make the new database's catalog, then its ``tablets/`` (under the writer lock,
    after ``check_openable``)."""
    catalog.save(path, CatalogState(), sync=sync)
    make_directory(os.path.join(path, catalog.TABLETS_DIR))


def _foreign_entries(path: str) -> list[str]:
    """What ``path`` holds beyond the leftovers of an interrupted creation (sorted)."""
    try:
        names = sorted(os.listdir(path))
    except FileNotFoundError:
        return []
    except OSError as e:
        raise OperationalError(f"cannot open database {path}: {e.strerror}") from e
    foreign = []
    try:
        for name in names:
            full = os.path.join(path, name)
            if name == LOCK_FILE and _is_lock_file(full):
                continue
            if name == catalog.CATALOG_FILE + ".tmp" and os.path.isfile(full):
                continue
            if name == catalog.TABLETS_DIR and os.path.isdir(full) and not os.listdir(full):
                continue
            foreign.append(name + ("/" if os.path.isdir(full) else ""))
    except OSError as e:
        raise OperationalError(f"cannot open database {path}: {e.strerror}") from e
    return foreign


def _is_lock_file(path: str) -> bool:
    """Whether ``path`` is a file as ``DirLock`` writes it: empty or one pid."""
    if not os.path.isfile(path) or os.path.getsize(path) > _MAX_LOCK_BYTES:
        return False
    with open(path, "rb") as f:
        text = f.read().strip()
    return not text or text.isdigit()


@dataclass
class TabletDirs:
    """The directories under ``tablets/`` that no table of the catalog lists."""

    #: At or past ``next_tablet_id``: a CREATE or ADD RANGE PARTITION that never committed.
    uncommitted: list[int] = field(default_factory=list)
    #: In ``pending_deletion``: a committed DROP not yet deleted.
    dropped: list[int] = field(default_factory=list)
    #: Names the catalog does not explain (kept).
    unexplained: list[str] = field(default_factory=list)


def survey(path: str, state: CatalogState) -> TabletDirs:
    """Sort the unlisted entries under ``<path>/tablets`` by what the catalog says of them."""
    listed = {e.id for m in state.tables.values() for e in m.tablets}
    pending = set(state.pending_deletion)
    out = TabletDirs()
    d = os.path.join(path, catalog.TABLETS_DIR)
    for name in sorted(os.listdir(d)):
        tablet_id = catalog.parse_tablet_dir_name(name)
        if tablet_id is not None and tablet_id in listed:
            continue
        if tablet_id is None or not os.path.isdir(os.path.join(d, name)):
            out.unexplained.append(name)
        elif tablet_id >= state.next_tablet_id:
            out.uncommitted.append(tablet_id)
        elif tablet_id in pending:
            out.dropped.append(tablet_id)
        else:
            out.unexplained.append(name)
    return out


def delete_tablet(path: str, tablet_id: int) -> bool:
    """Delete the directory of tablet ``tablet_id``; whether it is gone."""
    full = catalog.tablet_path(path, tablet_id)
    faults.check("delete", full)
    shutil.rmtree(full, ignore_errors=True)
    return not os.path.lexists(full)
