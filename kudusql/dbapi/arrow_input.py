"""Python objects as Arrow tables, for ``Connection.register``.

This module owns what a connection accepts as a relation and how it becomes one Arrow
table, without building Python rows and without importing pandas or polars (an object
is one of their frames only if its library is already imported):

- a ``pyarrow.Table`` as it is; a ``RecordBatch``; a ``RecordBatchReader`` or any object
  with the Arrow PyCapsule stream interface (``__arrow_c_stream__``: a polars
  DataFrame, a kudusql or DuckDB result, ...) read once, to its end;
- a polars ``LazyFrame``, collected;
- a pandas ``DataFrame`` column by column, its index left out (as DuckDB does). NaN in a
  float column stays NaN, as a NaN bound as a parameter does (``docs/SQL.md``); the
  values pandas itself stores as missing in other columns (None, ``pd.NA``, ``NaT``)
  are NULL.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.common.errors import ProgrammingError

ACCEPTED = (
    "a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or polars DataFrame, "
    "or an object with __arrow_c_stream__"
)


def to_arrow_table(obj: object) -> pa.Table:
    """``obj`` as one Arrow table (see the module docstring)."""
    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(obj, pd.DataFrame):
        return _from_pandas(obj)
    pl = sys.modules.get("polars")
    if pl is not None and isinstance(obj, pl.LazyFrame):
        obj = obj.collect()
    if pl is not None and isinstance(obj, pl.DataFrame) and not hasattr(obj, "__arrow_c_stream__"):
        table: pa.Table = obj.to_arrow()  # a polars from before the PyCapsule interface
        return table
    if hasattr(obj, "__arrow_c_stream__"):
        try:
            return pa.table(obj)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise ProgrammingError(f"cannot read the {type(obj).__name__} as Arrow: {e}") from None
    raise ProgrammingError(f"cannot register a {type(obj).__name__}: register takes {ACCEPTED}")


def _from_pandas(df: Any) -> pa.Table:
    """A pandas DataFrame's columns as Arrow (pyarrow's conversion, except that a numpy
    float column keeps its NaN values, which pyarrow would make NULL)."""
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise ProgrammingError(f"cannot read the DataFrame as Arrow: {e}") from None
    for i, dtype in enumerate(df.dtypes):
        if isinstance(dtype, np.dtype) and dtype.kind == "f":
            values = np.ascontiguousarray(df.iloc[:, i].to_numpy())
            table = table.set_column(i, table.field(i), pa.array(values, type=table.field(i).type))
    return table.replace_schema_metadata(None)
