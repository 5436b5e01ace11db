"""The boundary between a tablet and its maintenance: compactions, GC and the
maintenance ops (tablet_maintenance.py, tablet_mm_ops.py) see a tablet only through
``MaintainedTablet``, its public members, and tablet.py is never imported by them."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kudusql.storage.tablet import tablet_maintenance, tablet_mm_ops
from kudusql.storage.tablet.tablet import Tablet
from kudusql.storage.tablet.tablet_maintenance import MaintainedTablet, TabletMaintainer
from kudusql.storage.tablet.tablet_mm_ops import OP_KINDS, TabletOps
from tests.storage.tablet.test_compaction import HOUR_US, Clock, by_key, kv, make

MODULES = [tablet_maintenance, tablet_mm_ops]


def _tree(module: Any) -> ast.Module:
    return ast.parse(Path(inspect.getfile(module)).read_text())


def test_maintenance_modules_do_not_import_the_tablet() -> None:
    """No import of tablet.py, not even for type checking: tablet.py imports these."""
    for module in MODULES:
        for node in ast.walk(_tree(module)):
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names] + [str(node.module)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            bad = [n for n in names if n.startswith("kudusql.storage.tablet.tablet.")]
            bad += [n for n in names if n == "kudusql.storage.tablet.tablet"]
            assert not bad, f"{module.__name__} line {node.lineno} imports {bad}"


def test_maintenance_modules_touch_no_private_member_of_another_object() -> None:
    """``x._name`` only for ``self``: nothing reaches into the tablet (or anything
    else) past its public members."""
    for module in MODULES:
        for node in ast.walk(_tree(module)):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                owner = node.value
                assert isinstance(owner, ast.Name) and owner.id in ("self", "cls"), (
                    f"{module.__name__} line {node.lineno}: {ast.unparse(node)}"
                )


def _interface() -> set[str]:
    """The members ``MaintainedTablet`` declares: attributes, properties and methods."""
    members = set(MaintainedTablet.__annotations__)
    members |= {n for n, v in vars(MaintainedTablet).items() if isinstance(v, property | Callable)}
    return {n for n in members if not n.startswith("__")}


def test_the_interface_is_public() -> None:
    names = _interface()
    assert {"path", "maintainable", "rowsets", "rowset_swap"} <= names
    assert not [n for n in names if n.startswith("_")]


class PublicOnly:
    """A tablet seen through ``MaintainedTablet`` only: any other member is missing."""

    def __init__(self, tablet: Tablet) -> None:
        self._tablet = tablet
        self._allowed = _interface()

    def __getattr__(self, name: str) -> Any:
        if name not in self._allowed:
            raise AttributeError(f"maintenance used {name!r}, not in MaintainedTablet")
        return getattr(self._tablet, name)


def test_every_op_runs_through_the_public_interface(tmp_path: Any) -> None:
    """Every kind of op, offered and run by ops and a maintainer that hold the tablet
    behind ``PublicOnly``, runs to the end and keeps the rows."""
    clock = Clock()
    t = make(tmp_path, clock, minor_compaction_min_files=2, major_compaction_min_ratio=1e-6)
    try:
        t.insert(kv(list(range(0, 80, 2)), list(range(40))))
        t.flush()
        t.insert(kv(list(range(1, 80, 2)), [1] * 40))  # overlaps the first: a merge
        t.flush()
        t.insert(kv(list(range(200, 240)), [2] * 40))
        t.flush()
        t.delete(kv(list(range(200, 240))))  # a rowset with no live row
        t.insert(kv(list(range(300, 340)), [3] * 40))
        t.flush()
        t.delete(kv(list(range(300, 320))))  # half a rowset: deleted-row GC
        for i in range(2):  # two REDO files: a minor compaction
            t.update(kv([2, 4, 6], [i] * 3))
            t.flush_deltas()
        t.update(kv([8], [88]))  # in a DeltaMemStore
        t.insert(kv([500], [5]))  # in the MemRowSet
        want = by_key(t)
        clock.advance(2 * HOUR_US)  # history older than the mark: GC has work

        view: Any = PublicOnly(t)
        maintainer = TabletMaintainer(view)
        ops = TabletOps(view, maintainer)
        offered: set[str] = set()
        for _ in range(50):
            cands = ops.candidates()
            if not cands:
                break
            offered.update(c.name for c in cands)
            for c in cands:
                c.run()
        assert ops.candidates() == []
        assert {k.name for k in OP_KINDS} - offered == set()
        maintainer.run_maintenance()
        assert by_key(t) == want
    finally:
        t.close()


def test_an_op_of_a_tablet_closed_since_the_poll_does_not_run(tmp_path: Any) -> None:
    """Kudu's Prepare: an op scored before its tablet closed is dropped when its turn
    comes (before, its run raised that the tablet is closed)."""
    t = make(tmp_path)
    t.insert(kv([1, 2]))
    (flush,) = [o for o in t.maintenance_ops() if o.name == "flush_mrs"]
    t.close(flush=False)
    assert flush.run() is None
    assert t.maintenance_log == []
