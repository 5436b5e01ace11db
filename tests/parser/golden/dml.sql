-- INSERT, INSERT IGNORE, UPSERT, UPDATE and DELETE.

-- statement
INSERT INTO t VALUES (1, 'a'), (2, 'b')
-- expect
Insert(
  table=t
  columns=None
  source=`VALUES (1, 'a'), (2, 'b')`
  ast=`INSERT INTO t VALUES (1, 'a'), (2, 'b')`
)

-- statement
INSERT INTO db.t (id, name) VALUES (1, 'a')
-- expect
Insert(
  table=db.t
  columns=['id', 'name']
  source=`VALUES (1, 'a')`
  ast=`INSERT INTO db.t (id, name) VALUES (1, 'a')`
)

-- statement INTO is optional, TABLE is allowed
INSERT t VALUES (1)
-- expect
Insert(table=t, columns=None, source=`VALUES (1)`, ast=`INSERT INTO t VALUES (1)`)

-- statement
INSERT INTO TABLE t SELECT * FROM u
-- expect
Insert(table=t, columns=None, source=`SELECT * FROM u`, ast=`INSERT INTO t SELECT * FROM u`)

-- statement
INSERT INTO t (a, b) SELECT x, y FROM u WHERE x > 1 ORDER BY x LIMIT 10
-- expect
Insert(
  table=t
  columns=['a', 'b']
  source=`SELECT x, y FROM u WHERE x > 1 ORDER BY x LIMIT 10`
  ast=`INSERT INTO t (a, b) SELECT x, y FROM u WHERE x > 1 ORDER BY x LIMIT 10`
)

-- statement
INSERT IGNORE INTO t VALUES (1, 'dup')
-- expect
Insert(
  table=t
  columns=None
  source=`VALUES (1, 'dup')`
  ignore=True
  ast=`INSERT IGNORE INTO t VALUES (1, 'dup')`
)

-- statement
INSERT INTO t WITH x AS (SELECT 1 AS a) SELECT a FROM x
-- expect
Insert(
  table=t
  columns=None
  source=`WITH x AS (SELECT 1 AS a) SELECT a FROM x`
  ast=`INSERT INTO t WITH x AS (SELECT 1 AS a) SELECT a FROM x`
)

-- statement placeholders for DB-API parameters
INSERT INTO t VALUES (?, ?)
-- expect
Insert(table=t, columns=None, source=`VALUES (?, ?)`, ast=`INSERT INTO t VALUES (?, ?)`)

-- statement
UPSERT INTO t VALUES (1, 'a')
-- expect
Upsert(table=t, columns=None, source=`VALUES (1, 'a')`, ast=`UPSERT INTO t VALUES (1, 'a')`)

-- statement
UPSERT INTO db.t (id, v) SELECT id, v + 1 FROM t
-- expect
Upsert(
  table=db.t
  columns=['id', 'v']
  source=`SELECT id, v + 1 FROM t`
  ast=`UPSERT INTO db.t (id, v) SELECT id, v + 1 FROM t`
)

-- statement
UPSERT t (id) VALUES (3)
-- expect
Upsert(table=t, columns=['id'], source=`VALUES (3)`, ast=`UPSERT INTO t (id) VALUES (3)`)

-- statement
UPDATE t SET name = 'x' WHERE id = 1
-- expect
Update(
  table=t
  alias='t'
  assignments=[['name', `'x'`]]
  ast=`UPDATE t SET name = 'x' WHERE id = 1`
)

-- statement
UPDATE db.t SET a = a + 1, b = NULL
-- expect
Update(
  table=db.t
  alias='t'
  assignments=[['a', `a + 1`], ['b', `NULL`]]
  ast=`UPDATE db.t SET a = a + 1, b = NULL`
)

-- statement Impala's UPDATE ... FROM with a join, target named by its alias
UPDATE a SET a.v = b.v FROM t1 a JOIN t2 b ON a.id = b.id WHERE b.v > 0
-- expect
Update(
  table=t1
  alias='a'
  assignments=[['v', `b.v`]]
  ast=`UPDATE a SET a.v = b.v FROM t1 AS a JOIN t2 AS b ON a.id = b.id WHERE b.v > 0`
)

-- statement the target is a name or alias of the FROM clause (Impala), never joined in again
UPDATE t SET v = u.v FROM u WHERE t.id = u.id
-- error
error at line 1, column 8: UPDATE ... FROM: 't' is not a table name or alias of its FROM clause; name the table to change as the FROM clause names it (UPDATE x SET ... FROM t AS x JOIN ...)
  UPDATE t SET v = u.v FROM u WHERE t.id = u.id
         ^

-- statement a table FROM calls by an alias is known only by that alias
UPDATE a SET v = b.v FROM a AS x JOIN b ON b.k = x.k WHERE x.k = 1
-- error
error at line 1, column 8: UPDATE ... FROM: 'a' is not a table name or alias of its FROM clause; name the table to change as the FROM clause names it (UPDATE x SET ... FROM t AS x JOIN ...)
  UPDATE a SET v = b.v FROM a AS x JOIN b ON b.k = x.k WHERE x.k = 1
         ^

-- statement
UPDATE a AS y SET v = 1 FROM a AS y
-- error
error at line 1, column 8: UPDATE ... FROM names its target as its FROM clause does: the alias belongs in the FROM clause
  UPDATE a AS y SET v = 1 FROM a AS y
         ^

-- statement
UPDATE x SET v = b.v FROM a AS x JOIN b ON b.k = x.k
-- expect
Update(
  table=a
  alias='x'
  assignments=[['v', `b.v`]]
  ast=`UPDATE x SET v = b.v FROM a AS x JOIN b ON b.k = x.k`
)

-- statement
UPDATE db.t SET v = 1 FROM db.t JOIN u ON t.id = u.id
-- expect
Update(
  table=db.t
  alias='t'
  assignments=[['v', `1`]]
  ast=`UPDATE db.t SET v = 1 FROM db.t JOIN u ON t.id = u.id`
)

-- statement
UPDATE t SET v = 1 FROM t JOIN db.t ON true
-- error
error at line 1, column 8: UPDATE ... FROM: 't' names more than one table of its FROM clause; give them aliases and name the target by its alias
  UPDATE t SET v = 1 FROM t JOIN db.t ON true
         ^

-- statement
DELETE a FROM a AS x JOIN b ON b.k = x.k
-- error
error at line 1, column 8: DELETE ... FROM: 'a' is not a table name or alias of its FROM clause; name the table to change as the FROM clause names it (DELETE x FROM t AS x JOIN ...)
  DELETE a FROM a AS x JOIN b ON b.k = x.k
         ^

-- statement
UPDATE t SET v = (SELECT max(v) FROM u) WHERE id IN (SELECT id FROM u)
-- expect
Update(
  table=t
  alias='t'
  assignments=[['v', `(SELECT MAX(v) FROM u)`]]
  ast=`UPDATE t SET v = (SELECT MAX(v) FROM u) WHERE id IN (SELECT id FROM u)`
)

-- statement
DELETE FROM t WHERE id = 1
-- expect
Delete(table=t, alias='t', ast=`DELETE FROM t WHERE id = 1`)

-- statement FROM is optional
DELETE t WHERE id > 5
-- expect
Delete(table=t, alias='t', ast=`DELETE FROM t WHERE id > 5`)

-- statement
DELETE FROM db.t
-- expect
Delete(table=db.t, alias='t', ast=`DELETE FROM db.t`)

-- statement
DELETE FROM t WHERE id IN (SELECT id FROM u WHERE u.gone)
-- expect
Delete(table=t, alias='t', ast=`DELETE FROM t WHERE id IN (SELECT id FROM u WHERE u.gone)`)

-- statement Impala's DELETE with a join
DELETE t1 FROM t1 JOIN t2 ON t1.id = t2.id WHERE t2.flag
-- expect
Delete(table=t1, alias='t1', ast=`DELETE t1 FROM t1 JOIN t2 ON t1.id = t2.id WHERE t2.flag`)

-- statement
DELETE a FROM t1 a JOIN t2 b ON a.id = b.id
-- expect
Delete(table=t1, alias='a', ast=`DELETE a FROM t1 AS a JOIN t2 AS b ON a.id = b.id`)

-- statement
INSERT OVERWRITE t VALUES (1)
-- error
error at line 1, column 18: INSERT with OVERWRITE is not supported
  INSERT OVERWRITE t VALUES (1)
                   ^

-- statement
INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING
-- error
error at line 1, column 13: INSERT with CONFLICT is not supported
  INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING
              ^

-- statement
INSERT INTO t VALUES (1) RETURNING *
-- error
error at line 1, column 13: INSERT with RETURNING is not supported
  INSERT INTO t VALUES (1) RETURNING *
              ^

-- statement
INSERT INTO t DEFAULT VALUES
-- error
error at line 1, column 13: INSERT needs VALUES (...) or a query
  INSERT INTO t DEFAULT VALUES
              ^

-- statement
UPSERT IGNORE INTO t VALUES (1)
-- error
syntax error at line 1, column 8: UPSERT IGNORE is not valid
  UPSERT IGNORE INTO t VALUES (1)
         ^

-- statement
UPDATE t SET WHERE a = 1
-- error
error at line 1, column 8: UPDATE needs SET column = value
  UPDATE t SET WHERE a = 1
         ^

-- statement
UPDATE t SET u.a = 1
-- error
error at line 1, column 16: SET can only assign columns of 't'
  UPDATE t SET u.a = 1
                 ^

-- statement
DELETE FROM t RETURNING id
-- error
error at line 1, column 13: DELETE with RETURNING is not supported
  DELETE FROM t RETURNING id
              ^

-- statement
DELETE t1, t2 FROM t1 JOIN t2 ON t1.id = t2.id
-- error
error at line 1, column 12: DELETE removes rows of one table at a time
  DELETE t1, t2 FROM t1 JOIN t2 ON t1.id = t2.id
             ^

-- statement
MERGE INTO t USING u ON t.id = u.id WHEN MATCHED THEN DELETE
-- error
syntax error at line 1, column 1: Unsupported statement 'MERGE'
  MERGE INTO t USING u ON t.id = u.id WHEN MATCHED THEN DELETE
  ^

-- statement
TRUNCATE TABLE t
-- error
syntax error at line 1, column 1: Unsupported statement 'TRUNCATE'
  TRUNCATE TABLE t
  ^
