"""Scanners (Kudu's ``KuduScanner``) and scan tokens over ``Table.scan``.

Configure a scanner (predicates, projection, read mode and snapshot, fault tolerance
meaning primary-key order, a row limit), ``open()`` it, then read tuples
(``read_all_tuples``, ``read_next_batch_tuples`` while ``has_more_rows()``, ``xbatches``)
or Arrow (``to_arrow``, ``next_batch().to_arrow()``). ``to_pandas`` needs pandas.

Read modes: ``latest`` (the default) reads every write finished when the scan opens;
``snapshot`` reads at the timestamp given to ``set_snapshot`` (calling ``set_snapshot``
selects this mode), or at the opening time when none is given; ``read_your_writes``
reads at least everything this client wrote or read. A HybridTime snapshot (such as
``client.latest_observed_timestamp()``) reads every write at or before it; an int or a
datetime is microseconds since the epoch and reads the writes made before it.

Key bounds (``add_lower_bound``, ``add_exclusive_upper_bound``, on the token builder
``add_lower_bound``/``add_upper_bound``) limit a scan to a range of primary keys, compared
as Kudu compares keys (column by column). A bound is a ``PartialRow`` (``new_bound()``),
dict, tuple or list setting leading key columns; the key columns left unset take their
lowest value, so an exclusive upper bound ``{'a': 5}`` of a key ``(a, b)`` ends before
every key with ``a == 5``. Several lower bounds keep the highest, several upper bounds
the lowest. Bounds are encoded keys handed to every tablet's scan.

TIMESTAMP values come back as UTC-aware datetimes (Arrow ``timestamp('us', 'UTC')``), as
in kudu-python; ``to_pandas`` gives ``datetime64[ns, UTC]`` columns (``us`` when a value
is outside the nanosecond range, years 1677-2262).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from kudusql.client.predicate import Predicate
from kudusql.client.row import PartialRow
from kudusql.client.timestamps import HybridTime, raw_snapshot_of, snapshot_of
from kudusql.common.errors import (
    KuduInvalidArgument,
    KuduTypeError,
    KuduValueError,
    NotSupportedError,
    ProgrammingError,
)
from kudusql.common.keys import encode_key_prefix
from kudusql.common.predicates import ColumnPredicate
from kudusql.storage.tables.handles import ScanTokenHandle

if TYPE_CHECKING:
    from kudusql.client.client import Client
    from kudusql.client.table import Table

__all__ = [
    "CLOSEST_REPLICA",
    "FIRST_REPLICA",
    "LEADER_ONLY",
    "READ_AT_SNAPSHOT",
    "READ_LATEST",
    "READ_YOUR_WRITES",
    "MissingDependencyError",
    "RowBatch",
    "ScanToken",
    "ScanTokenBuilder",
    "Scanner",
]

READ_LATEST = "latest"
READ_AT_SNAPSHOT = "snapshot"
READ_YOUR_WRITES = "read_your_writes"

_READ_MODES = {
    "latest": READ_LATEST,
    "read_latest": READ_LATEST,
    "snapshot": READ_AT_SNAPSHOT,
    "read_at_snapshot": READ_AT_SNAPSHOT,
    "read_your_writes": READ_YOUR_WRITES,
}
_READ_MODE_CODES = {0: READ_LATEST, 1: READ_AT_SNAPSHOT, 2: READ_YOUR_WRITES}

#: Replica selection policies (Kudu's codes). An embedded database keeps one copy of
#: each tablet, which every policy selects.
LEADER_ONLY = 0
CLOSEST_REPLICA = 1
FIRST_REPLICA = 2
_SELECTIONS = {"leader": LEADER_ONLY, "closest": CLOSEST_REPLICA, "first": FIRST_REPLICA}


class MissingDependencyError(NotSupportedError, ImportError):
    """An optional package a feature needs is not installed."""


def parse_read_mode(mode: str | int) -> str:
    if isinstance(mode, int) and not isinstance(mode, bool):
        if mode in _READ_MODE_CODES:
            return _READ_MODE_CODES[mode]
    elif isinstance(mode, str) and mode.strip().lower() in _READ_MODES:
        return _READ_MODES[mode.strip().lower()]
    raise KuduValueError(f"Invalid read mode: {mode!r} (latest, snapshot or read_your_writes)")


def parse_selection(policy: str | int) -> int:
    """A replica selection policy's code ('leader', 'closest', 'first' or a code)."""
    if isinstance(policy, int) and not isinstance(policy, bool):
        if policy in _SELECTIONS.values():
            return policy
    elif isinstance(policy, str) and policy.strip().lower() in _SELECTIONS:
        return _SELECTIONS[policy.strip().lower()]
    raise KuduValueError(f"Invalid replica selection policy: {policy!r} (leader, closest or first)")


def utc_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with its TIMESTAMP fields as UTC timestamps."""
    if not any(pa.types.is_timestamp(f.type) and f.type.tz is None for f in schema):
        return schema
    out = pa.schema(
        [
            f.with_type(pa.timestamp(f.type.unit, "UTC"))
            if pa.types.is_timestamp(f.type) and f.type.tz is None
            else f
            for f in schema
        ]
    )
    return out.with_metadata(schema.metadata) if schema.metadata else out


def _to_utc(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` under ``schema`` (its naive timestamps as UTC: the values are kept,
    only the type's time zone changes)."""
    if batch.schema is schema or batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays(
        [
            c if c.type == f.type else c.cast(f.type)
            for c, f in zip(batch.columns, schema, strict=True)
        ],
        schema=schema,
    )


def _tuples(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
    if batch.num_columns == 0:
        return [()] * batch.num_rows
    return list(zip(*(c.to_pylist() for c in batch.columns), strict=True))


class RowBatch:
    """One batch of scanned rows: ``len()``, rows as tuples by index or iteration,
    ``as_tuples()``, ``to_arrow()``."""

    __slots__ = ("_batch", "_tuples")

    def __init__(self, batch: pa.RecordBatch) -> None:
        self._batch = batch
        self._tuples: list[tuple[Any, ...]] | None = None

    def as_tuples(self) -> list[tuple[Any, ...]]:
        if self._tuples is None:
            self._tuples = _tuples(self._batch)
        return list(self._tuples)

    def to_arrow(self) -> pa.RecordBatch:
        return self._batch

    def __len__(self) -> int:
        return self._batch.num_rows

    def __getitem__(self, i: int) -> tuple[Any, ...]:
        if self._tuples is None:
            self._tuples = _tuples(self._batch)
        return self._tuples[i]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.as_tuples())

    def __repr__(self) -> str:
        return f"RowBatch({self._batch.num_rows} rows)"


class _ScanSpec:
    """What a scanner or token builder has been told."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.predicates: list[ColumnPredicate] = []
        self.columns: list[str] | None = None
        self.read_mode = READ_LATEST
        self.snapshot: int | None = None  # storage snapshot (sees writes with ts < it)
        self.ordered = False
        self.key_lo: bytes | None = None  # encoded primary key bounds [key_lo, key_hi)
        self.key_hi: bytes | None = None

    def new_bound(self) -> PartialRow:
        return PartialRow(self.table.core.schema)

    def _encoded_bound(self, bound: PartialRow | Mapping[Any, Any] | Sequence[Any]) -> bytes:
        schema = self.table.core.schema
        if isinstance(bound, PartialRow):
            if bound._schema.names != schema.names:
                raise ProgrammingError("the key bound was made for another schema")
            row = bound
        elif isinstance(bound, (Mapping, tuple, list)):
            row = PartialRow(schema, bound)
        else:
            raise KuduTypeError(
                f"a key bound is a PartialRow (new_bound()), dict, tuple or list, not "
                f"{type(bound).__name__}"
            )
        values = row.key_prefix("a key bound")
        types = [c.type for c in schema.key_columns]
        return encode_key_prefix(list(values), types, schema.num_key_columns)

    def add_lower_bound(self, bound: Any) -> None:
        key = self._encoded_bound(bound)
        if self.key_lo is None or key > self.key_lo:
            self.key_lo = key

    def add_upper_bound(self, bound: Any) -> None:
        key = self._encoded_bound(bound)
        if self.key_hi is None or key < self.key_hi:
            self.key_hi = key

    @property
    def key_range(self) -> tuple[bytes | None, bytes | None]:
        if self.key_hi is not None and self.key_lo is None:
            return (b"", self.key_hi)  # an upper bound at the lowest key reads nothing
        return (self.key_lo, self.key_hi)

    def add_predicate(self, pred: Predicate | ColumnPredicate) -> None:
        if isinstance(pred, Predicate):
            if pred.table_id != self.table.id:
                raise ProgrammingError(f"{pred!r} was made for another table")
            self.predicates.append(pred.predicate)
        elif isinstance(pred, ColumnPredicate):
            self.predicates.append(pred.bind(self.table.core.schema))
        else:
            raise ProgrammingError(
                f"a scan predicate is built from a column (table['a'] > 1), not {pred!r}"
            )

    def project(self, names: Sequence[str] | str) -> None:
        cols = [names] if isinstance(names, str) else list(names)
        schema = self.table.core.schema
        for c in cols:
            if not isinstance(c, str):
                raise ProgrammingError(f"a projected column is named by a str, not {c!r}")
            schema.index_of(c)
        if len(set(cols)) != len(cols):
            raise ProgrammingError("a column is projected twice")
        self.columns = cols

    def project_indexes(self, indexes: Sequence[int]) -> None:
        schema = self.table.core.schema
        n = len(schema.columns)
        names = []
        for i in indexes:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
                raise ProgrammingError(f"column index {i!r} out of range (the table has {n})")
            names.append(schema.columns[i].name)
        self.project(names)

    def set_snapshot(self, timestamp: Any, fmt: str | None) -> None:
        self.snapshot = snapshot_of(timestamp, fmt)
        self.read_mode = READ_AT_SNAPSHOT

    def set_snapshot_raw(self, hybrid_time: int) -> None:
        self.snapshot = raw_snapshot_of(hybrid_time)
        self.read_mode = READ_AT_SNAPSHOT

    def resolve_snapshot(self) -> int:
        """The storage snapshot to read at, fixed now."""
        client = self.table.client
        db = client.database
        if self.read_mode == READ_AT_SNAPSHOT and self.snapshot is not None:
            return db.snapshot(self.snapshot)
        snap = db.snapshot(None)
        if self.read_mode == READ_YOUR_WRITES:
            snap = max(snap, db.snapshot(int(client.latest_observed_timestamp()) + 1))
        return snap


class Scanner:
    """Reads rows of a table (``table.scanner()``); setters return the scanner."""

    def __init__(self, table: Table) -> None:
        self._spec = _ScanSpec(table)
        self._limit: int | None = None
        self._reader: pa.RecordBatchReader | None = None
        self._next: pa.RecordBatch | None = None
        self._done = False
        self._returned = 0
        self._snapshot: int | None = None
        self._out_schema: pa.Schema | None = None

    @property
    def table(self) -> Table:
        return self._spec.table

    def _check_not_open(self) -> None:
        if self._reader is not None:
            raise KuduInvalidArgument("the scanner is already open; configure it before open()")

    # -- configuration -------------------------------------------------------------------------
    def add_predicate(self, pred: Predicate | ColumnPredicate) -> Scanner:
        """Keep only rows matching ``pred`` (all predicates must match)."""
        self._check_not_open()
        self._spec.add_predicate(pred)
        return self

    def add_predicates(self, preds: Sequence[Predicate | ColumnPredicate]) -> Scanner:
        for p in preds:
            self.add_predicate(p)
        return self

    def set_projected_column_names(self, names: Sequence[str] | str) -> Scanner:
        """Read only these columns, in this order (an empty list reads rows with no
        columns, for counting)."""
        self._check_not_open()
        self._spec.project(names)
        return self

    def set_projected_column_indexes(self, indexes: Sequence[int]) -> Scanner:
        self._check_not_open()
        self._spec.project_indexes(indexes)
        return self

    def set_read_mode(self, read_mode: str | int) -> Scanner:
        """'latest', 'snapshot' or 'read_your_writes' (or the READ_* constants)."""
        self._check_not_open()
        self._spec.read_mode = parse_read_mode(read_mode)
        return self

    def set_snapshot(self, timestamp: Any, format: str | None = None) -> Scanner:
        """Read at ``timestamp``: a ``HybridTime`` (every write at or before it), a
        datetime or int microseconds since the epoch, or a string parsed with
        ``format``. Selects the 'snapshot' read mode."""
        self._check_not_open()
        self._spec.set_snapshot(timestamp, format)
        return self

    def set_snapshot_raw(self, hybrid_time: int) -> Scanner:
        """Read every write at or before the raw HybridTime ``hybrid_time`` (such as a
        ``WriteResult.timestamp``). Selects the 'snapshot' read mode."""
        self._check_not_open()
        self._spec.set_snapshot_raw(hybrid_time)
        return self

    def set_fault_tolerant(self) -> Scanner:
        """Return rows in primary-key order (Kudu's fault-tolerant scans are ordered)."""
        self._check_not_open()
        self._spec.ordered = True
        return self

    def set_limit(self, limit: int) -> Scanner:
        """Return at most ``limit`` rows."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ProgrammingError("a scan limit must be a positive int")
        self._check_not_open()
        self._limit = limit
        return self

    def set_selection(self, replica_selection: str | int) -> Scanner:
        """The replica selection policy ('leader', 'closest', 'first' or LEADER_ONLY,
        CLOSEST_REPLICA, FIRST_REPLICA): checked, and met by the one copy of each
        tablet an embedded database keeps."""
        self._check_not_open()
        parse_selection(replica_selection)
        return self

    def new_bound(self) -> PartialRow:
        """An empty row of the table's schema, to set as a key bound."""
        return self._spec.new_bound()

    def add_lower_bound(self, bound: PartialRow | Mapping[Any, Any] | Sequence[Any]) -> Scanner:
        """Read only primary keys at or above ``bound`` (see the module docstring)."""
        self._check_not_open()
        self._spec.add_lower_bound(bound)
        return self

    def add_exclusive_upper_bound(
        self, bound: PartialRow | Mapping[Any, Any] | Sequence[Any]
    ) -> Scanner:
        """Read only primary keys below ``bound`` (see the module docstring)."""
        self._check_not_open()
        self._spec.add_upper_bound(bound)
        return self

    def get_projection_schema(self) -> pa.Schema:
        """The Arrow schema of the rows returned (iterate it for the columns:
        ``SchemaBuilder.copy_column`` takes its fields)."""
        schema = self.table.core.schema
        return utc_schema(schema.arrow_schema(self._spec.columns))

    @property
    def snapshot_timestamp(self) -> HybridTime | None:
        """The HybridTime the open scan reads at (every write at or before it)."""
        return None if self._snapshot is None else HybridTime(self._snapshot - 1)

    # -- reading -------------------------------------------------------------------------------
    def _open_reader(self) -> tuple[pa.RecordBatchReader, int]:
        spec = self._spec
        snap = spec.resolve_snapshot()
        core = self.table.core
        cols = spec.columns  # [] counts rows: one empty row per live row
        # READ_LATEST has no snapshot of its own (as in Kudu): the tables layer picks the
        # latest one, and a scan that fixes the whole key becomes a point lookup.
        # ``snap`` (taken before) is what the client records as observed.
        at = None if spec.read_mode == READ_LATEST else snap
        reader = core.scan(
            cols, spec.predicates, snapshot=at, ordered=spec.ordered, key_range=spec.key_range
        )
        return reader, snap

    def open(self) -> Scanner:
        """Start the scan (fixing its snapshot); reading methods open it if needed."""
        if self._reader is None:
            self._reader, snap = self._open_reader()
            self._out_schema = utc_schema(self._reader.schema)
            self._snapshot = snap
            self.table.client._observe(snap - 1)
        return self

    def has_more_rows(self) -> bool:
        """True while another batch is to be read."""
        self.open()
        if self._next is not None:
            return True
        if self._done:
            return False
        assert self._reader is not None
        while True:
            if self._limit is not None and self._returned >= self._limit:
                self._finish()
                return False
            try:
                b = self._reader.read_next_batch()
            except StopIteration:
                self._finish()
                return False
            if b.num_rows == 0:
                continue
            if self._limit is not None and self._returned + b.num_rows > self._limit:
                b = b.slice(0, self._limit - self._returned)
            self._returned += b.num_rows
            assert self._out_schema is not None
            self._next = _to_utc(b, self._out_schema)
            return True

    def _finish(self) -> None:
        self._done = True
        if self._reader is not None:
            self._reader.close()

    def next_batch(self) -> RowBatch:
        """The next batch of rows; raises StopIteration when there is none."""
        if not self.has_more_rows():
            raise StopIteration
        b, self._next = self._next, None
        assert b is not None
        return RowBatch(b)

    def read_next_batch_tuples(self) -> list[tuple[Any, ...]]:
        return self.next_batch().as_tuples()

    def read_next_batch_arrow(self) -> pa.RecordBatch:
        return self.next_batch().to_arrow()

    def xbatches(self) -> Iterator[list[tuple[Any, ...]]]:
        """The remaining rows, one list of tuples per batch."""
        while self.has_more_rows():
            yield self.next_batch().as_tuples()

    def read_all_tuples(self) -> list[tuple[Any, ...]]:
        """Every remaining row as a tuple (in the projection's column order)."""
        out: list[tuple[Any, ...]] = []
        while self.has_more_rows():
            out.extend(self.next_batch().as_tuples())
        return out

    def to_arrow(self) -> pa.Table:
        """Every remaining row as a pyarrow Table."""
        batches = []
        while self.has_more_rows():
            batches.append(self.next_batch().to_arrow())
        return pa.Table.from_batches(batches, schema=self._schema())

    def _schema(self) -> pa.Schema:
        self.open()
        assert self._out_schema is not None
        return self._out_schema

    def to_pandas(
        self, index: str | Sequence[str] | None = None, coerce_float: bool = False, **kw: Any
    ) -> Any:
        """Every remaining row as a pandas DataFrame, as kudu-python gives it: ``index``
        names the column(s) to index by, ``coerce_float`` turns DECIMAL columns into
        float64; TIMESTAMPs are ``datetime64[ns, UTC]``. Other keyword arguments go to
        ``pyarrow.Table.to_pandas``. Needs pandas."""
        try:
            importlib.import_module("pandas")
        except ImportError:
            raise MissingDependencyError(
                "Scanner.to_pandas() needs pandas, which is not installed; install it "
                "with `pip install pandas` (or use to_arrow(), which needs nothing more)"
            ) from None
        tbl = self.to_arrow()
        for i, f in enumerate(tbl.schema):
            col = tbl.column(i)
            if pa.types.is_timestamp(f.type) and f.type.unit != "ns":
                try:
                    col = pc.cast(col, pa.timestamp("ns", f.type.tz))
                except pa.ArrowInvalid:
                    continue  # a value outside the nanosecond range: keep microseconds
            elif coerce_float and pa.types.is_decimal(f.type):
                col = pc.cast(col, pa.float64())
            else:
                continue
            tbl = tbl.set_column(i, f.with_type(col.type), col)
        df = tbl.to_pandas(**kw)
        if index is not None:
            df = df.set_index(index)
        return df

    def close(self) -> None:
        """Stop the scan and release what it holds."""
        self._next = None
        self._finish()

    def __enter__(self) -> Scanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        """The remaining rows as tuples."""
        while self.has_more_rows():
            yield from self.next_batch().as_tuples()


class _TokenScanner(Scanner):
    """A scanner running one scan token."""

    def __init__(self, table: Table, token: ScanTokenHandle) -> None:
        super().__init__(table)
        self._token = token

    def _check_not_open(self) -> None:
        raise ProgrammingError("a scanner made from a scan token cannot be reconfigured")

    def _open_reader(self) -> tuple[pa.RecordBatchReader, int]:
        reader = self.table.client.database.scan_token_reader(self._token)
        return reader, self._token.snapshot

    def get_projection_schema(self) -> pa.Schema:
        return utc_schema(self.table.core.schema.arrow_schema(list(self._token.columns)))


class ScanToken:
    """One serializable piece of a planned scan (``ScanTokenBuilder.build``)."""

    def __init__(self, client: Client, core: ScanTokenHandle) -> None:
        self._client = client
        self._core = core

    @property
    def core(self) -> ScanTokenHandle:
        """The database's token (an embedded ``ScanToken`` or a cluster's
        ``RemoteScanToken``)."""
        return self._core

    @property
    def tablet_id(self) -> int | str:
        return self._core.tablet_id

    @property
    def partition(self) -> str:
        return self._core.partition

    def serialize(self) -> bytes:
        return self._core.serialize()

    def into_kudu_scanner(self) -> Scanner:
        """A scanner of this piece, in the client that planned it."""
        core = self._core
        return _TokenScanner(self._client._table_by_id(core.table_id, core.table_name), core)

    def __repr__(self) -> str:
        return f"ScanToken({self._core.table_name!r}, tablet {self.tablet_id}, {self.partition})"


def deserialize_into_scanner(client: Client, serialized: bytes | str) -> Scanner:
    """A scanner of a serialized scan token, in ``client`` (which must hold the table)."""
    core = client.database.scan_token(serialized)
    return _TokenScanner(client._table_by_id(core.table_id, core.table_name), core)


class ScanTokenBuilder:
    """Plans a scan as scan tokens (``table.scan_token_builder()``); setters return the
    builder."""

    def __init__(self, table: Table) -> None:
        self._spec = _ScanSpec(table)
        self._split_size: int | None = None

    def add_predicate(self, pred: Predicate | ColumnPredicate) -> ScanTokenBuilder:
        self._spec.add_predicate(pred)
        return self

    def add_predicates(self, preds: Sequence[Predicate | ColumnPredicate]) -> ScanTokenBuilder:
        for p in preds:
            self.add_predicate(p)
        return self

    def set_projected_column_names(self, names: Sequence[str] | str) -> ScanTokenBuilder:
        self._spec.project(names)
        return self

    def set_projected_column_indexes(self, indexes: Sequence[int]) -> ScanTokenBuilder:
        self._spec.project_indexes(indexes)
        return self

    def set_read_mode(self, read_mode: str | int) -> ScanTokenBuilder:
        self._spec.read_mode = parse_read_mode(read_mode)
        return self

    def set_snapshot(self, timestamp: Any, format: str | None = None) -> ScanTokenBuilder:
        self._spec.set_snapshot(timestamp, format)
        return self

    def set_snapshot_raw(self, hybrid_time: int) -> ScanTokenBuilder:
        self._spec.set_snapshot_raw(hybrid_time)
        return self

    def set_split_size_bytes(self, split_size_bytes: int) -> ScanTokenBuilder:
        """Cut tablets larger than this into several tokens."""
        if split_size_bytes <= 0:
            raise ProgrammingError("the split size must be positive")
        self._split_size = int(split_size_bytes)
        return self

    def set_fault_tolerant(self) -> ScanTokenBuilder:
        """Accepted for compatibility (tokens are independent pieces; order is not kept
        across them)."""
        return self

    def set_selection(self, replica_selection: str | int) -> ScanTokenBuilder:
        """The replica selection policy (see ``Scanner.set_selection``)."""
        parse_selection(replica_selection)
        return self

    def new_bound(self) -> PartialRow:
        """An empty row of the table's schema, to set as a key bound."""
        return self._spec.new_bound()

    def add_lower_bound(
        self, bound: PartialRow | Mapping[Any, Any] | Sequence[Any]
    ) -> ScanTokenBuilder:
        """Plan only primary keys at or above ``bound`` (see the module docstring)."""
        self._spec.add_lower_bound(bound)
        return self

    def add_upper_bound(
        self, bound: PartialRow | Mapping[Any, Any] | Sequence[Any]
    ) -> ScanTokenBuilder:
        """Plan only primary keys below ``bound`` (exclusive, as Kudu's token builder)."""
        self._spec.add_upper_bound(bound)
        return self

    add_exclusive_upper_bound = add_upper_bound

    def build(self) -> list[ScanToken]:
        """The tokens, all at one snapshot fixed now (or the one set)."""
        spec = self._spec
        snap = spec.resolve_snapshot()
        table = spec.table
        tokens = table.core.scan_tokens(
            spec.columns,
            spec.predicates,
            snapshot=snap,
            split_size_bytes=self._split_size,
            key_range=spec.key_range,
        )
        table.client._observe(snap - 1)
        return [ScanToken(table.client, t) for t in tokens]
