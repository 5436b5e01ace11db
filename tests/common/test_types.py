"""Types: names, the exact Arrow mapping both ways, and per-row cast errors."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from kudusql.common.errors import ProgrammingError
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType, TypeKind, cast_array

ALL = [
    ("BOOL", pa.bool_()),
    ("INT8", pa.int8()),
    ("INT16", pa.int16()),
    ("INT32", pa.int32()),
    ("INT64", pa.int64()),
    ("FLOAT", pa.float32()),
    ("DOUBLE", pa.float64()),
    ("DECIMAL(38,10)", pa.decimal128(38, 10)),
    ("DECIMAL(5,0)", pa.decimal128(5, 0)),
    ("STRING", pa.string()),
    ("BINARY", pa.binary()),
    ("DATE", pa.date32()),
    ("TIMESTAMP", pa.timestamp("us")),
]


@pytest.mark.parametrize(("name", "arrow"), ALL)
def test_arrow_mapping_round_trips(name: str, arrow: pa.DataType) -> None:
    t = DataType.parse(name)
    assert t.arrow_type() == arrow
    assert DataType.from_arrow(arrow) == t
    assert DataType.parse(str(t)) == t


def test_varchar_keeps_its_length_through_arrow_metadata() -> None:
    t = DataType.parse("varchar(12)")
    f = t.arrow_field("v")
    assert f.type == pa.string()
    assert DataType.from_arrow(f.type, f.metadata) == t


@pytest.mark.parametrize(
    ("alias", "kind"),
    [
        ("BIGINT", "INT64"),
        ("int", "INT32"),
        ("TINYINT", "INT8"),
        ("boolean", "BOOL"),
        ("UNIXTIME_MICROS", "TIMESTAMP"),
        ("SMALLINT", "INT16"),
    ],
)
def test_sql_aliases(alias: str, kind: str) -> None:
    assert DataType.parse(alias).kind is TypeKind(kind)


@pytest.mark.parametrize(
    "bad",
    ["DECIMAL(39,2)", "DECIMAL(4,5)", "VARCHAR(0)", "VARCHAR(70000)", "INT(3)", "NOPE", "STRING("],
)
def test_bad_types_are_clear_errors(bad: str) -> None:
    with pytest.raises(ProgrammingError):
        DataType.parse(bad)


def test_other_arrow_types_map_or_refuse() -> None:
    assert DataType.from_arrow(pa.large_string()).kind is TypeKind.STRING
    assert DataType.from_arrow(pa.timestamp("ms", tz="UTC")).kind is TypeKind.TIMESTAMP
    with pytest.raises(ProgrammingError, match="no kudusql equivalent"):
        DataType.from_arrow(pa.list_(pa.int32()))


def test_cast_reports_the_rows_that_do_not_fit() -> None:
    arr, bad = cast_array(pa.array([1, 300, None, -129]), DataType.parse("INT8"))
    assert bad is not None and bad.tolist() == [False, True, False, True]
    assert arr.to_pylist() == [1, None, None, None]
    arr, bad = cast_array(pa.array(["1.25", "x"]), DataType.parse("DECIMAL(5,2)"))
    assert bad is not None and bad.tolist() == [False, True]
    assert arr[0].as_py() == decimal.Decimal("1.25")
    arr, bad = cast_array(pa.array([1, 2]), DataType.parse("INT64"))
    assert bad is None


def test_varchar_truncates_like_kudu() -> None:
    arr, bad = cast_array(pa.array(["héllo wörld"]), DataType.parse("VARCHAR(5)"))
    assert bad is None and arr.to_pylist() == ["héllo"]


def test_schema_rules() -> None:
    c = [ColumnSchema("k", DataType.parse("DOUBLE"), nullable=False)]
    with pytest.raises(ProgrammingError, match="cannot be of type DOUBLE"):
        Schema.build(c, ["k"])
    with pytest.raises(ProgrammingError, match="not a column"):
        Schema.build([ColumnSchema("a", DataType.parse("INT"))], ["b"])
    s = Schema.build(
        [
            ColumnSchema("v", DataType.parse("STRING"), default="x"),
            ColumnSchema("k", DataType.parse("INT")),
        ],
        ["k"],
    )
    assert s.names == ["k", "v"] and not s.columns[0].nullable
    assert [c.id for c in s.columns] == [0, 1]
    assert Schema.from_dict(s.to_dict()) == s


def test_python_value_of_an_int_for_a_decimal() -> None:
    """Pinned: an integer default or bound for a DECIMAL column converts exactly."""
    assert DataType.parse("DECIMAL(10,2)").python_value(3) == decimal.Decimal("3.00")


def test_double_to_decimal_rounds_half_away_from_zero() -> None:
    """Pinned: as SQL does (0.045 -> 0.05), not the binary value's truncation (0.04)."""
    out, bad = cast_array(pa.array([0.045, -0.045, 2.675, 1.0]), DataType.parse("DECIMAL(15,2)"))
    assert bad is None
    assert out.to_pylist() == [decimal.Decimal(x) for x in ("0.05", "-0.05", "2.68", "1.00")]


def test_python_value_ints_and_strings_checked_without_arrow() -> None:
    """The fast path for plain ints and strings keeps the range checks."""
    assert DataType.parse("INT8").python_value(-128) == -128
    for typ, bad in (("INT8", 128), ("INT16", -(2**15) - 1), ("INT64", 2**63)):
        with pytest.raises(ProgrammingError, match="not a valid"):
            DataType.parse(typ).python_value(bad)
    assert DataType.parse("STRING").python_value("é") == "é"
    assert DataType.parse("VARCHAR(2)").python_value("abc") == "ab"  # still truncated
