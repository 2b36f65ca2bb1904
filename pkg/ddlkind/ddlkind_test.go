package ddlkind

import "testing"

func TestSkipped(t *testing.T) {
	cases := []struct {
		sql  string
		want Kind // "" = not skipped
	}{
		{"CREATE DEFINER=`root`@`localhost` TRIGGER t_ai AFTER INSERT ON t FOR EACH ROW INSERT INTO log VALUES (NEW.id)", Trigger},
		{"CREATE DEFINER=`root`@`localhost` TRIGGER `pt_osc_od_t_del` AFTER DELETE ON `od`.`t` FOR EACH ROW DELETE IGNORE FROM `od`.`_t_new` WHERE `id` = OLD.`id`", Trigger},
		{"create or replace definer = 'app'@'%' trigger if not exists x before update on t for each row set new.v = 1", Trigger},
		{"CREATE DEFINER = CURRENT_USER() TRIGGER x BEFORE UPDATE ON t FOR EACH ROW SET NEW.v = 1", Trigger},
		{"CREATE TRIGGER x BEFORE UPDATE ON t FOR EACH ROW SET NEW.v = 1", Trigger},
		{"DROP TRIGGER IF EXISTS db.x", Trigger},
		{"/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW SET NEW.v = 2 */", Trigger},
		{"  -- a comment\n/* another */ CREATE TRIGGER x AFTER DELETE ON t FOR EACH ROW DELETE FROM u", Trigger},
		{"CREATE DEFINER=`root`@`localhost` PROCEDURE `p`(IN a INT)\nBEGIN\n  UPDATE t SET v = a;\nEND", Procedure},
		{"ALTER PROCEDURE p COMMENT 'x'", Procedure},
		{"DROP PROCEDURE IF EXISTS p", Procedure},
		{"CREATE DEFINER=`root`@`localhost` FUNCTION `f`(a INT) RETURNS int(11) DETERMINISTIC RETURN a + 1", Function},
		{"CREATE AGGREGATE FUNCTION IF NOT EXISTS agg RETURNS INTEGER SONAME 'x.so'", Function},
		{"CREATE OR REPLACE FUNCTION f() RETURNS INT RETURN 1", Function},
		{"drop function if exists f", Function},
		{"CREATE DEFINER=`root`@`localhost` EVENT `e` ON SCHEDULE EVERY 1 HOUR DO DELETE FROM t", Event},
		{"ALTER DEFINER=`root`@`localhost` EVENT `e` DISABLE", Event},
		{"ALTER EVENT e DISABLE", Event},
		{"DROP EVENT IF EXISTS e", Event},
		{"CREATE OR REPLACE PACKAGE pkg AS FUNCTION f RETURN INT; END", Package},
		{"CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `v` AS select 1 AS `1`", View},
		{"CREATE OR REPLACE VIEW v AS SELECT 1", View},
		{"ALTER ALGORITHM=MERGE VIEW v AS SELECT 2", View},
		{"DROP VIEW IF EXISTS v", View},
		{"GRANT SELECT ON db.* TO 'u'@'%'", Account},
		{"CREATE USER 'u'@'%' IDENTIFIED VIA unix_socket", Account},
		{"CREATE OR REPLACE ROLE r", Account},
		{"SET PASSWORD FOR 'u'@'%' = PASSWORD('x')", Account},
		{"CREATE TABLESPACE ts ADD DATAFILE 'ts.ibd'", Tablespace},
		{"CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (HOST '127.0.0.1')", Server},
		{"INSTALL SONAME 'ha_blackhole'", Plugin},
		{"OPTIMIZE TABLE t", Maintenance},
		{"ANALYZE NO_WRITE_TO_BINLOG TABLE t", Maintenance},
		{"FLUSH PRIVILEGES", Maintenance},
		{"DROP TEMPORARY TABLE IF EXISTS `tmp`", Temporary},
		{"SAVEPOINT sp1", Session},

		// Statements that are replicated.
		{"CREATE TABLE trigger_log (id INT PRIMARY KEY)", ""},
		{"CREATE TABLE `view` (id INT)", ""},
		{"ALTER TABLE t ADD COLUMN event INT", ""},
		{"DROP TABLE t", ""},
		{"DROP TABLE triggers", ""},
		{"CREATE DATABASE functions", ""},
		{"RENAME TABLE procedure_log TO p2", ""},
		{"CREATE DEFINER_x TABLE t (id INT)", ""},
		{"/* TRIGGER */ CREATE TABLE t (id INT)", ""},
		{"CREATE INDEX trigger_idx ON t (a)", ""},
		{"TRUNCATE TABLE t", ""},
	}
	for _, c := range cases {
		got, ok := Skipped(c.sql)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("Skipped(%q) = %q, %v; want %q", c.sql, got, ok, c.want)
		}
	}
}

func TestStored(t *testing.T) {
	for k, want := range map[Kind]bool{Trigger: true, Procedure: true, Function: true, Event: true, Package: true,
		View: false, Account: false, Maintenance: false} {
		if k.Stored() != want {
			t.Errorf("%s.Stored() = %v, want %v", k, !want, want)
		}
	}
}

func FuzzSkipped(f *testing.F) {
	for _, s := range []string{"CREATE TRIGGER x", "/*!50003 CREATE*/", "-- \n", "'", "`a", "/*M!100100 DROP EVENT e */"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) { Skipped(q) })
}
