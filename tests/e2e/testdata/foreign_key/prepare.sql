-- DM's integration case foreign_key (dm/tests/foreign_key), the same table
-- shapes written anew: cascades, SET NULL, RESTRICT, a key added by ALTER,
-- a self-referencing cascade three levels deep, and a chain of three tables.
-- Run on the source before the task starts (mode all) or after its start
-- position (mode incremental, where the DDL replicates too).
SET foreign_key_checks = 1;
CREATE DATABASE foreign_key;
USE foreign_key;

-- ON DELETE CASCADE ON UPDATE CASCADE
CREATE TABLE t1 (id INT PRIMARY KEY);
CREATE TABLE t2 (id INT PRIMARY KEY, FOREIGN KEY (id) REFERENCES t1 (id) ON DELETE CASCADE ON UPDATE CASCADE);
BEGIN;
INSERT INTO t1 VALUES (1), (2), (3), (4), (5);
INSERT INTO t2 VALUES (1), (2), (3), (4), (5);
DELETE FROM t1 WHERE id IN (1, 2);
UPDATE t1 SET id = id + 10 WHERE id = 3;
COMMIT;
-- With the checks off the source leaves t2's row 4 without its parent; so
-- must the target.
SET foreign_key_checks = 0;
DELETE FROM t1 WHERE id = 4;
SET foreign_key_checks = 1;

-- ON DELETE SET NULL ON UPDATE SET NULL
CREATE TABLE t3 (id INT PRIMARY KEY);
CREATE TABLE t4 (id INT PRIMARY KEY, b INT, FOREIGN KEY (b) REFERENCES t3 (id) ON DELETE SET NULL ON UPDATE SET NULL);
BEGIN;
INSERT INTO t3 VALUES (1), (2), (3), (4), (5);
INSERT INTO t4 VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5);
DELETE FROM t3 WHERE id IN (1, 2);
UPDATE t3 SET id = id + 10 WHERE id = 3;
COMMIT;

-- ON DELETE RESTRICT ON UPDATE RESTRICT, parents changed with the checks off
CREATE TABLE t5 (id INT PRIMARY KEY);
CREATE TABLE t6 (id INT PRIMARY KEY, FOREIGN KEY (id) REFERENCES t5 (id) ON DELETE RESTRICT ON UPDATE RESTRICT);
INSERT INTO t5 VALUES (1), (2), (3), (4), (5);
INSERT INTO t6 VALUES (1), (2), (3), (4), (5);
SET foreign_key_checks = 0;
DELETE FROM t5 WHERE id IN (1, 2);
UPDATE t5 SET id = id + 10 WHERE id = 3;
DELETE FROM t5 WHERE id = 4;
SET foreign_key_checks = 1;

-- DROP TABLE of a parent and its child in one statement
CREATE TABLE t7 (id INT PRIMARY KEY);
CREATE TABLE t8 (id INT PRIMARY KEY, FOREIGN KEY (id) REFERENCES t7 (id) ON DELETE RESTRICT ON UPDATE RESTRICT);
DROP TABLE t7, t8;

-- A self-referencing cascade: deleting the boss deletes three levels.
CREATE TABLE t9 (id INT PRIMARY KEY, name VARCHAR(10), leader INT, INDEX (leader),
  FOREIGN KEY (leader) REFERENCES t9 (id) ON DELETE CASCADE);
INSERT INTO t9 VALUES (1, 'boss', NULL), (10, 'l1_a', 1), (11, 'l1_b', 1), (12, 'l1_c', 1);
INSERT INTO t9 VALUES (100, 'l2_a1', 10), (101, 'l2_a2', 10), (102, 'l2_a3', 10);
INSERT INTO t9 VALUES (110, 'l2_b1', 11), (111, 'l2_b2', 11), (112, 'l2_b3', 11);
INSERT INTO t9 VALUES (120, 'l2_c1', 12), (121, 'l2_c2', 12), (122, 'l2_c3', 12);
INSERT INTO t9 VALUES (1000, 'l3_a1', 100);
DELETE FROM t9 WHERE id = 1;
INSERT INTO t9 VALUES (5, 'boss5', NULL), (50, 'l1_x', 5);

-- A key added by ALTER TABLE to tables that have rows
CREATE TABLE t10 (id INT PRIMARY KEY, b INT, INDEX (b));
CREATE TABLE t11 (id INT PRIMARY KEY, b INT);
INSERT INTO t10 VALUES (1, 1), (2, 2), (3, 3);
INSERT INTO t11 VALUES (1, 1), (2, 2), (3, 3);
ALTER TABLE t11 ADD FOREIGN KEY (b) REFERENCES t10 (id) ON DELETE CASCADE ON UPDATE CASCADE;
DELETE FROM t10 WHERE id = 1;
UPDATE t10 SET id = id + 10 WHERE id = 2;

-- A chain of three tables, each ON DELETE CASCADE ON UPDATE CASCADE: a
-- grandparent's delete reaches rows whose own key holds none of its values.
CREATE TABLE t12 (id INT PRIMARY KEY);
CREATE TABLE t13 (id INT PRIMARY KEY, a INT, FOREIGN KEY (a) REFERENCES t12 (id) ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE t14 (id INT PRIMARY KEY, b INT, FOREIGN KEY (b) REFERENCES t13 (id) ON DELETE CASCADE ON UPDATE CASCADE);
INSERT INTO t12 VALUES (1), (2), (5);
INSERT INTO t13 VALUES (1, 1), (2, 2), (5, 5);
INSERT INTO t14 VALUES (1, 1), (2, 2), (3, 1), (5, 5);
DELETE FROM t12 WHERE id = 1;
