-- Scripts: several statements split on ; outside strings and comments.

-- statement
CREATE DATABASE d; USE d; SELECT 1;
-- expect
CreateDatabase(name='d')
UseDatabase(name='d')
Query(ast=`SELECT 1`)

-- statement semicolons inside strings, comments and quoted names do not split
INSERT INTO t VALUES ('a;b'); -- a comment; still a comment
SELECT `we;ird`, "str;ing" FROM t /* ; */ WHERE s = ';'
-- expect
Insert(table=t, columns=None, source=`VALUES ('a;b')`, ast=`INSERT INTO t VALUES ('a;b')`)
Query(ast=`SELECT `we;ird`, 'str;ing' FROM t /* ; */ WHERE s = ';'`)

-- statement empty statements are skipped
;;SHOW TABLES;;
-- expect
ShowTables()

-- statement only comments
-- nothing here
/* nor here */
-- expect

-- statement an error in the second line of a script points there
SELECT 1;
SELECT * FROM t WHERE a = = 1;
-- error
syntax error at line 2, column 27: Incomplete expression: expected an expression
  SELECT * FROM t WHERE a = = 1;
                            ^

-- statement an error in the third statement
CREATE DATABASE d;
USE d;
CREATE TABLE t (a INT);
-- error
error at line 3, column 14: table t needs a primary key: add PRIMARY KEY to a column or PRIMARY KEY (col, ...) to the definition
  CREATE TABLE t (a INT);
               ^

-- statement unterminated comment
SELECT 1 /* never closed
-- error
syntax error at line 1, column 25: the SQL text ends inside a comment, string or quoted name
  SELECT 1 /* never closed
                          ^

-- statement tabs before the error
	SELECT	*	FROM	t	WHERE	)
-- error
syntax error at line 1, column 23: Incomplete WHERE clause: expected an expression
  SELECT * FROM t WHERE )
                        ^
