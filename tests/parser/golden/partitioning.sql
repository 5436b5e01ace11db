-- Partitioning in both dialects: Impala's PARTITION BY and the Kudu paper's DISTRIBUTE BY.

-- statement the paper: hash
CREATE TABLE m (host STRING, metric STRING, ts TIMESTAMP, v DOUBLE, PRIMARY KEY (host, metric, ts)) DISTRIBUTE BY HASH (host, metric) INTO 16 BUCKETS
-- expect
CreateTable(
  table=m
  columns=[
    ColumnSpec(name='host', type=STRING)
    ColumnSpec(name='metric', type=STRING)
    ColumnSpec(name='ts', type=TIMESTAMP)
    ColumnSpec(name='v', type=DOUBLE)
  ]
  primary_key=['host', 'metric', 'ts']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['host', 'metric'], buckets=16)])
)

-- statement the paper: range with split rows
CREATE TABLE t (a INT PRIMARY KEY) DISTRIBUTE BY RANGE (a) SPLIT ROWS ((10), (20))
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32, primary_key=True)]
  primary_key=['a']
  partitioning=PartitionSpec(range=RangeSpec(columns=['a'], split_rows=[[10], [20]]))
)

-- statement split rows without inner parentheses
CREATE TABLE t (a INT PRIMARY KEY) DISTRIBUTE BY RANGE (a) SPLIT ROWS (10, 20, 30)
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32, primary_key=True)]
  primary_key=['a']
  partitioning=PartitionSpec(range=RangeSpec(columns=['a'], split_rows=[[10], [20], [30]]))
)

-- statement the paper: hash and range combined
CREATE TABLE t (a INT, b STRING, PRIMARY KEY (a, b)) DISTRIBUTE BY HASH (b) INTO 4 BUCKETS, RANGE (a) SPLIT ROWS ((100))
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32), ColumnSpec(name='b', type=STRING)]
  primary_key=['a', 'b']
  partitioning=PartitionSpec(
    hash=[HashSpec(columns=['b'], buckets=4)]
    range=RangeSpec(columns=['a'], split_rows=[[100]])
  )
)

-- statement compound split rows
CREATE TABLE t (a INT, b STRING, PRIMARY KEY (a, b)) DISTRIBUTE BY RANGE (a, b) SPLIT ROWS ((1, 'm'), (2, 'a'))
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32), ColumnSpec(name='b', type=STRING)]
  primary_key=['a', 'b']
  partitioning=PartitionSpec(
    range=RangeSpec(columns=['a', 'b'], split_rows=[[1, 'm'], [2, 'a']])
  )
)

-- statement Impala: hash
CREATE TABLE t (id BIGINT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 4 STORED AS KUDU
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='id', type=INT64, primary_key=True)]
  primary_key=['id']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['id'], buckets=4)])
)

-- statement Impala: hash over all key columns
CREATE TABLE t (a INT, b INT, PRIMARY KEY (a, b)) PARTITION BY HASH PARTITIONS 8
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32), ColumnSpec(name='b', type=INT32)]
  primary_key=['a', 'b']
  partitioning=PartitionSpec(hash=[HashSpec(columns=[], buckets=8)])
)

-- statement Impala: several hash levels with a seed
CREATE TABLE t (a INT, b INT, PRIMARY KEY (a, b)) PARTITION BY HASH (a) PARTITIONS 2, HASH (b) PARTITIONS 3 SEED 7
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32), ColumnSpec(name='b', type=INT32)]
  primary_key=['a', 'b']
  partitioning=PartitionSpec(
    hash=[HashSpec(columns=['a'], buckets=2), HashSpec(columns=['b'], buckets=3, seed=7)]
  )
)

-- statement Impala: every range bound form
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES < 10, PARTITION 10 <= VALUES < 20, PARTITION 20 <= VALUES < 30, PARTITION VALUE = 30, PARTITION 30 < VALUES <= 40, PARTITION 50 <= VALUES)
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32, primary_key=True)]
  primary_key=['a']
  partitioning=PartitionSpec(
    range=RangeSpec(
      columns=['a']
      bounds=[
        RangeBounds(upper=[10])
        RangeBounds(lower=[10], upper=[20])
        RangeBounds(lower=[20], upper=[30])
        RangeBounds(lower=[30], upper=[30], upper_inclusive=True)
        RangeBounds(lower=[30], upper=[40], lower_inclusive=False, upper_inclusive=True)
        RangeBounds(lower=[50])
      ]
    )
  )
)

-- statement Impala: VALUE = tuple for a compound range
CREATE TABLE t (a INT, b STRING, PRIMARY KEY (a, b)) PARTITION BY RANGE (a, b) (PARTITION VALUE = (1, 'x'), PARTITION (2, 'a') <= VALUES < (3, 'b'))
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32), ColumnSpec(name='b', type=STRING)]
  primary_key=['a', 'b']
  partitioning=PartitionSpec(
    range=RangeSpec(
      columns=['a', 'b']
      bounds=[
        RangeBounds(lower=[1, 'x'], upper=[1, 'x'], upper_inclusive=True)
        RangeBounds(lower=[2, 'a'], upper=[3, 'b'])
      ]
    )
  )
)

-- statement Impala: hash levels combined with range
CREATE TABLE t (id BIGINT, ts TIMESTAMP, PRIMARY KEY (id, ts)) PARTITION BY HASH (id) PARTITIONS 4, RANGE (ts) (PARTITION TIMESTAMP '2024-01-01' <= VALUES < TIMESTAMP '2025-01-01', PARTITION '2025-01-01' <= VALUES < '2026-01-01') STORED AS KUDU
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='id', type=INT64), ColumnSpec(name='ts', type=TIMESTAMP)]
  primary_key=['id', 'ts']
  partitioning=PartitionSpec(
    hash=[HashSpec(columns=['id'], buckets=4)]
    range=RangeSpec(
      columns=['ts']
      bounds=[
        RangeBounds(
          lower=[datetime.datetime(2024, 1, 1, 0, 0)]
          upper=[datetime.datetime(2025, 1, 1, 0, 0)]
        )
        RangeBounds(
          lower=[datetime.datetime(2025, 1, 1, 0, 0)]
          upper=[datetime.datetime(2026, 1, 1, 0, 0)]
        )
      ]
    )
  )
)

-- statement typed bounds: dates
CREATE TABLE t (d DATE, p DECIMAL(6,2), s STRING, n BIGINT, PRIMARY KEY (d, p, s, n)) PARTITION BY HASH (n) PARTITIONS 2, RANGE (d) (PARTITION VALUES < DATE '2024-01-01', PARTITION DATE '2024-01-01' <= VALUES)
-- expect
CreateTable(
  table=t
  columns=[
    ColumnSpec(name='d', type=DATE)
    ColumnSpec(name='p', type=DECIMAL(6,2))
    ColumnSpec(name='s', type=STRING)
    ColumnSpec(name='n', type=INT64)
  ]
  primary_key=['d', 'p', 's', 'n']
  partitioning=PartitionSpec(
    hash=[HashSpec(columns=['n'], buckets=2)]
    range=RangeSpec(
      columns=['d']
      bounds=[
        RangeBounds(upper=[datetime.date(2024, 1, 1)])
        RangeBounds(lower=[datetime.date(2024, 1, 1)])
      ]
    )
  )
)

-- statement typed bounds: strings and binary
CREATE TABLE t (s STRING, b BINARY, PRIMARY KEY (s, b)) PARTITION BY RANGE (s, b) (PARTITION VALUES < ('m', X'00'), PARTITION ('m', X'00') <= VALUES)
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='s', type=STRING), ColumnSpec(name='b', type=BINARY)]
  primary_key=['s', 'b']
  partitioning=PartitionSpec(
    range=RangeSpec(
      columns=['s', 'b']
      bounds=[RangeBounds(upper=['m', b'\x00']), RangeBounds(lower=['m', b'\x00'])]
    )
  )
)

-- statement typed bounds on several columns
CREATE TABLE t (d DATE, p DECIMAL(6,2), s STRING, n BIGINT, PRIMARY KEY (d, p, s, n)) PARTITION BY HASH (n) PARTITIONS 2, RANGE (p) (PARTITION -10.5 <= VALUES < 0, PARTITION 0 <= VALUES < 99.99)
-- expect
CreateTable(
  table=t
  columns=[
    ColumnSpec(name='d', type=DATE)
    ColumnSpec(name='p', type=DECIMAL(6,2))
    ColumnSpec(name='s', type=STRING)
    ColumnSpec(name='n', type=INT64)
  ]
  primary_key=['d', 'p', 's', 'n']
  partitioning=PartitionSpec(
    hash=[HashSpec(columns=['n'], buckets=2)]
    range=RangeSpec(
      columns=['p']
      bounds=[
        RangeBounds(lower=[Decimal('-10.50')], upper=[Decimal('0.00')])
        RangeBounds(lower=[Decimal('0.00')], upper=[Decimal('99.99')])
      ]
    )
  )
)

-- statement unbounded range partition
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES)
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32, primary_key=True)]
  primary_key=['a']
  partitioning=PartitionSpec(range=RangeSpec(columns=['a'], bounds=[RangeBounds()]))
)

-- statement a range with splits inside explicit partitions (early Impala-Kudu)
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION 0 <= VALUES < 100) SPLIT ROWS ((50))
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32, primary_key=True)]
  primary_key=['a']
  partitioning=PartitionSpec(
    range=RangeSpec(
      columns=['a']
      bounds=[RangeBounds(lower=[0], upper=[100])]
      split_rows=[[50]]
    )
  )
)

-- statement hash on a non-key column
CREATE TABLE t (a INT PRIMARY KEY, b INT) PARTITION BY HASH (b) PARTITIONS 2
-- error
error at line 1, column 62: CREATE TABLE t: HASH (b) PARTITIONS 2: column 'b' is not a primary key column (hash and range partitioning use key columns only)
  CREATE TABLE t (a INT PRIMARY KEY, b INT) PARTITION BY HASH (b) PARTITIONS 2
                                                               ^

-- statement range on an unknown column
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (zz) (PARTITION VALUES < 1)
-- error
error at line 1, column 56: RANGE column 'zz' is not a column of the table
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (zz) (PARTITION VALUES < 1)
                                                         ^

-- statement one bucket is not hash partitioning
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY HASH (a) PARTITIONS 1
-- error
error at line 1, column 55: CREATE TABLE t: HASH (a) PARTITIONS 1: a hash dimension needs at least 2 buckets (at most 2147483647)
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY HASH (a) PARTITIONS 1
                                                        ^

-- statement hash levels must not share columns
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY HASH (a) PARTITIONS 2, HASH (a) PARTITIONS 3
-- error
error at line 1, column 55: CREATE TABLE t: HASH (a) PARTITIONS 3: column 'a' is used twice in hash partitioning (hash dimensions must not share columns)
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY HASH (a) PARTITIONS 2, HASH (a) PARTITIONS 3
                                                        ^

-- statement overlapping ranges
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES < 10, PARTITION 5 <= VALUES)
-- error
error at line 1, column 56: CREATE TABLE t: range partitions overlap: VALUES < 10 and 5 <= VALUES in RANGE (a)
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES < 10, PARTITION 5 <= VALUES)
                                                         ^

-- statement a bound of the wrong type
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES < 'ten')
-- error
error at line 1, column 79: range bound for column 'a': 'ten' is not of type INT32
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES < 'ten')
                                                                                ^

-- statement a bound that is not a constant
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES < a + 1)
-- error
error at line 1, column 79: range bound: only constant values are allowed, not a (a column)
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES < a + 1)
                                                                                ^

-- statement too many values in a bound
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUE = (1, 2))
-- error
error at line 1, column 79: range bound has 2 values but RANGE has 1 columns
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUE = (1, 2))
                                                                                ^

-- statement PARTITIONS needs a number
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY HASH (a) PARTITIONS four
-- error
syntax error at line 1, column 69: Expected the number of partitions (a whole number)
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY HASH (a) PARTITIONS four
                                                                      ^

-- statement BUCKETS missing
CREATE TABLE t (a INT PRIMARY KEY) DISTRIBUTE BY HASH (a) INTO 4
-- error
syntax error at line 1, column 65: Expected BUCKETS (the statement ended early)
  CREATE TABLE t (a INT PRIMARY KEY) DISTRIBUTE BY HASH (a) INTO 4
                                                                  ^

-- statement neither HASH nor RANGE
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY LIST (a)
-- error
syntax error at line 1, column 49: Expected HASH or RANGE after PARTITION BY
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY LIST (a)
                                                  ^

-- statement RANGE may come before HASH (Impala)
CREATE TABLE t (a INT, b INT, PRIMARY KEY (a, b)) PARTITION BY RANGE (a) (PARTITION VALUES < 1), HASH (b) PARTITIONS 2
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32), ColumnSpec(name='b', type=INT32)]
  primary_key=['a', 'b']
  partitioning=PartitionSpec(
    hash=[HashSpec(columns=['b'], buckets=2)]
    range=RangeSpec(columns=['a'], bounds=[RangeBounds(upper=[1])])
  )
)

-- statement a range partition needs the VALUES keyword
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION 1 <= 2)
-- error
syntax error at line 1, column 75: Expected VALUES
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION 1 <= 2)
                                                                            ^

-- statement a range partition list needs PARTITION
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (VALUES < 1)
-- error
syntax error at line 1, column 60: Expected PARTITION
  CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (VALUES < 1)
                                                             ^

-- statement RANGE without columns ranges over the primary key (Impala)
CREATE TABLE t (a INT, b STRING, PRIMARY KEY (a, b)) PARTITION BY RANGE (PARTITION VALUE = (1, 'a') PARTITION (2, 'b') <= VALUES)
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32), ColumnSpec(name='b', type=STRING)]
  primary_key=['a', 'b']
  partitioning=PartitionSpec(
    range=RangeSpec(
      columns=['a', 'b']
      bounds=[
        RangeBounds(lower=[1, 'a'], upper=[1, 'a'], upper_inclusive=True)
        RangeBounds(lower=[2, 'b'])
      ]
    )
  )
)

-- statement reversed bounds: b > VALUES is an upper bound, VALUES >= b a lower one
CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION 10 > VALUES, PARTITION VALUES >= 10 * 2, PARTITION 10 <= VALUES <= 19)
-- expect
CreateTable(
  table=t
  columns=[ColumnSpec(name='a', type=INT32, primary_key=True)]
  primary_key=['a']
  partitioning=PartitionSpec(
    range=RangeSpec(
      columns=['a']
      bounds=[
        RangeBounds(upper=[10])
        RangeBounds(lower=[20])
        RangeBounds(lower=[10], upper=[19], upper_inclusive=True)
      ]
    )
  )
)
