package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/secret"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/load/loadmeta"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
	"github.com/dmworker/dm-worker/unit/validate/validmeta"
)

// startOptions are the flags of "task start" that act on the target and
// the sources before the task is written to etcd: --remove-meta drops the
// task's checkpoints in the target, --start-time sets each source's start
// location of an incremental task to the first event group at or after a
// time.
type startOptions struct {
	removeMeta bool
	startTime  string
}

// addStartFlags registers --remove-meta and --start-time on fs.
func addStartFlags(fs *flag.FlagSet) *startOptions {
	o := &startOptions{}
	fs.BoolVar(&o.removeMeta, "remove-meta", false,
		"before creating the task, delete its checkpoints and validation errors in <meta-schema> on the target (the task must not exist in etcd)")
	fs.StringVar(&o.startTime, "start-time", "",
		`incremental task: start each source at its first binlog event at or after this time ("2006-01-02 15:04:05" in the source's time zone, or RFC 3339)`)
	return o
}

// placeholderBinlog fills meta.binlog-name of the task file's instances
// while it is checked with --start-time; every subtask's meta is replaced
// with the resolved location before anything is written.
const placeholderBinlog = "start-time.000001"

// checkTaskFile is checkTaskFile of dryrun.go; with --start-time the
// instances' meta is not needed (the time gives it), so the file is checked
// with a placeholder meta in every instance, and the task must be
// incremental.
func (o *startOptions) checkTaskFile(path string) (*config.TaskConfig, []*config.SubTaskConfig, error) {
	if o.startTime == "" {
		return checkTaskFile(path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read task file: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err == nil {
		if insts, ok := doc["mysql-instances"].([]any); ok {
			for _, inst := range insts {
				if m, ok := inst.(map[string]any); ok {
					m["meta"] = map[string]any{"binlog-name": placeholderBinlog, "binlog-pos": config.MinBinlogPos}
				}
			}
			if data, err = yaml.Marshal(doc); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	tc, subs, err := checkTaskData(path, data)
	switch {
	case err != nil:
		return tc, nil, err
	case !strings.EqualFold(tc.TaskMode, config.ModeIncremental):
		return tc, nil, fmt.Errorf("--start-time applies to task-mode incremental; task %s is %s (full and all start from a dump)",
			tc.Name, tc.TaskMode)
	}
	return tc, subs, nil
}

// prepare runs after the task was checked to exist nowhere in etcd and
// before it is written: it resolves --start-time on every source (setting
// each subtask's meta), then, with --remove-meta, deletes the task's
// checkpoints in the target. Without --remove-meta, --start-time is
// refused when the target holds checkpoints of the task, since the sync
// unit resumes from them, not from the meta. It prints what it did on
// stderr.
func (o *startOptions) prepare(ctx context.Context, e *env, c *cluster, task string, subtasks []*config.SubTaskConfig) error {
	resume := o.resumers(subtasks)
	if o.startTime == "" && !o.removeMeta && len(resume) == 0 {
		return nil
	}
	key, err := e.secretKey()
	if err != nil {
		return err
	}
	if len(resume) > 0 {
		if o.removeMeta {
			return fmt.Errorf("task %s: source(s) %s have no meta and would resume from the task's checkpoints, which --remove-meta deletes: "+
				"give them a meta (binlog-name/binlog-pos or binlog-gtid) or --start-time, or leave --remove-meta out", task, strings.Join(sourcesOf(resume), ", "))
		}
		if err := checkResumable(ctx, key, task, resume); err != nil {
			return err
		}
		if o.startTime == "" && !o.removeMeta {
			return nil
		}
	}
	if o.startTime != "" {
		for _, sc := range subtasks {
			src, ok := c.sources[sc.SourceID]
			if !ok {
				return fmt.Errorf("source %s does not exist; create it first with `dmctl source create FILE`", sc.SourceID)
			}
			loc, err := resolveStartTime(ctx, src, key, o.startTime)
			if err != nil {
				return fmt.Errorf("--start-time %q on source %s: %w", o.startTime, sc.SourceID, err)
			}
			sc.Meta = config.Meta{BinlogName: loc.Name, BinlogPos: loc.Pos, BinlogGTID: loc.GTID}
			fmt.Fprintf(e.stderr, "note: task %s on source %s starts at %s", task, sc.SourceID, loc)
			if loc.GTID != "" {
				fmt.Fprintf(e.stderr, " (gtid %s)", loc.GTID)
			}
			fmt.Fprintln(e.stderr)
		}
	}
	for _, t := range targetsOf(subtasks) {
		if err := o.onTarget(ctx, e, key, task, t); err != nil {
			return err
		}
	}
	return nil
}

// resumers are the subtasks of an incremental task whose instance has no
// meta: they start from the task's checkpoints in the target. With
// --start-time every subtask gets a meta.
func (o *startOptions) resumers(subtasks []*config.SubTaskConfig) []*config.SubTaskConfig {
	if o.startTime != "" {
		return nil
	}
	return withoutMeta(subtasks)
}

// withoutMeta are the subtasks of an incremental task whose instance has
// no meta.
func withoutMeta(subtasks []*config.SubTaskConfig) []*config.SubTaskConfig {
	var out []*config.SubTaskConfig
	for _, sc := range subtasks {
		if strings.EqualFold(sc.TaskMode, config.ModeIncremental) && sc.Meta.BinlogName == "" && sc.Meta.BinlogGTID == "" {
			out = append(out, sc)
		}
	}
	return out
}

func sourcesOf(subtasks []*config.SubTaskConfig) []string {
	out := make([]string, len(subtasks))
	for i, sc := range subtasks {
		out[i] = sc.SourceID
	}
	return out
}

// checkResumable requires a sync checkpoint of the task in the target for
// every subtask without meta (one a task of the same name left: an all or
// full task records the dump's snapshot there when its load finishes).
func checkResumable(ctx context.Context, key *secret.Key, task string, subtasks []*config.SubTaskConfig) error {
	for _, t := range targetsOf(subtasks) {
		where := fmt.Sprintf("meta schema %s on target %s:%d", sqlschema.QuoteName(t.schema), t.db.Host, t.db.Port)
		tk := targetKey(&config.SubTaskConfig{TargetDatabase: t.db, MetaSchema: t.schema})
		_, db, err := openDB(ctx, t.db, key, dbconn.TargetRef(task))
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		have, err := syncmeta.TaskSources(ctx, db, t.schema, task)
		_ = db.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		var missing []string
		for _, sc := range subtasks {
			if targetKey(sc) == tk && !slices.Contains(have, sc.SourceID) {
				missing = append(missing, sc.SourceID)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("task %s: source(s) %s have no meta and %s holds no checkpoint of the task for them to resume from: "+
				"give each a meta (binlog-name/binlog-pos or binlog-gtid), or --start-time T; a full or all task of the same name "+
				"leaves such a checkpoint when its load finishes", task, strings.Join(missing, ", "), where)
		}
	}
	return nil
}

// metaTarget is one target database and meta schema of a task.
type metaTarget struct {
	db     config.DBConfig
	schema string
}

// targetKey names the target and meta schema of a subtask.
func targetKey(sc *config.SubTaskConfig) string {
	return fmt.Sprintf("%s\x00%d\x00%s\x00%s", sc.TargetDatabase.Host, sc.TargetDatabase.Port, sc.TargetDatabase.User, sc.MetaSchema)
}

// targetsOf returns the distinct targets and meta schemas of subtasks.
func targetsOf(subtasks []*config.SubTaskConfig) []metaTarget {
	var out []metaTarget
	seen := make(map[string]bool)
	for _, sc := range subtasks {
		k := targetKey(sc)
		if !seen[k] {
			seen[k] = true
			out = append(out, metaTarget{db: sc.TargetDatabase, schema: sc.MetaSchema})
		}
	}
	return out
}

// onTarget removes the task's checkpoints on one target (--remove-meta),
// or checks that there are none (--start-time alone).
func (o *startOptions) onTarget(ctx context.Context, e *env, key *secret.Key, task string, t metaTarget) error {
	where := fmt.Sprintf("meta schema %s on target %s:%d", sqlschema.QuoteName(t.schema), t.db.Host, t.db.Port)
	_, db, err := openDB(ctx, t.db, key, dbconn.TargetRef(task))
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	defer db.Close()
	if !o.removeMeta {
		sources, err := syncmeta.TaskSources(ctx, db, t.schema, task)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if len(sources) > 0 {
			return fmt.Errorf("task %s has checkpoints in %s (sources %s); the sync unit would resume from them, not from --start-time: add --remove-meta to drop them",
				task, where, strings.Join(sources, ", "))
		}
		return nil
	}
	removed, err := syncmeta.RemoveTask(ctx, db, t.schema, task)
	if err != nil {
		return fmt.Errorf("--remove-meta: %s: %w", where, err)
	}
	loads, err := loadmeta.RemoveTask(ctx, db, t.schema, task)
	if err != nil {
		return fmt.Errorf("--remove-meta: %s: %w", where, err)
	}
	removed = append(removed, loads...)
	checks, err := validmeta.RemoveTask(ctx, db, t.schema, task)
	if err != nil {
		return fmt.Errorf("--remove-meta: %s: %w", where, err)
	}
	removed = append(removed, checks...)
	if len(removed) == 0 {
		fmt.Fprintf(e.stderr, "note: --remove-meta: task %s had no checkpoints in %s\n", task, where)
	}
	for _, r := range removed {
		fmt.Fprintf(e.stderr, "note: --remove-meta: deleted %d row(s) of task %s (sources %s) from %s on target %s:%d\n",
			r.Rows, task, strings.Join(r.Sources, ", "), r.Table, t.db.Host, t.db.Port)
	}
	return nil
}

// openDB connects to a server of a config read from etcd or a file
// (password resolved with key, the key of --secret-key-path or nil; TLS
// from its security block; ref names it in errors) and returns the pool
// with the endpoint.
func openDB(ctx context.Context, c config.DBConfig, key *secret.Key, ref dbconn.Ref) (*dbconn.Endpoint, *sql.DB, error) {
	pw, err := secret.ResolvePassword(c.Password, key)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %s.password: %w", ref.Object, ref.Field, err)
	}
	stored := c.Password
	c.Password = pw
	ep, err := dbconn.NewEndpoint(c, ref)
	if err != nil {
		return nil, nil, err
	}
	db, err := ep.Open(ep.DriverConfig())
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(2)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		if key == nil && looksEncrypted(stored) {
			err = fmt.Errorf("%w (%s.password has the form of a `dmctl encrypt` ciphertext: give dmctl the --secret-key-path it was encrypted with)", err, ref.Field)
		}
		return nil, nil, fmt.Errorf("%s: connect to %s: %w", ref.Object, ep.Addr(), err)
	}
	return ep, db, nil
}

// looksEncrypted reports whether a stored password has the shape of a
// `dmctl encrypt` ciphertext: standard base64 of at least a 12-byte nonce
// and a 16-byte tag.
func looksEncrypted(stored string) bool {
	raw, err := base64.StdEncoding.Strict().DecodeString(stored)
	return err == nil && len(raw) >= 28
}

// resolveStartTime finds the first event group at or after at (see
// parseStartTime) in the binlog of src.
func resolveStartTime(ctx context.Context, src *config.SourceConfig, key *secret.Key, at string) (loc binlog.Location, err error) {
	ep, db, err := openDB(ctx, src.From, key, dbconn.SourceRef(src.SourceID))
	if err != nil {
		return loc, err
	}
	defer db.Close()
	t, err := parseStartTime(ctx, db, at)
	if err != nil {
		return loc, err
	}
	flavor := src.Flavor
	if flavor == "" {
		if flavor, err = dbconn.DetectFlavor(ctx, db); err != nil {
			return loc, err
		}
	}
	f := &timeFinder{db: db, syncCfg: finderSyncerConfig(ep, flavor), flavor: flavor, gtid: src.EnableGTID}
	return f.find(ctx, t)
}

// parseStartTime reads RFC 3339, or DM's "2006-01-02 15:04:05" (also with a
// T) in the source's time zone, which the source converts.
func parseStartTime(ctx context.Context, db *sql.DB, s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	local := strings.Replace(s, "T", " ", 1)
	if _, err := time.Parse(localTimeLayout, local); err != nil {
		return time.Time{}, errors.New(`use "2006-01-02 15:04:05" (the source's time zone) or RFC 3339 (2006-01-02T15:04:05Z)`)
	}
	var unix sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT CAST(UNIX_TIMESTAMP(?) AS SIGNED)", local).Scan(&unix); err != nil {
		return time.Time{}, fmt.Errorf("convert %q with the source's time zone: %w", local, err)
	}
	if !unix.Valid || unix.Int64 <= 0 {
		return time.Time{}, fmt.Errorf("the source cannot place %q in its time zone (before 1970, or a time skipped by a clock change)", local)
	}
	return time.Unix(unix.Int64, 0), nil
}
