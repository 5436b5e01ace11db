-- ALTER TABLE and the maintenance statements.

-- statement
ALTER TABLE t ADD RANGE PARTITION 10 <= VALUES < 20
-- expect
AlterTable(table=t, steps=[AddRangePartition(bounds=RangeBounds(lower=[10], upper=[20]))])

-- statement
ALTER TABLE db.t ADD IF NOT EXISTS RANGE PARTITION VALUE = 5
-- expect
AlterTable(
  table=db.t
  steps=[
    AddRangePartition(
      bounds=RangeBounds(lower=[5], upper=[5], upper_inclusive=True)
      if_not_exists=True
    )
  ]
)

-- statement
ALTER TABLE t ADD RANGE PARTITION VALUES < 0
-- expect
AlterTable(table=t, steps=[AddRangePartition(bounds=RangeBounds(upper=[0]))])

-- statement
ALTER TABLE t DROP RANGE PARTITION 100 <= VALUES
-- expect
AlterTable(table=t, steps=[DropRangePartition(bounds=RangeBounds(lower=[100]))])

-- statement
ALTER TABLE t DROP IF EXISTS RANGE PARTITION ('a', 1) <= VALUES < ('b', 2)
-- expect
AlterTable(
  table=t
  steps=[DropRangePartition(bounds=RangeBounds(lower=['a', 1], upper=['b', 2]), if_exists=True)]
)

-- statement
ALTER TABLE t ADD COLUMNS (c INT, d STRING NOT NULL DEFAULT 'x' COMMENT 'dee')
-- expect
AlterTable(
  table=t
  steps=[
    AddColumn(column=ColumnSchema(name='c', type=INT32))
    AddColumn(
      column=ColumnSchema(name='d', type=STRING, nullable=False, default='x', comment='dee')
    )
  ]
)

-- statement
ALTER TABLE t ADD IF NOT EXISTS COLUMNS (c INT)
-- expect
AlterTable(
  table=t
  steps=[AddColumn(column=ColumnSchema(name='c', type=INT32), if_not_exists=True)]
)

-- statement
ALTER TABLE t ADD COLUMN e DATE DEFAULT '2024-01-01'
-- expect
AlterTable(
  table=t
  steps=[AddColumn(column=ColumnSchema(name='e', type=DATE, default=datetime.date(2024, 1, 1)))]
)

-- statement
ALTER TABLE t DROP COLUMN c
-- expect
AlterTable(table=t, steps=[DropColumn(name='c')])

-- statement
ALTER TABLE t DROP c
-- expect
AlterTable(table=t, steps=[DropColumn(name='c')])

-- statement
ALTER TABLE t CHANGE COLUMN c c2 INT
-- expect
AlterTable(table=t, steps=[ChangeColumn(old='c', column=ColumnSpec(name='c2', type=INT32))])

-- statement
ALTER TABLE t CHANGE c c2 INT DEFAULT 4 COMMENT 'renamed' COMPRESSION ZSTD
-- expect
AlterTable(
  table=t
  steps=[
    ChangeColumn(
      old='c'
      column=ColumnSpec(name='c2', type=INT32, default=4, compression='ZSTD', comment='renamed')
    )
  ]
)

-- statement
ALTER TABLE t RENAME TO t2
-- expect
AlterTable(table=t, steps=[RenameTo(table=t2)])

-- statement
ALTER TABLE t RENAME TO db2.t2
-- expect
AlterTable(table=t, steps=[RenameTo(table=db2.t2)])

-- statement
ALTER TABLE t ALTER COLUMN c SET DEFAULT 10
-- expect
AlterTable(table=t, steps=[AlterColumn(name='c', changes={'default': 10})])

-- statement
ALTER TABLE t ALTER c SET DEFAULT 'text'
-- expect
AlterTable(table=t, steps=[AlterColumn(name='c', changes={'default': 'text'})])

-- statement
ALTER TABLE t ALTER c DROP DEFAULT
-- expect
AlterTable(table=t, steps=[AlterColumn(name='c', changes={'default': None})])

-- statement
ALTER TABLE t ALTER COLUMN c SET COMMENT 'hello'
-- expect
AlterTable(table=t, steps=[AlterColumn(name='c', changes={'comment': 'hello'})])

-- statement
ALTER TABLE t ALTER c SET ENCODING RLE
-- expect
AlterTable(table=t, steps=[AlterColumn(name='c', changes={'encoding': 'RLE'})])

-- statement
ALTER TABLE t ALTER c SET COMPRESSION zstd
-- expect
AlterTable(table=t, steps=[AlterColumn(name='c', changes={'compression': 'ZSTD'})])

-- statement
ALTER TABLE t ALTER c SET BLOCK_SIZE 4096
-- expect
AlterTable(table=t, steps=[AlterColumn(name='c', changes={'block_size': 4096})])

-- statement
ALTER TABLE t SET TBLPROPERTIES ('history_max_age_s' = '60', 'owner' = 'me')
-- expect
AlterTable(
  table=t
  steps=[SetProperties(properties={'history_max_age_s': '60', 'owner': 'me'})]
)

-- statement
ALTER TABLE t UNSET TBLPROPERTIES ('owner')
-- expect
AlterTable(table=t, steps=[SetProperties(properties={'owner': None})])

-- statement several actions in one ALTER (applied atomically)
ALTER TABLE t ADD RANGE PARTITION 20 <= VALUES < 30, DROP RANGE PARTITION VALUES < 0, DROP COLUMN z
-- expect
AlterTable(
  table=t
  steps=[
    AddRangePartition(bounds=RangeBounds(lower=[20], upper=[30]))
    DropRangePartition(bounds=RangeBounds(upper=[0]))
    DropColumn(name='z')
  ]
)

-- statement maintenance
ALTER TABLE t EXECUTE FLUSH
-- expect
MaintainTable(table=t, action='FLUSH')

-- statement
ALTER TABLE db.t EXECUTE COMPACT
-- expect
MaintainTable(table=db.t, action='COMPACT')

-- statement
ALTER TABLE t EXECUTE GC
-- expect
MaintainTable(table=t, action='GC')

-- statement
ALTER TABLE t EXECUTE MAINTENANCE
-- expect
MaintainTable(table=t, action='MAINTENANCE')

-- statement
FLUSH TABLE t
-- expect
MaintainTable(table=t, action='FLUSH')

-- statement
COMPACT TABLE db.t
-- expect
MaintainTable(table=db.t, action='COMPACT')

-- statement
ALTER TABLE t EXECUTE VACUUM
-- error
syntax error at line 1, column 23: Expected one of FLUSH, COMPACT, GC, MAINTENANCE after EXECUTE
  ALTER TABLE t EXECUTE VACUUM
                        ^

-- statement
FLUSH t
-- error
syntax error at line 1, column 7: Expected TABLE after FLUSH
  FLUSH t
        ^

-- statement
ALTER TABLE t
-- error
syntax error at line 1, column 14: Expected an ALTER TABLE action: ADD, DROP, CHANGE, RENAME TO, ALTER COLUMN, SET TBLPROPERTIES, UNSET TBLPROPERTIES, SET OWNER or EXECUTE (the statement ended early)
  ALTER TABLE t
               ^

-- statement
ALTER TABLE t ADD PRIMARY KEY (a)
-- error
syntax error at line 1, column 19: Expected RANGE PARTITION, COLUMNS or COLUMN after ADD
  ALTER TABLE t ADD PRIMARY KEY (a)
                    ^

-- statement
ALTER TABLE t ADD COLUMNS (k INT PRIMARY KEY)
-- error
error at line 1, column 28: ALTER TABLE cannot add a primary key column
  ALTER TABLE t ADD COLUMNS (k INT PRIMARY KEY)
                             ^

-- statement
ALTER TABLE t DROP IF EXISTS COLUMN c
-- error
syntax error at line 1, column 30: Expected RANGE PARTITION after DROP IF EXISTS
  ALTER TABLE t DROP IF EXISTS COLUMN c
                               ^

-- statement
ALTER TABLE t CHANGE c c2 INT NOT NULL
-- error
error at line 1, column 24: CHANGE COLUMN cannot change PRIMARY KEY or NULL / NOT NULL
  ALTER TABLE t CHANGE c c2 INT NOT NULL
                         ^

-- statement
ALTER TABLE t ALTER c SET DEFAULT NULL
-- expect
AlterTable(table=t, steps=[NullDefault(column='c')])

-- statement
ALTER TABLE t ALTER c SET NULLABLE true
-- error
syntax error at line 1, column 27: Expected one of ENCODING, COMPRESSION, BLOCK_SIZE, COMMENT, DEFAULT after SET
  ALTER TABLE t ALTER c SET NULLABLE true
                            ^

-- statement
ALTER TABLE t REPLACE COLUMNS (a INT)
-- error
syntax error at line 1, column 15: Expected an ALTER TABLE action: ADD, DROP, CHANGE, RENAME TO, ALTER COLUMN, SET TBLPROPERTIES, UNSET TBLPROPERTIES, SET OWNER or EXECUTE
  ALTER TABLE t REPLACE COLUMNS (a INT)
                ^

-- statement
ALTER VIEW v AS SELECT 1
-- error
syntax error at line 1, column 7: Expected TABLE after ALTER
  ALTER VIEW v AS SELECT 1
        ^

-- statement
ALTER TABLE t ADD RANGE PARTITION VALUES < now()
-- error
error at line 1, column 44: range bound: only constant values are allowed, not now() (its value is not fixed)
  ALTER TABLE t ADD RANGE PARTITION VALUES < now()
                                             ^

-- statement several options in one ALTER COLUMN SET
ALTER TABLE t ALTER COLUMN c SET ENCODING rle COMPRESSION snappy BLOCK_SIZE 100 COMMENT 'x' DEFAULT 1 + 1
-- expect
AlterTable(
  table=t
  steps=[
    AlterColumn(
      name='c'
      changes={'encoding': 'RLE', 'compression': 'SNAPPY', 'block_size': 100, 'comment': 'x', 'default': 2}
    )
  ]
)
