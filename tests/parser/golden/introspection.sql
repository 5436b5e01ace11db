-- SHOW, DESCRIBE, COMPUTE STATS and EXPLAIN.

-- statement
SHOW TABLES
-- expect
ShowTables()

-- statement
SHOW TABLES IN sales
-- expect
ShowTables(database='sales')

-- statement
SHOW TABLES FROM sales LIKE 'ord*'
-- expect
ShowTables(database='sales', like='ord*')

-- statement
SHOW TABLES 'ord*'
-- expect
ShowTables(like='ord*')

-- statement
SHOW TABLET SERVERS
-- expect
ShowTabletServers()

-- statement
show tablet servers
-- expect
ShowTabletServers()

-- statement
SHOW CREATE TABLE db.t
-- expect
ShowCreateTable(table=db.t)

-- statement
DESCRIBE t
-- expect
Describe(table=t)

-- statement
DESC db.t
-- expect
Describe(table=db.t)

-- statement
DESCRIBE FORMATTED t
-- expect
Describe(table=t, formatted=True)

-- statement
SHOW PARTITIONS t
-- expect
ShowPartitions(table=t)

-- statement
SHOW RANGE PARTITIONS db.t
-- expect
ShowPartitions(table=db.t, range_only=True)

-- statement
SHOW TABLE STATS t
-- expect
ShowTableStats(table=t)

-- statement
SHOW COLUMN STATS t
-- expect
ShowColumnStats(table=t)

-- statement
COMPUTE STATS t
-- expect
ComputeStats(table=t)

-- statement
EXPLAIN SELECT * FROM t WHERE id = 1
-- expect
Explain(statement=Query(ast=`SELECT * FROM t WHERE id = 1`))

-- statement
EXPLAIN UPDATE t SET a = 1 WHERE id = 2
-- expect
Explain(
  statement=Update(
    table=t
    alias='t'
    assignments=[['a', `1`]]
    ast=`UPDATE t SET a = 1 WHERE id = 2`
  )
)

-- statement
EXPLAIN INSERT INTO t SELECT * FROM u
-- expect
Explain(
  statement=Insert(
    table=t
    columns=None
    source=`SELECT * FROM u`
    ast=`INSERT INTO t SELECT * FROM u`
  )
)

-- statement
SHOW CREATE VIEW v
-- error
syntax error at line 1, column 6: Expected DATABASES, TABLES, CREATE TABLE, PARTITIONS, RANGE PARTITIONS, HASH SCHEMA, TABLE STATS, COLUMN STATS, TABLET SERVERS, SETTINGS, ALL or a setting name after SHOW
  SHOW CREATE VIEW v
       ^

-- statement
SHOW
-- error
syntax error at line 1, column 5: Expected DATABASES, TABLES, CREATE TABLE, PARTITIONS, RANGE PARTITIONS, HASH SCHEMA, TABLE STATS, COLUMN STATS, TABLET SERVERS, SETTINGS, ALL or a setting name after SHOW (the statement ended early)
  SHOW
      ^

-- statement
DESCRIBE
-- error
syntax error at line 1, column 9: Expected table name but got the end of the statement (the statement ended early)
  DESCRIBE
          ^

-- statement
COMPUTE t
-- error
syntax error at line 1, column 9: Expected STATS
  COMPUTE t
          ^

-- statement
EXPLAIN EXPLAIN SELECT 1
-- error
syntax error at line 1, column 9: EXPLAIN cannot explain EXPLAIN
  EXPLAIN EXPLAIN SELECT 1
          ^

-- statement
EXPLAIN
-- error
syntax error at line 1, column 8: Expected a statement after EXPLAIN (the statement ended early)
  EXPLAIN
         ^
