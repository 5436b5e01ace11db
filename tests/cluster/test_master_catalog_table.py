"""The master's catalog table: a ``CatalogStore`` on a storage-engine tablet."""

from __future__ import annotations

import random
from pathlib import Path

from kudusql.cluster.catalog.records import TableState
from kudusql.cluster.master.catalog_table import SysCatalogTable
from kudusql.cluster.master_protocol import ReportedTablet, TabletReport
from kudusql.cluster.master_state import MasterState


def test_batches_apply_whole_and_survive_a_reopen(tmp_path: Path) -> None:
    table = SysCatalogTable(str(tmp_path))
    table.write([((1, "a"), b'{"a":1}'), ((2, "b"), b'{"b":2}'), ((2, "c"), b'{"c":3}')])
    # One batch: a delete, an overwrite, a new row and a delete of an absent row.
    table.write([((2, "b"), None), ((1, "a"), b'{"a":2}'), ((2, "d"), b"{}"), ((2, "x"), None)])
    expected = [((1, "a"), b'{"a":2}'), ((2, "c"), b'{"c":3}'), ((2, "d"), b"{}")]
    assert list(table.scan()) == expected
    table.close()
    reopened = SysCatalogTable(str(tmp_path))
    assert list(reopened.scan()) == expected
    reopened.close()


def test_a_master_state_rebuilds_from_the_table(tmp_path: Path) -> None:
    store = SysCatalogTable(str(tmp_path))
    state = MasterState(store, random.Random(1))
    state.heartbeat("ts0", "127.0.0.1:1", TabletReport(1, 1, False), now=0.0)
    result = state.create_table("t", "schema", ["p0", "p1"], now=0.0, metadata='{"m": 1}')
    hosted = tuple(ReportedTablet(t.tablet_id, 0) for t in state.tablets_of(result.table_id))
    state.heartbeat("ts0", "127.0.0.1:1", TabletReport(1, 2, True, hosted), now=0.1)
    assert state.is_ddl_done("t")
    state.alter_table("t", 0.2, metadata='{"m": 2}')
    store.close()
    reopened = SysCatalogTable(str(tmp_path))
    rebuilt = MasterState(reopened, random.Random(2))
    assert sorted(map(repr, rebuilt.durable_records())) == sorted(
        map(repr, state.durable_records())
    )
    table = rebuilt.table("t")
    assert table is not None
    assert (table.metadata, table.schema_version, table.state) == (
        '{"m": 2}',
        1,
        TableState.ALTERING,
    )
    reopened.close()
