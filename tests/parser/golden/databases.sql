-- Databases, sessions and settings.

-- statement
CREATE DATABASE sales
-- expect
CreateDatabase(name='sales')

-- statement
create database if not exists Sales comment 'the sales team'
-- expect
CreateDatabase(name='sales', if_not_exists=True, comment='the sales team')

-- statement
CREATE SCHEMA s2
-- expect
CreateDatabase(name='s2')

-- statement
DROP DATABASE sales
-- expect
DropDatabase(name='sales')

-- statement
DROP DATABASE IF EXISTS sales CASCADE
-- expect
DropDatabase(name='sales', if_exists=True, cascade=True)

-- statement
DROP SCHEMA sales RESTRICT
-- expect
DropDatabase(name='sales')

-- statement
USE sales
-- expect
UseDatabase(name='sales')

-- statement quoted names fold to lower case too (Impala)
USE `Sales`
-- expect
UseDatabase(name='sales')

-- statement
SHOW DATABASES
-- expect
ShowDatabases()

-- statement
SHOW SCHEMAS LIKE 'sa*'
-- expect
ShowDatabases(like='sa*')

-- statement
SET abort_on_error = true
-- expect
SetOption(name='abort_on_error', value=True)

-- statement
SET flush_threshold_mb = 64
-- expect
SetOption(name='flush_threshold_mb', value=64)

-- statement
SET history_max_age_s TO 3600
-- expect
SetOption(name='history_max_age_s', value=3600)

-- statement
SET wal_fsync = 'batch'
-- expect
SetOption(name='wal_fsync', value='batch')

-- statement bare words are strings
SET wal_fsync = always
-- expect
SetOption(name='wal_fsync', value='always')

-- statement
SET timeout = -5
-- expect
SetOption(name='timeout', value=-5)

-- statement
SET ratio = 0.25
-- expect
SetOption(name='ratio', value=Decimal('0.25'))

-- statement
SHOW SETTINGS
-- expect
ShowSettings()

-- statement
SHOW ALL
-- expect
ShowSettings()

-- statement
SHOW ALL SETTINGS
-- expect
ShowSettings()

-- statement
SET
-- expect
ShowSettings()

-- statement
SET ALL
-- expect
ShowSettings()

-- statement
SHOW abort_on_error
-- expect
ShowSettings(name='abort_on_error')

-- statement
CREATE DATABASE
-- error
syntax error at line 1, column 16: Expected a database name (the statement ended early)
  CREATE DATABASE
                 ^

-- statement
DROP DATABASE IF sales
-- error
syntax error at line 1, column 18: Unexpected 'sales': expected the end of the statement here
  DROP DATABASE IF sales
                   ^

-- statement
USE
-- error
syntax error at line 1, column 4: Expected a database name (the statement ended early)
  USE
     ^

-- statement
SET x =
-- error
syntax error at line 1, column 8: Expected a setting value (the statement ended early)
  SET x =
         ^
