"""The client's kudu-python shape: UTC-aware timestamps, kudu-python's error classes
(each also the PEP 249 class), timestamp inputs, PartialRow and KuduValue, schema
details, write op metrics, session options and connect's kudu-python arguments."""

from __future__ import annotations

import datetime
import decimal
import getpass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import kudusql.client as kudu
from kudusql.common.errors import (
    DataError,
    IntegrityError,
    NotSupportedError,
    ProgrammingError,
)

from .conftest import simple_schema

UTC = datetime.UTC


def ts_table(client: kudu.Client) -> kudu.Table:
    b = kudu.schema_builder()
    b.add_column("k", kudu.int32, nullable=False)
    b.add_column("ts", kudu.unixtime_micros)
    b.set_primary_keys(["k"])
    return client.create_table("ts", b.build())


# -- timestamps ---------------------------------------------------------------------------------
def test_scanned_timestamps_are_utc_aware(client: kudu.Client) -> None:
    t = ts_table(client)
    s = client.new_session()
    eastern = datetime.timezone(datetime.timedelta(hours=-5))
    s.apply(t.new_insert((1, datetime.datetime(2020, 1, 2, 3, 4, 5, 6))))  # naive: UTC
    s.apply(t.new_insert((2, datetime.datetime(2020, 1, 2, 3, 4, 5, tzinfo=eastern))))
    s.apply(t.new_insert((3, None)))
    s.flush()
    rows = sorted(t.scanner().read_all_tuples())
    assert rows == [
        (1, datetime.datetime(2020, 1, 2, 3, 4, 5, 6, tzinfo=UTC)),
        (2, datetime.datetime(2020, 1, 2, 8, 4, 5, tzinfo=UTC)),
        (3, None),
    ]
    assert all(r[1].utcoffset() == datetime.timedelta(0) for r in rows[:2])
    assert t.scanner().to_arrow().schema.field("ts").type == pa.timestamp("us", "UTC")
    assert t.scanner().get_projection_schema().field("ts").type == pa.timestamp("us", "UTC")
    # scan tokens give the same
    (token,) = t.scan_token_builder().build()
    assert sorted(client.deserialize_token_into_scanner(token.serialize())) == rows


def test_to_pandas_timestamps_are_datetime64_ns_utc(client: kudu.Client) -> None:
    pd = pytest.importorskip("pandas")
    t = ts_table(client)
    t.insert_arrow({"k": [1, 2], "ts": [datetime.datetime(2020, 1, 1), None]})
    df = t.scanner().to_pandas(index="k")
    assert str(df["ts"].dtype) == "datetime64[ns, UTC]"
    assert df.index.name == "k" and list(df.index) == [1, 2]
    assert df["ts"][1] == pd.Timestamp("2020-01-01", tz="UTC")
    # a value outside the nanosecond range keeps microseconds rather than failing
    t.insert_arrow({"k": [3], "ts": [datetime.datetime(9999, 1, 1)]})
    assert str(t.scanner().to_pandas()["ts"].dtype) == "datetime64[us, UTC]"


def test_to_pandas_coerce_float_turns_decimals_into_floats(client: kudu.Client) -> None:
    pytest.importorskip("pandas")
    b = kudu.schema_builder()
    b.add_column("k", kudu.int64, primary_key=True)
    b.add_column("d", kudu.decimal, precision=5, scale=2)
    t = client.create_table("dec", b.build())
    t.insert_arrow({"k": [1], "d": pa.array([decimal.Decimal("1.25")], pa.decimal128(5, 2))})
    assert str(t.scanner().to_pandas()["d"].dtype) == "object"
    df = t.scanner().to_pandas(coerce_float=True)
    assert str(df["d"].dtype) == "float64" and df["d"][0] == 1.25


def test_timestamp_cells_take_iso_strings_and_string_format_pairs(client: kudu.Client) -> None:
    t = ts_table(client)
    s = client.new_session()
    s.apply(t.new_insert((1, "2016-09-14T23:11:32.432019")))  # kudu-python's default format
    s.apply(t.new_insert((2, ("2016-09-15", "%Y-%m-%d"))))
    s.apply(t.new_insert((3, "2016-09-15T01:00:00+02:00")))  # an offset is converted to UTC
    s.flush()
    assert sorted(t.scanner().read_all_tuples()) == [
        (1, datetime.datetime(2016, 9, 14, 23, 11, 32, 432019, tzinfo=UTC)),
        (2, datetime.datetime(2016, 9, 15, tzinfo=UTC)),
        (3, datetime.datetime(2016, 9, 14, 23, tzinfo=UTC)),
    ]
    # predicates, snapshots and range bounds take the same forms
    sc = t.scanner().add_predicate(t["ts"] == ("2016-09-15", "%Y-%m-%d"))
    assert sc.read_all_tuples() == [(2, datetime.datetime(2016, 9, 15, tzinfo=UTC))]
    sc = t.scanner().add_predicate(t["ts"] < "2016-09-15T00:00:00.000000")
    assert sorted(r[0] for r in sc.read_all_tuples()) == [1, 3]
    with pytest.raises(DataError, match="not a timestamp"):
        t.new_insert((4, "Tuesday"))
    with pytest.raises(TypeError, match="expected a datetime"):
        t.new_insert((4, 1.5))


def test_range_bounds_take_timestamp_string_format_pairs(client: kudu.Client) -> None:
    b = kudu.schema_builder()
    b.add_column("ts", kudu.unixtime_micros, nullable=False)
    b.set_primary_keys(["ts"])
    parts = (
        kudu.Partitioning()
        .set_range_partition_columns(["ts"])
        .add_range_partition(upper_bound={"ts": ("2016-01-01", "%Y-%m-%d")})
        .add_range_partition(lower_bound={"ts": datetime.datetime(2016, 1, 1)})
    )
    t = client.create_table("r", b.build(), parts)
    assert t.range_partitions() == [
        'VALUES < "2016-01-01T00:00:00"',
        '"2016-01-01T00:00:00" <= VALUES',
    ]


# -- errors -------------------------------------------------------------------------------------
def test_errors_have_kudu_pythons_classes_and_pep_249s(client: kudu.Client) -> None:
    t = client.create_table("t", simple_schema())
    cases = [
        (lambda: client.table("missing"), kudu.KuduNotFound, ProgrammingError),
        (lambda: client.delete_table("missing"), kudu.KuduNotFound, ProgrammingError),
        (lambda: t.new_insert({"nope": 1}), KeyError, ProgrammingError),
        (lambda: t["nope"], KeyError, ProgrammingError),
        (lambda: t.schema[7], IndexError, ProgrammingError),
        (lambda: t.new_insert()[-1], IndexError, ProgrammingError),
        (lambda: t.new_insert({"key": "x"}), TypeError, DataError),
        (lambda: t.new_insert({"key": None}), kudu.KuduInvalidArgument, DataError),
        (lambda: t["name"] >= 1, TypeError, DataError),
        (lambda: t["name"] >= None, TypeError, DataError),
        (lambda: client.new_session(flush_mode="foo"), ValueError, ProgrammingError),
        (lambda: t.scanner().set_read_mode("foo"), ValueError, ProgrammingError),
        (
            lambda: client.new_session().set_mutation_buffer_space(-1),
            OverflowError,
            ProgrammingError,
        ),
        (
            lambda: client.create_table("t", simple_schema()),
            kudu.KuduBadStatus,
            ProgrammingError,
        ),
        (
            lambda: client.create_table("x", simple_schema(), n_replicas=3),
            kudu.KuduNotSupported,
            NotSupportedError,
        ),
        (lambda: kudu.schema_builder().build(), kudu.KuduInvalidArgument, ProgrammingError),
    ]
    for call, kudu_class, pep249_class in cases:
        with pytest.raises(kudu_class) as info:
            call()
        assert isinstance(info.value, pep249_class), info.value
        assert isinstance(info.value, kudu.KuduException) or kudu_class in (
            KeyError,
            IndexError,
            TypeError,
            ValueError,
            OverflowError,
        )
    # a KeyError's message is not shown quoted
    with pytest.raises(KeyError) as info:
        t["nope"]
    assert str(info.value).startswith("unknown column 'nope'")
    with pytest.raises(kudu.KuduNotFound, match='the table does not exist: table_name: "m"'):
        client.table("m")
    with pytest.raises(kudu.KuduAlreadyPresent, match=f"table t already exists with id {t.id}"):
        client.create_table("t", simple_schema())


def test_flush_failures_are_kudu_bad_status(table: kudu.Table) -> None:
    session = table.client.new_session()
    session.apply(table.new_insert({"key": 1}))
    session.flush()
    session.apply(table.new_insert({"key": 1}))
    with pytest.raises(kudu.KuduBadStatus) as info:
        session.flush()
    assert isinstance(info.value, IntegrityError)
    session.apply(table.new_update({"key": 1, "name": b"\xff"[:0] + b"ok"}))
    session.flush()  # bytes for a STRING are decoded
    errors, overflowed = session.get_pending_errors()
    assert len(errors) == 1 and errors[0].status == "AlreadyPresent" and not overflowed


def test_schema_builder_errors_say_what_kudu_says() -> None:
    def build(setup: object) -> None:
        b = kudu.schema_builder()
        setup(b)  # type: ignore[operator]
        b.build()

    cases = [
        (
            lambda b: b.add_column("key").type("decimal").primary_key().nullable(False),
            "no precision provided for DECIMAL column: key",
        ),
        (
            lambda b: b.add_column("key").type("int32").primary_key().precision(9),
            "precision is not applicable to INT32 column: key",
        ),
        (
            lambda b: b.add_column("key").type("varchar").primary_key(),
            "no length provided for VARCHAR column: key",
        ),
        (
            lambda b: b.add_column("key").type("varchar").primary_key().length(0),
            "length must be between 1 and 65535: key",
        ),
        (
            lambda b: (
                b.add_column("key", "int64").primary_key(),
                b.set_primary_keys(["key"]),
            ),
            r"primary key specified by both SetPrimaryKey\(\) and on a specific column: key",
        ),
        (
            lambda b: (
                b.add_column("key", "int64").primary_key(),
                b.add_column(kudu.Schema.get_auto_incrementing_column_name(), "int64"),
            ),
            "auto_incrementing_id is a reserved column name",
        ),
    ]
    for setup, message in cases:
        with pytest.raises(kudu.KuduInvalidArgument, match=message):
            build(setup)
    # rename() and remove_default() belong to altering: a new schema refuses them
    b = kudu.schema_builder()
    b.add_column("k", "int64", primary_key=True).rename("j")
    with pytest.raises(kudu.KuduNotSupported, match="cannot rename a column during CreateTable"):
        b.build()
    # an unknown encoding or compression fails when it is set
    with pytest.raises(ValueError, match="Invalid compression type: gzip"):
        kudu.schema_builder().add_column("k", "int64").compression("gzip")
    with pytest.raises(ValueError, match="Invalid encoding type"):
        kudu.schema_builder().add_column("k", "int64", encoding="nope")


# -- schema details -----------------------------------------------------------------------------
def test_schema_views_have_kudu_pythons_attributes() -> None:
    b = kudu.schema_builder()
    b.add_column("key", "int64", nullable=False).primary_key()
    b.add_column("d", "decimal", precision=8, scale=2)
    b.add_column("v", kudu.varchar, length=5).mutable(False)
    b.add_column("s", kudu.string, compression=kudu.COMPRESSION_SNAPPY, encoding="prefix")
    b.add_column("z", kudu.binary, compression=kudu.COMPRESSION_ZLIB)
    schema = b.build()
    assert schema["key"].type.type == kudu.INT64 and schema["d"].type.type == kudu.DECIMAL
    assert kudu.unixtime_micros.type == kudu.UNIXTIME_MICROS
    attrs = schema["d"].type_attributes
    assert (attrs.precision, attrs.scale, attrs.length) == (8, 2, None)
    assert schema["v"].type_attributes.length == 5
    assert schema["d"].type_to_string() == "DECIMAL(8, 2) NULLABLE"
    assert schema["key"].type_to_string() == "INT64 NOT NULL"
    assert schema["key"].mutable and not schema["v"].mutable and schema["v"].immutable
    assert repr(schema["key"]) == "ColumnSchema(name=key, type=int64, nullable=False)"
    assert schema["s"].encoding == kudu.ENCODING_PREFIX
    assert schema["s"].compression == kudu.COMPRESSION_SNAPPY
    assert schema["z"].compression == kudu.COMPRESSION_ZLIB
    assert kudu.Schema.get_auto_incrementing_column_name() == "auto_incrementing_id"
    # primary_key() after non_unique_primary_key() makes the key unique again
    b = kudu.schema_builder()
    b.add_column("k", "int64", nullable=False).non_unique_primary_key().primary_key()
    assert b.build().primary_keys() == ["k"]
    b = kudu.schema_builder()
    b.add_column("k", "int64", nullable=False, non_unique_primary_key=True)
    assert b.build().primary_keys() == ["k", "auto_incrementing_id"]


def test_copy_column_rebuilds_a_projection_schema(table: kudu.Table) -> None:
    sc = table.scanner().set_projected_column_indexes([0, 1])
    b = kudu.schema_builder()
    for field in sc.get_projection_schema():
        b.copy_column(field)
    b.set_primary_keys(["key"])
    expected = kudu.schema_builder()
    expected.add_column("key", kudu.int64, nullable=False)
    expected.add_column("name", kudu.string)
    expected.set_primary_keys(["key"])
    assert b.build().equals(expected.build())
    b = kudu.schema_builder()
    b.copy_column(table.schema["name"]).nullable(False).primary_key()
    assert b.build()["name"].type == kudu.string


# -- PartialRow and KuduValue ------------------------------------------------------------------
def test_partial_rows_and_kudu_values(table: kudu.Table) -> None:
    row = table.schema.new_row({"key": 5})
    assert isinstance(row, kudu.PartialRow) and row["key"] == 5 and "name" not in row
    row["name"] = kudu.string.new_value("five")
    assert row.to_dict() == {"key": 5, "name": "five"}
    with pytest.raises(KeyError):
        row["nope"] = 1
    with pytest.raises(TypeError, match="an integer is required"):
        row["key"] = "x"
    v = kudu.KuduValue(kudu.int32, 7)
    assert v.value == 7 and v == kudu.int32.new_value(7) and v.type == kudu.int32
    with pytest.raises(DataError, match="out of range"):
        kudu.KuduValue(kudu.int8, 300)
    assert kudu.KuduValue(kudu.binary, "é").value == "é".encode()
    assert kudu.KuduValue(kudu.unixtime_micros, ("2020-01-01", "%Y-%m-%d")).value == (
        datetime.datetime(2020, 1, 1)
    )
    # a KuduValue is accepted as a cell, a predicate literal and a default
    session = table.client.new_session()
    session.apply(table.new_insert({"key": kudu.int64.new_value(3), "name": "three"}))
    session.flush()
    sc = table.scanner().add_predicate(table["key"] == kudu.KuduValue(kudu.int64, 3))
    assert sc.read_all_tuples() == [(3, "three", None)]
    b = kudu.schema_builder()
    b.add_column("k", kudu.int64, primary_key=True)
    b.add_column("n", kudu.int32, default=kudu.int32.new_value(4))
    assert b.build()["n"].default == 4


# -- sessions -----------------------------------------------------------------------------------
def test_write_op_metrics_count_applied_and_ignored_rows_by_kind(table: kudu.Table) -> None:
    session = table.client.new_session()
    assert set(session.get_write_op_metrics().values()) == {0}
    for i in range(10):
        op = table.new_insert_ignore if i % 2 else table.new_insert
        session.apply(op({"key": i}))
    session.flush()
    session.apply(table.new_insert_ignore({"key": 1}))  # ignored
    session.apply(table.new_update({"key": 2, "name": "u"}))
    session.apply(table.new_update_ignore({"key": 99, "name": "u"}))  # ignored
    session.apply(table.new_upsert({"key": 3, "name": "u"}))
    session.apply(table.new_delete_ignore({"key": 4}))
    session.apply(table.new_delete_ignore({"key": 98}))  # ignored
    session.apply(table.new_delete({"key": 97}))  # fails: counted nowhere
    with pytest.raises(kudu.KuduBadStatus):
        session.flush()
    table.client.new_session()  # metrics belong to their session
    session.apply_arrow(table, {"key": [50, 51]}, "insert_ignore")
    session.apply_arrow(table, {"key": [51, 52]}, "insert_ignore")
    assert session.get_write_op_metrics() == {
        "successful_inserts": 10 + 3,
        "insert_ignore_errors": 1 + 1,
        "successful_upserts": 1,
        "upsert_ignore_errors": 0,
        "successful_updates": 1,
        "update_ignore_errors": 1,
        "successful_deletes": 1,
        "delete_ignore_errors": 1,
    }


def test_session_options_of_kudu_python(table: kudu.Table) -> None:
    client = table.client
    session = client.new_session(
        flush_mode=kudu.FLUSH_AUTO_BACKGROUND,
        mutation_buffer_sz=1024,
        mutation_buffer_watermark=0.5,
        mutation_buffer_flush_interval=100,
        mutation_buffer_max_num=3,
    )
    session.set_mutation_buffer_max_num(0)  # no limit
    with pytest.raises(OverflowError, match="can't convert negative value to unsigned int"):
        session.set_mutation_buffer_max_num(-1)
    with pytest.raises(OverflowError, match="can't convert negative value to size_t"):
        session.set_mutation_buffer_space(-1)
    with pytest.raises(kudu.KuduInvalidArgument, match="120: watermark must be between 0"):
        session.set_mutation_buffer_flush_watermark(1.2)
    with pytest.raises(ValueError, match="Invalid flush mode: foo"):
        client.new_session(flush_mode="foo")


def test_scanner_replica_selection_is_checked(table: kudu.Table) -> None:
    for policy in ("leader", "CLOSEST", kudu.FIRST_REPLICA, kudu.LEADER_ONLY):
        assert table.scanner().set_selection(policy).read_all_tuples() == []
        table.scan_token_builder().set_selection(policy)
    with pytest.raises(ValueError, match="Invalid replica selection policy"):
        table.scanner().set_selection("nearest")


# -- connecting ---------------------------------------------------------------------------------
def test_connect_takes_kudu_pythons_arguments(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    with kudu.connect([path], 7051, admin_timeout_ms=1000, rpc_timeout_ms=1000) as c:
        assert not c.is_multimaster
        # a second client of this process shares the open database
        with kudu.connect(path, encryption_policy=kudu.ENCRYPTION_REQUIRED) as c2:
            c2.create_table("t", simple_schema())
            assert c.list_tables() == ["t"]
        assert c.table("t").name == "t"
        with pytest.raises(ValueError, match="give one master address, not 2"):
            kudu.connect([path, path])
        with pytest.raises(kudu.KuduNotSupported, match="no authentication"):
            kudu.connect(path, require_authentication=True)
        with pytest.raises(kudu.KuduNotSupported, match="no tablet servers"):
            c.list_tablet_servers()
    with pytest.raises(ProgrammingError, match="closed"):
        c.list_tables()  # the last client closed the database


# -- kudu.util and TimeDelta --------------------------------------------------------------------
def test_util_conversions() -> None:
    from kudusql.client import util

    dt = datetime.datetime(2020, 1, 1, 0, 0, 1, tzinfo=UTC)
    micros = 1_577_836_801_000_000
    assert util.to_unixtime_micros(dt) == micros
    assert util.to_unixtime_micros(dt.replace(tzinfo=None)) == micros
    assert util.to_unixtime_micros("2020-01-01T00:00:01.000000") == micros
    assert util.to_unixtime_micros(("2020-01-01 00:00:01", "%Y-%m-%d %H:%M:%S")) == micros
    assert util.from_unixtime_micros(micros) == dt
    assert util.from_unixtime_micros(np.int64(micros)) == dt  # as pandas and Arrow hand out
    with pytest.raises(ValueError):
        util.from_unixtime_micros(np.bool_(True))
    assert util.from_hybridtime(micros << 12) == dt + datetime.timedelta(microseconds=1)
    with pytest.raises(ValueError):
        util.to_unixtime_micros(5)
    assert util.to_unscaled_decimal(decimal.Decimal("-123.45")) == -12345
    assert util.from_unscaled_decimal(12345, 2) == decimal.Decimal("123.45")
    assert util.get_decimal_scale(decimal.Decimal("0.10000")) == 5
    assert util.unix_epoch_days_to_date(1) == datetime.date(1970, 1, 2)
    assert util.date_to_unix_epoch_days(datetime.date(1969, 12, 31)) == -1


def test_time_delta() -> None:
    assert repr(kudu.TimeDelta()) == "kudu.TimeDelta()"
    assert kudu.timedelta(3.5).to_seconds() == 3.5
    assert kudu.timedelta(millis=3500).to_millis() == 3500
    assert kudu.timedelta(micros=1000).to_nanos() == 1_000_000
    assert kudu.TimeDelta.from_millis(2) == kudu.timedelta(micros=2000)
    assert kudu.TimeDelta.from_seconds(1) < kudu.TimeDelta.from_seconds(2)
    with pytest.raises(ValueError, match="not set"):
        kudu.TimeDelta().to_nanos()


def test_default_owner_is_the_current_user(client: kudu.Client) -> None:
    t = client.create_table("t", simple_schema())
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = ""
    assert t.owner == user
