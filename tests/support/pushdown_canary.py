"""A minimal Python data source that takes Spark's ``IN`` filters, for the test that pins
why ``kudusql.pushFilters`` is refused (``tests/spark/test_read.py``).

It serves the ids 0..100 as one column ``id``. ``pushFilters`` keeps an ``IN`` on ``id``;
``partitions`` puts the kept ids into the one partition it plans, and ``read`` yields
exactly the ids its partition carries. So the rows a read returns show which query's
filters its plan was made for. Spark imports this module in its Python workers
(``tests`` is importable from the checkout's root).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceReader, Filter, In, InputPartition
from pyspark.sql.types import StructType

ROWS = 101


class InPushingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kudusql_pushdown_canary"

    def schema(self) -> str:
        return "id bigint"

    def reader(self, schema: StructType) -> DataSourceReader:
        return InPushingReader()


class InPushingReader(DataSourceReader):
    def __init__(self) -> None:
        self.ids: list[int] | None = None  # None: every id

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        for f in filters:
            if isinstance(f, In) and tuple(f.attribute) == ("id",):
                self.ids = sorted(int(v) for v in f.value if v is not None)
            else:
                yield f

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(self.ids)]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        ids = range(ROWS) if partition.value is None else partition.value
        for i in ids:
            if 0 <= i < ROWS:
                yield (i,)
