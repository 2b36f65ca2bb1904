-- One round of changes after the task started, in the spirit of DM's
-- foreign_key increment (its three statements come first). The caller sets
-- @b, a base no earlier round used, and @p, a row key of t3, t9, t12 and t13
-- that exists from before the round (5 first, then the last round's @b + 5).
USE foreign_key;
SET foreign_key_checks = 1;

-- DM's increment: the cascade the outside check found missing on the target.
INSERT INTO t1 VALUES (@b + 7), (@b + 8);
INSERT INTO t2 VALUES (@b + 7), (@b + 8);
DELETE FROM t1 WHERE id = @b + 7;
-- A cascading update in the transaction that inserted the rows.
BEGIN;
INSERT INTO t1 VALUES (@b + 9), (@b + 5);
INSERT INTO t2 VALUES (@b + 9), (@b + 5);
UPDATE t1 SET id = id + 500 WHERE id = @b + 9;
COMMIT;

-- SET NULL, on this round's parents and on an older one: a child inserted
-- for a parent that an event after it deletes.
INSERT INTO t3 VALUES (@b + 1), (@b + 2), (@b + 5);
INSERT INTO t4 VALUES (@b + 1, @b + 1), (@b + 2, @b + 2), (@b + 3, @b + 1), (@b + 4, @p), (@b + 5, @b + 5);
DELETE FROM t3 WHERE id = @b + 1;
UPDATE t3 SET id = @b + 600 WHERE id = @b + 2;
DELETE FROM t3 WHERE id = @p;

-- RESTRICT: the child goes first; with the checks off the parent goes alone.
INSERT INTO t5 VALUES (@b + 1), (@b + 2);
INSERT INTO t6 VALUES (@b + 1), (@b + 2);
DELETE FROM t6 WHERE id = @b + 1;
DELETE FROM t5 WHERE id = @b + 1;
SET foreign_key_checks = 0;
DELETE FROM t5 WHERE id = @b + 2;
SET foreign_key_checks = 1;

-- Three levels of one table, deleted by their root; and a subtree hung
-- under an older boss, deleted with it.
INSERT INTO t9 VALUES (@b + 1, 'boss', NULL), (@b + 10, 'l1', @b + 1), (@b + 11, 'l1', @b + 1),
  (@b + 100, 'l2', @b + 10), (@b + 101, 'l2', @b + 11), (@b + 1000, 'l3', @b + 100);
INSERT INTO t9 VALUES (@b + 20, 'l1_old', @p), (@b + 200, 'l2_old', @b + 20);
DELETE FROM t9 WHERE id = @b + 1;
DELETE FROM t9 WHERE id = @p;
INSERT INTO t9 VALUES (@b + 5, 'boss', NULL), (@b + 50, 'l1', @b + 5);

-- The key added by ALTER: a cascading update, then a cascading delete.
INSERT INTO t10 VALUES (@b + 1, 0), (@b + 2, 0);
INSERT INTO t11 VALUES (@b + 1, @b + 1), (@b + 2, @b + 2);
UPDATE t10 SET id = @b + 5 WHERE id = @b + 1;
DELETE FROM t10 WHERE id = @b + 5;

-- The chain: a grandparent's delete and update, and a grandchild of an
-- older grandparent, which is deleted after it.
INSERT INTO t12 VALUES (@b + 1), (@b + 2), (@b + 5);
INSERT INTO t13 VALUES (@b + 1, @b + 1), (@b + 2, @b + 2), (@b + 5, @b + 5);
INSERT INTO t14 VALUES (@b + 1, @b + 1), (@b + 2, @b + 2), (@b + 3, @b + 1), (@b + 4, @p), (@b + 5, @b + 5);
DELETE FROM t12 WHERE id = @b + 1;
UPDATE t12 SET id = @b + 50 WHERE id = @b + 2;
DELETE FROM t12 WHERE id = @p;
