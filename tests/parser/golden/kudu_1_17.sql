-- Kudu 1.17 (Impala 4.3): per-range hash schemas, SHOW HASH SCHEMA, non-unique primary keys.

-- statement a range with its own hash schema
CREATE TABLE r (id INT PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 2, RANGE (id) (PARTITION VALUES < 10 HASH (id) PARTITIONS 3, PARTITION 10 <= VALUES < 20)
-- expect
CreateTable(
  table=r
  columns=[
    ColumnSpec(name='id', type=INT32, primary_key=True)
    ColumnSpec(name='v', type=STRING)
  ]
  primary_key=['id']
  partitioning=PartitionSpec(
    hash=[HashSpec(columns=['id'], buckets=2)]
    range=RangeSpec(
      columns=['id']
      bounds=[
        RangeBounds(upper=[10], hash_schema=[HashDimension(columns=['id'], num_buckets=3)])
        RangeBounds(lower=[10], upper=[20])
      ]
    )
  )
)

-- statement several levels per range, with and without commas, and a seed
CREATE TABLE c (a INT, b INT, PRIMARY KEY (a, b)) PARTITION BY HASH (a) PARTITIONS 3, HASH (b) PARTITIONS 4, RANGE (b) (PARTITION 0 <= VALUES < 10 HASH (a) PARTITIONS 2 HASH (b) PARTITIONS 3, PARTITION 10 <= VALUES < 20 HASH (a) PARTITIONS 5 SEED 7, HASH (b) PARTITIONS 2, PARTITION VALUE = 30)
-- expect
CreateTable(
  table=c
  columns=[ColumnSpec(name='a', type=INT32), ColumnSpec(name='b', type=INT32)]
  primary_key=['a', 'b']
  partitioning=PartitionSpec(
    hash=[HashSpec(columns=['a'], buckets=3), HashSpec(columns=['b'], buckets=4)]
    range=RangeSpec(
      columns=['b']
      bounds=[
        RangeBounds(
          lower=[0]
          upper=[10]
          hash_schema=[
            HashDimension(columns=['a'], num_buckets=2)
            HashDimension(columns=['b'], num_buckets=3)
          ]
        )
        RangeBounds(
          lower=[10]
          upper=[20]
          hash_schema=[
            HashDimension(columns=['a'], num_buckets=5, seed=7)
            HashDimension(columns=['b'], num_buckets=2)
          ]
        )
        RangeBounds(lower=[30], upper=[30], upper_inclusive=True)
      ]
    )
  )
)

-- statement ADD and DROP RANGE PARTITION with a hash schema
ALTER TABLE r ADD RANGE PARTITION 20 <= VALUES < 30 HASH (id) PARTITIONS 4, DROP RANGE PARTITION VALUES < 10 HASH (id) PARTITIONS 3
-- expect
AlterTable(
  table=r
  steps=[
    AddRangePartition(
      bounds=RangeBounds(
        lower=[20]
        upper=[30]
        hash_schema=[HashDimension(columns=['id'], num_buckets=4)]
      )
    )
    DropRangePartition(
      bounds=RangeBounds(upper=[10], hash_schema=[HashDimension(columns=['id'], num_buckets=3)])
    )
  ]
)

-- statement SHOW HASH SCHEMA
SHOW HASH SCHEMA db.r
-- expect
ShowHashSchema(table=db.r)

-- statement an inline non-unique key
CREATE TABLE nu (id INT NON UNIQUE PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 2
-- expect
CreateTable(
  table=nu
  columns=[
    ColumnSpec(name='id', type=INT32, primary_key=True, key_unique=False)
    ColumnSpec(name='v', type=STRING)
  ]
  primary_key=['id']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['id'], buckets=2)])
  key_unique=False
)

-- statement a composite non-unique key
CREATE TABLE nu (a INT, b STRING, c FLOAT, NON UNIQUE PRIMARY KEY (a, b)) PARTITION BY HASH (a) PARTITIONS 3
-- expect
CreateTable(
  table=nu
  columns=[
    ColumnSpec(name='a', type=INT32)
    ColumnSpec(name='b', type=STRING)
    ColumnSpec(name='c', type=FLOAT)
  ]
  primary_key=['a', 'b']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['a'], buckets=3)])
  key_unique=False
)

-- statement a non-unique key in CTAS
CREATE TABLE nu NON UNIQUE PRIMARY KEY (id) PARTITION BY HASH (id) PARTITIONS 3 AS SELECT * FROM t
-- expect
CreateTable(
  table=nu
  primary_key=['id']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['id'], buckets=3)])
  as_select=`SELECT * FROM t`
  key_unique=False
)

-- statement partition columns promoted to a non-unique key
CREATE TABLE p (a INT, b STRING, c FLOAT) PARTITION BY HASH (a, b) PARTITIONS 3
-- expect
CreateTable(
  table=p
  columns=[
    ColumnSpec(name='a', type=INT32)
    ColumnSpec(name='b', type=STRING)
    ColumnSpec(name='c', type=FLOAT)
  ]
  primary_key=['a', 'b']
  partitioning=PartitionSpec(hash=[HashSpec(columns=['a', 'b'], buckets=3)])
  warnings=['Partition columns (a, b) are promoted as non unique primary key.']
  key_unique=False
)

-- statement partition columns that are not the leading columns
CREATE TABLE p (a INT, b STRING, c FLOAT) PARTITION BY HASH (b, c) PARTITIONS 3
-- error
error at line 1, column 62: Specify primary key or non unique primary key for the Kudu table, or create partitions with the beginning columns of the table.
  CREATE TABLE p (a INT, b STRING, c FLOAT) PARTITION BY HASH (b, c) PARTITIONS 3
                                                               ^

-- statement NON without UNIQUE
CREATE TABLE p (a INT NON PRIMARY KEY)
-- error
syntax error at line 1, column 23: Expected , or ) after a column definition
  CREATE TABLE p (a INT NON PRIMARY KEY)
                        ^

-- statement NON UNIQUE without PRIMARY KEY
CREATE TABLE p (a INT NON UNIQUE)
-- error
syntax error at line 1, column 33: Expected PRIMARY KEY after NON UNIQUE
  CREATE TABLE p (a INT NON UNIQUE)
                                  ^

-- statement the reserved column name
CREATE TABLE p (a INT PRIMARY KEY, auto_incrementing_id BIGINT)
-- error
error at line 1, column 14: CREATE TABLE p: column name 'auto_incrementing_id' is reserved by Kudu (the auto-incrementing column of a non-unique primary key)
  CREATE TABLE p (a INT PRIMARY KEY, auto_incrementing_id BIGINT)
               ^

-- statement a range's schema with another number of hash levels
CREATE TABLE p (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES < 10 HASH (a) PARTITIONS 2)
-- error
error at line 1, column 56: CREATE TABLE p: range partition VALUES < 10: its hash schema has 1 dimension(s) but the table's has 0; a varying number of hash dimensions per range is not supported (as in Kudu)
  CREATE TABLE p (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES < 10 HASH (a) PARTITIONS 2)
                                                         ^
