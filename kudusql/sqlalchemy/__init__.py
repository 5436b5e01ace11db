"""kudusql for SQLAlchemy and pandas: the ``kudusql`` dialect (issue 34).

``sqlalchemy.create_engine("kudusql:///path/to/db")`` finds ``dialect.KuduSQLDialect``
through the ``sqlalchemy.dialects`` entry point. Modules: ``dialect`` (URLs, connections,
transactions, reflection), ``compiler`` (statements, Kudu DDL, types to Kudu types),
``reflection`` (a table's definition from SHOW CREATE TABLE), ``types`` (Kudu's types
in SQLAlchemy: ``TINYINT``, ``STRING``, ``BINARY``). SQLAlchemy is imported here and
nowhere else in kudusql. See docs/SQLALCHEMY.md.
"""

from kudusql.sqlalchemy.types import BINARY, STRING, TINYINT

__all__ = ["BINARY", "STRING", "TINYINT"]
