-- Queries (DuckDB's grammar), time travel and table_changes.

-- statement
SELECT 1
-- expect
Query(ast=`SELECT 1`)

-- statement
SELECT a, count(*) AS n FROM db.t WHERE b > 1 GROUP BY a HAVING count(*) > 2 ORDER BY n DESC LIMIT 5
-- expect
Query(
  ast=`SELECT a, COUNT(*) AS n FROM db.t WHERE b > 1 GROUP BY a HAVING COUNT(*) > 2 ORDER BY n DESC LIMIT 5`
)

-- statement
WITH x AS (SELECT id FROM t) SELECT * FROM x JOIN u USING (id)
-- expect
Query(ast=`WITH x AS (SELECT id FROM t) SELECT * FROM x JOIN u USING (id)`)

-- statement
SELECT a, row_number() OVER (PARTITION BY b ORDER BY c) FROM t
-- expect
Query(ast=`SELECT a, ROW_NUMBER() OVER (PARTITION BY b ORDER BY c) FROM t`)

-- statement
SELECT a FROM t UNION ALL SELECT a FROM u EXCEPT SELECT a FROM v
-- expect
Query(ast=`SELECT a FROM t UNION ALL SELECT a FROM u EXCEPT SELECT a FROM v`)

-- statement
(SELECT 1) ORDER BY 1
-- expect
Query(ast=`(SELECT 1) ORDER BY 1`)

-- statement
VALUES (1, 'a'), (2, 'b')
-- expect
Query(ast=`SELECT * FROM (VALUES (1, 'a'), (2, 'b'))`)

-- statement casts by SQL and Kudu type names
SELECT CAST(a AS STRING), CAST(b AS INT8), CAST(c AS DECIMAL(10, 2)), TIMESTAMP '2024-01-01 00:00:00', X'0aff' FROM t
-- expect
Query(
  ast=`SELECT CAST(a AS TEXT), CAST(b AS TINYINT), CAST(c AS DECIMAL(10, 2)), TIMESTAMP '2024-01-01 00:00:00', X'0aff' FROM t`
)

-- statement time travel to a timestamp
SELECT * FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 10:00:00'
-- expect
Query(ast=`SELECT * FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 10:00:00'`)

-- statement time travel to a HybridTime, with an alias
SELECT x.a FROM db.t FOR SYSTEM_TIME AS OF 7000000000000 AS x
-- expect
Query(ast=`SELECT x.a FROM db.t FOR SYSTEM_TIME AS OF 7000000000000 AS x`)

-- statement TIMESTAMP AS OF, per table of a join
SELECT * FROM t TIMESTAMP AS OF now() - INTERVAL 1 HOUR AS old JOIN t AS cur ON old.id = cur.id
-- expect
Query(
  ast=`SELECT * FROM t FOR SYSTEM_TIME AS OF NOW() - INTERVAL '1' HOUR AS old JOIN t AS cur ON old.id = cur.id`
)

-- statement in a subquery
SELECT * FROM (SELECT * FROM t FOR SYSTEM_TIME AS OF 5) AS s
-- expect
Query(ast=`SELECT * FROM (SELECT * FROM t FOR SYSTEM_TIME AS OF 5) AS s`)

-- statement table_changes
SELECT * FROM table_changes('t', 100, 200)
-- expect
Query(ast=`SELECT * FROM table_changes('t', 100, 200)`)

-- statement table_changes until now
SELECT id, change_type FROM table_changes('db.t', TIMESTAMP '2024-01-01') WHERE is_deleted
-- expect
Query(
  ast=`SELECT id, change_type FROM table_changes('db.t', TIMESTAMP '2024-01-01') WHERE is_deleted`
)

-- statement placeholders
SELECT * FROM t WHERE id = ? AND name = $name
-- expect
Query(ast=`SELECT * FROM t WHERE id = ? AND name = $name`)

-- statement time travel with BETWEEN is refused
SELECT * FROM t FOR SYSTEM_TIME BETWEEN 1 AND 2
-- error
syntax error at line 1, column 17: time travel supports AS OF only, not BETWEEN
  SELECT * FROM t FOR SYSTEM_TIME BETWEEN 1 AND 2
                  ^

-- statement time travel by version is refused
SELECT * FROM t VERSION AS OF 3
-- error
syntax error at line 1, column 25: Unexpected 'AS': expected the end of the statement here
  SELECT * FROM t VERSION AS OF 3
                          ^

-- statement
SELECT * FROM
-- error
syntax error at line 1, column 14: Expected table name but got the end of the statement (the statement ended early)
  SELECT * FROM
               ^

-- statement
SELECT a FROM t WHERE
-- error
syntax error at line 1, column 22: WHERE is incomplete (the statement ended early)
  SELECT a FROM t WHERE
                       ^

-- statement
SELECT (1
-- error
syntax error at line 1, column 10: Expecting ) (the statement ended early)
  SELECT (1
           ^

-- statement
SELECT 'unterminated
-- error
syntax error at line 1, column 8: unterminated literal or identifier (missing ')
  SELECT 'unterminated
         ^

-- statement misspelled keyword
SELCT 1
-- error
syntax error at line 1, column 1: Unsupported statement 'SELCT'
  SELCT 1
  ^

-- statement
SELECT * FORM t
-- error
syntax error at line 1, column 15: Unexpected 't': expected the end of the statement here
  SELECT * FORM t
                ^

-- statement sized string casts keep their type names (DuckDB would print TEXT for both)
SELECT CAST(v AS VARCHAR(3)), TRY_CAST(v AS CHAR(2)), v::VARCHAR, CAST(v AS CHAR) FROM t
-- expect
Query(
  ast=`SELECT CAST(v AS VARCHAR(3)), TRY_CAST(v AS CHAR(2)), CAST(v AS VARCHAR), CAST(v AS CHAR) FROM t`
)
