-- CREATE TABLE: columns, attributes, keys, properties, CTAS, LIKE, DROP TABLE.

-- statement inline key, no partitioning: one tablet and a warning
CREATE TABLE t (id BIGINT PRIMARY KEY, name STRING)
-- expect
CreateTable(
  table=t
  columns=[
    ColumnSpec(name='id', type=INT64, primary_key=True)
    ColumnSpec(name='name', type=STRING)
  ]
  primary_key=['id']
  warnings=[
    'table t has no PARTITION BY clause, so it is stored in a single tablet; add PARTITION BY HASH (key) PARTITIONS n to spread it over n tablets'
  ]
)

-- statement every type
CREATE TABLE db.all_types (
  k BIGINT,
  b BOOLEAN, i8 TINYINT, i16 SMALLINT, i32 INT, i64 BIGINT, f FLOAT, d DOUBLE,
  dec DECIMAL(10, 2), dec0 DECIMAL, s STRING, v VARCHAR(20), bin BINARY, dt DATE,
  ts TIMESTAMP,
  PRIMARY KEY (k)
) PARTITION BY HASH (k) PARTITIONS 2
-- expect
CreateTable(
  table=db.all_types
  columns=[
    ColumnSpec(name='k', type=INT64)
    ColumnSpec(name='b', type=BOOL)
    ColumnSpec(name='i8', type=INT8)
    ColumnSpec(name='i16', type=INT16)
    ColumnSpec(name='i32', type=INT32)
    ColumnSpec(name='i64', type=INT64)
    ColumnSpec(name='f', type=FLOAT)
    ColumnSpec(name='d', type=DOUBLE)
    ColumnSpec(name='dec', type=DECIMAL(10,2))
    ColumnSpec(name='dec0', type=DECIMAL(9,0))
    ColumnSpec(name='s', type=STRING)
    ColumnSpec(name='v', type=VARCHAR(20))
    ColumnSpec(name='bin', type=BINARY)
    ColumnSpec(name='dt', type=DATE)
    ColumnSpec(name='ts', type=TIMESTAMP)
  ]
  primary_key=['k']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['k'], buckets=2)])
)

-- statement Kudu type names (INT8 is one byte, as in Kudu)
CREATE TABLE k (a INT64 PRIMARY KEY, b INT8, c INT16, d INT32, e BOOL, f INTEGER, g REAL) PARTITION BY HASH PARTITIONS 2
-- expect
CreateTable(
  table=k
  columns=[
    ColumnSpec(name='a', type=INT64, primary_key=True)
    ColumnSpec(name='b', type=INT8)
    ColumnSpec(name='c', type=INT16)
    ColumnSpec(name='d', type=INT32)
    ColumnSpec(name='e', type=BOOL)
    ColumnSpec(name='f', type=INT32)
    ColumnSpec(name='g', type=FLOAT)
  ]
  primary_key=['a']
  partitioning=PartitionSpec(hash=[HashSpec(columns=[], buckets=2)])
)

-- statement column attributes
CREATE TABLE t (
  id INT NOT NULL PRIMARY KEY COMMENT 'the key',
  name STRING NULL ENCODING DICT_ENCODING COMPRESSION LZ4 BLOCK_SIZE 8192 COMMENT 'who',
  qty INT NOT NULL DEFAULT 0,
  price DECIMAL(8,2) DEFAULT 9.99,
  price2 DECIMAL(8,2) DEFAULT 3,
  ratio DOUBLE DEFAULT 1,
  day DATE DEFAULT DATE '2024-02-29',
  day2 DATE DEFAULT '2024-03-01',
  at TIMESTAMP DEFAULT TIMESTAMP '2024-01-31 12:30:00',
  at2 TIMESTAMP DEFAULT '2024-01-31',
  flag BOOLEAN DEFAULT false,
  raw BINARY DEFAULT X'00ff',
  neg BIGINT DEFAULT -42,
  nothing STRING DEFAULT NULL,
  casted INT DEFAULT CAST(7 AS INT)
) PARTITION BY HASH (id) PARTITIONS 3
-- expect
CreateTable(
  table=t
  columns=[
    ColumnSpec(name='id', type=INT32, primary_key=True, nullable=False, comment='the key')
    ColumnSpec(
      name='name'
      type=STRING
      nullable=True
      encoding='DICT_ENCODING'
      compression='LZ4'
      block_size=8192
      comment='who'
    )
    ColumnSpec(name='qty', type=INT32, nullable=False, default=0)
    ColumnSpec(name='price', type=DECIMAL(8,2), default=Decimal('9.99'))
    ColumnSpec(name='price2', type=DECIMAL(8,2), default=Decimal('3.00'))
    ColumnSpec(name='ratio', type=DOUBLE, default=1.0)
    ColumnSpec(name='day', type=DATE, default=datetime.date(2024, 2, 29))
    ColumnSpec(name='day2', type=DATE, default=datetime.date(2024, 3, 1))
    ColumnSpec(name='at', type=TIMESTAMP, default=datetime.datetime(2024, 1, 31, 12, 30))
    ColumnSpec(name='at2', type=TIMESTAMP, default=datetime.datetime(2024, 1, 31, 0, 0))
    ColumnSpec(name='flag', type=BOOL, default=False)
    ColumnSpec(name='raw', type=BINARY, default=b'\x00\xff')
    ColumnSpec(name='neg', type=INT64, default=-42)
    ColumnSpec(name='nothing', type=STRING)
    ColumnSpec(name='casted', type=INT32, default=7)
  ]
  primary_key=['id']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['id'], buckets=3)])
)

-- statement compound key as a table element, before the columns it names
CREATE TABLE IF NOT EXISTS metrics (
  PRIMARY KEY (host, ts),
  host STRING, ts TIMESTAMP, value DOUBLE
) PARTITION BY HASH (host) PARTITIONS 4 COMMENT 'cpu' STORED AS KUDU
  TBLPROPERTIES ('kudu.num_tablet_replicas' = '1', 'history_max_age_s' = '600')
-- expect
CreateTable(
  table=metrics
  columns=[
    ColumnSpec(name='host', type=STRING)
    ColumnSpec(name='ts', type=TIMESTAMP)
    ColumnSpec(name='value', type=DOUBLE)
  ]
  primary_key=['host', 'ts']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['host'], buckets=4)])
  properties={'kudu.num_tablet_replicas': '1', 'history_max_age_s': '600'}
  comment='cpu'
  if_not_exists=True
)

-- statement clauses in any order
CREATE TABLE t (a INT PRIMARY KEY) TBLPROPERTIES ('x' = 'y') STORED AS kudu COMMENT 'c' PARTITION BY HASH (a) PARTITIONS 2
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32, primary_key=True)]
  primary_key=['a']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['a'], buckets=2)])
  properties={'x': 'y'}
  comment='c'
)

-- statement identifiers fold to lower case, quoted or not (Impala)
CREATE TABLE `MyTable` (`Id` INT PRIMARY KEY, Name STRING) PARTITION BY HASH (`Id`) PARTITIONS 2
-- expect
CreateTable(
  table=mytable
  columns=[
    ColumnSpec(name='id', type=INT32, primary_key=True)
    ColumnSpec(name='name', type=STRING)
  ]
  primary_key=['id']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['id'], buckets=2)])
)

-- statement CREATE TABLE AS SELECT with key and partitioning
CREATE TABLE t2 PRIMARY KEY (id) PARTITION BY HASH (id) PARTITIONS 3 STORED AS KUDU AS SELECT id, name FROM t WHERE id > 10
-- expect
CreateTable(
  table=t2
  primary_key=['id']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['id'], buckets=3)])
  as_select=`SELECT id, name FROM t WHERE id > 10`
)

-- statement CTAS with a WITH query
CREATE TABLE IF NOT EXISTS db.t3 PRIMARY KEY (k) AS WITH x AS (SELECT 1 AS k) SELECT k FROM x
-- expect
CreateTable(
  table=db.t3
  primary_key=['k']
  if_not_exists=True
  as_select=`WITH x AS (SELECT 1 AS k) SELECT k FROM x`
  warnings=[
    'table db.t3 has no PARTITION BY clause, so it is stored in a single tablet; add PARTITION BY HASH (key) PARTITIONS n to spread it over n tablets'
  ]
)

-- statement CTAS keeps range bounds untyped (the columns come from the query)
CREATE TABLE t4 PRIMARY KEY (k) PARTITION BY RANGE (k) (PARTITION VALUES < 10, PARTITION 10 <= VALUES) AS SELECT 5 AS k
-- expect
CreateTable(
  table=t4
  primary_key=['k']
  partitioning=PartitionSpec(
    range=RangeSpec(columns=['k'], bounds=[RangeBounds(upper=[10]), RangeBounds(lower=[10])])
  )
  as_select=`SELECT 5 AS k`
)

-- statement
CREATE TABLE t5 LIKE t
-- expect
CreateTable(table=t5, like=t)

-- statement
CREATE TABLE IF NOT EXISTS d2.t5 LIKE d1.t STORED AS KUDU
-- expect
CreateTable(table=d2.t5, if_not_exists=True, like=d1.t)

-- statement
DROP TABLE t
-- expect
DropTable(table=t)

-- statement
DROP TABLE IF EXISTS db.t PURGE
-- expect
DropTable(table=db.t, if_exists=True, purge=True)

-- statement no primary key
CREATE TABLE t (a INT, b INT)
-- error
error at line 1, column 14: table t needs a primary key: add PRIMARY KEY to a column or PRIMARY KEY (col, ...) to the definition
  CREATE TABLE t (a INT, b INT)
               ^

-- statement two inline keys
CREATE TABLE t (a INT PRIMARY KEY, b INT PRIMARY KEY)
-- error
error at line 1, column 14: several columns say PRIMARY KEY (a, b); declare a compound key as PRIMARY KEY (a, b)
  CREATE TABLE t (a INT PRIMARY KEY, b INT PRIMARY KEY)
               ^

-- statement key declared twice
CREATE TABLE t (a INT PRIMARY KEY, b INT, PRIMARY KEY (a))
-- error
error at line 1, column 56: the primary key is declared twice (inline and as PRIMARY KEY (...))
  CREATE TABLE t (a INT PRIMARY KEY, b INT, PRIMARY KEY (a))
                                                         ^

-- statement nullable key
CREATE TABLE t (a INT PRIMARY KEY NULL)
-- error
error at line 1, column 17: primary key column 'a' cannot be NULL
  CREATE TABLE t (a INT PRIMARY KEY NULL)
                  ^

-- statement nullable key in the element
CREATE TABLE t (a INT NULL, PRIMARY KEY (a))
-- error
error at line 1, column 42: primary key column 'a' cannot be NULL
  CREATE TABLE t (a INT NULL, PRIMARY KEY (a))
                                           ^

-- statement key column of a type Kudu refuses
CREATE TABLE t (a DOUBLE PRIMARY KEY)
-- error
error at line 1, column 14: CREATE TABLE t: key column 'a' cannot be of type DOUBLE (BOOL, FLOAT and DOUBLE are not allowed in a primary key)
  CREATE TABLE t (a DOUBLE PRIMARY KEY)
               ^

-- statement key names an unknown column
CREATE TABLE t (a INT, PRIMARY KEY (b))
-- error
error at line 1, column 14: CREATE TABLE t: primary key column 'b' is not a column of the table
  CREATE TABLE t (a INT, PRIMARY KEY (b))
               ^

-- statement duplicate column
CREATE TABLE t (a INT PRIMARY KEY, a STRING)
-- expect
CreateTable(
  table=t
  columns=[
    ColumnSpec(name='a', type=INT32, primary_key=True)
    ColumnSpec(name='a', type=STRING)
  ]
  primary_key=['a']
  warnings=[
    'table t has no PARTITION BY clause, so it is stored in a single tablet; add PARTITION BY HASH (key) PARTITIONS n to spread it over n tablets'
  ]
)

-- statement unknown type
CREATE TABLE t (a INT PRIMARY KEY, b GEOMETRY)
-- error
error at line 1, column 1: type GEOMETRY is not supported; the types are BOOLEAN, TINYINT (INT8), SMALLINT (INT16), INT (INT32), BIGINT (INT64), FLOAT, DOUBLE, DECIMAL(p,s), STRING, VARCHAR(n), BINARY, DATE, TIMESTAMP
  CREATE TABLE t (a INT PRIMARY KEY, b GEOMETRY)
  ^

-- statement a DuckDB type that Kudu lacks
CREATE TABLE t (a INT PRIMARY KEY, b INT[])
-- error
error at line 1, column 1: type INT[] is not supported; the types are BOOLEAN, TINYINT (INT8), SMALLINT (INT16), INT (INT32), BIGINT (INT64), FLOAT, DOUBLE, DECIMAL(p,s), STRING, VARCHAR(n), BINARY, DATE, TIMESTAMP
  CREATE TABLE t (a INT PRIMARY KEY, b INT[])
  ^

-- statement VARCHAR needs a length
CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR)
-- error
error at line 1, column 1: VARCHAR needs a length, as in VARCHAR(20)
  CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR)
  ^

-- statement bad DECIMAL
CREATE TABLE t (a INT PRIMARY KEY, b DECIMAL(50, 2))
-- error
error at line 1, column 46: DECIMAL precision must be 1..38 and scale 0..precision, got (50, 2)
  CREATE TABLE t (a INT PRIMARY KEY, b DECIMAL(50, 2))
                                               ^

-- statement DEFAULT of the wrong type
CREATE TABLE t (a INT PRIMARY KEY, b INT DEFAULT 'x')
-- error
error at line 1, column 50: DEFAULT of column 'b': 'x' is not of type INT32
  CREATE TABLE t (a INT PRIMARY KEY, b INT DEFAULT 'x')
                                                   ^

-- statement DEFAULT that overflows
CREATE TABLE t (a INT PRIMARY KEY, b TINYINT DEFAULT 300)
-- error
error at line 1, column 54: DEFAULT of column 'b': 300 does not fit type INT8
  CREATE TABLE t (a INT PRIMARY KEY, b TINYINT DEFAULT 300)
                                                       ^

-- statement DEFAULT must be constant
CREATE TABLE t (a INT PRIMARY KEY, b TIMESTAMP DEFAULT now())
-- error
error at line 1, column 56: DEFAULT of column 'b': only constant values are allowed, not now() (its value is not fixed)
  CREATE TABLE t (a INT PRIMARY KEY, b TIMESTAMP DEFAULT now())
                                                         ^

-- statement DEFAULT with a bad date
CREATE TABLE t (a INT PRIMARY KEY, b DATE DEFAULT DATE '2024-02-30')
-- error
error at line 1, column 56: DEFAULT of column 'b': '2024-02-30' does not fit type DATE
  CREATE TABLE t (a INT PRIMARY KEY, b DATE DEFAULT DATE '2024-02-30')
                                                         ^

-- statement attribute given twice
CREATE TABLE t (a INT PRIMARY KEY NOT NULL NULL)
-- error
syntax error at line 1, column 44: NULLABLE is given twice for column 'a'
  CREATE TABLE t (a INT PRIMARY KEY NOT NULL NULL)
                                             ^

-- statement BLOCK_SIZE needs a number
CREATE TABLE t (a INT PRIMARY KEY BLOCK_SIZE big)
-- error
syntax error at line 1, column 46: Expected a block size (a whole number)
  CREATE TABLE t (a INT PRIMARY KEY BLOCK_SIZE big)
                                               ^

-- statement only Kudu storage
CREATE TABLE t (a INT PRIMARY KEY) STORED AS PARQUET
-- error
error at line 1, column 1: only STORED AS KUDU is supported, not PARQUET
  CREATE TABLE t (a INT PRIMARY KEY) STORED AS PARQUET
  ^

-- statement clause given twice
CREATE TABLE t (a INT PRIMARY KEY) COMMENT 'x' COMMENT 'y'
-- error
syntax error at line 1, column 48: COMMENT is given twice
  CREATE TABLE t (a INT PRIMARY KEY) COMMENT 'x' COMMENT 'y'
                                                 ^

-- statement CTAS takes no column list
CREATE TABLE t (a INT PRIMARY KEY) AS SELECT 1
-- error
syntax error at line 1, column 36: CREATE TABLE ... AS SELECT takes no column list (declare the key with PRIMARY KEY (cols) after the table name)
  CREATE TABLE t (a INT PRIMARY KEY) AS SELECT 1
                                     ^

-- statement CTAS without a key
CREATE TABLE t AS SELECT 1 AS a
-- error
error at line 1, column 14: table t needs a primary key: add PRIMARY KEY to a column or PRIMARY KEY (col, ...) to the definition
  CREATE TABLE t AS SELECT 1 AS a
               ^

-- statement views are not supported
CREATE VIEW v AS SELECT 1
-- error
syntax error at line 1, column 8: CREATE VIEW is not supported; kudusql creates tables and databases
  CREATE VIEW v AS SELECT 1
         ^

-- statement
CREATE EXTERNAL TABLE t (a INT)
-- error
syntax error at line 1, column 8: CREATE EXTERNAL is not supported; kudusql creates tables and databases
  CREATE EXTERNAL TABLE t (a INT)
         ^

-- statement three-part names
CREATE TABLE a.b.c (x INT PRIMARY KEY)
-- error
error at line 1, column 18: table names have at most two parts (database.table): a.b.c
  CREATE TABLE a.b.c (x INT PRIMARY KEY)
                   ^

-- statement missing closing parenthesis
CREATE TABLE t (a INT PRIMARY KEY
-- error
syntax error at line 1, column 34: Expected , or ) after a column definition (the statement ended early)
  CREATE TABLE t (a INT PRIMARY KEY
                                   ^

-- statement
DROP TABLE
-- error
syntax error at line 1, column 11: Expected table name but got the end of the statement (the statement ended early)
  DROP TABLE
            ^

-- statement
DROP INDEX i
-- error
syntax error at line 1, column 6: Expected TABLE or DATABASE after DROP
  DROP INDEX i
       ^
