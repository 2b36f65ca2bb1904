package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/secret"
	"github.com/dmworker/dm-worker/unit/check"
)

// taskCheckJSON is the --output json document of "task check".
type taskCheckJSON struct {
	Task     string          `json:"task"`
	Failures int             `json:"failures"`
	Warnings int             `json:"warnings"`
	Reports  []*check.Report `json:"reports"`
}

// taskCheck runs the precheck of every subtask of a task file (DESIGN.md
// §9) against its source, whose config it reads from etcd, and its
// target, and prints every item. It writes nothing to etcd; on the target
// it creates the meta schema when missing (see package check). It fails
// when any requirement is unmet.
func taskCheck(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, err := parseArgs(cmd, newFlags(cmd), args, "FILE")
	if err != nil {
		return err
	}
	path := pos[0]
	tc, subtasks, err := checkTaskFile(path)
	if tc != nil {
		e.warnNotes(path, tc.Notes)
	}
	if err != nil {
		return err
	}
	_, c, err := e.cluster(ctx)
	if err != nil {
		return err
	}
	var missing []string
	for _, sc := range subtasks {
		if _, ok := c.sources[sc.SourceID]; !ok {
			missing = append(missing, sc.SourceID)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("task %s: source(s) %s do not exist; create them first with `dmctl source create FILE`",
			tc.Name, strings.Join(missing, ", "))
	}
	key, err := e.secretKey()
	if err != nil {
		return err
	}
	doc := taskCheckJSON{Task: tc.Name, Reports: make([]*check.Report, len(subtasks))}
	if err := runChecks(ctx, c, key, subtasks, doc.Reports); err != nil {
		return err
	}
	var failed []string
	for _, r := range doc.Reports {
		doc.Failures += len(r.Failures())
		doc.Warnings += len(r.Warnings())
		if len(r.Failures()) > 0 {
			failed = append(failed, r.Source)
		}
	}
	if err := e.emit(doc, func(w io.Writer) error { return printChecks(w, &doc) }); err != nil {
		return err
	}
	if doc.Failures > 0 {
		hint := ""
		if ctx.Err() != nil {
			hint = fmt.Sprintf(" (the checks ran out of --timeout %s; raise it for slow servers)", e.opts.timeout)
		}
		return fmt.Errorf("precheck failed: %d failure(s) on source(s) %s of task %s; fix each as its report says, then run `dmctl task check %s` again%s",
			doc.Failures, strings.Join(failed, ", "), tc.Name, path, hint)
	}
	return nil
}

// runChecks runs the precheck of each subtask, the sources in parallel,
// into out (one report per subtask, in order), with the passwords
// resolved with key.
func runChecks(ctx context.Context, c *cluster, key *secret.Key, subtasks []*config.SubTaskConfig, out []*check.Report) error {
	type job struct {
		cfg *config.SubTaskConfig
		src *config.SourceConfig
	}
	jobs := make([]job, len(subtasks))
	for i, sc := range subtasks {
		cfg, src := sc.Clone(), c.sources[sc.SourceID].Clone()
		var err error
		if src.From.Password, err = secret.ResolvePassword(src.From.Password, key); err != nil {
			return fmt.Errorf("source %s: from.password: %w", src.SourceID, err)
		}
		if cfg.TargetDatabase.Password, err = secret.ResolvePassword(cfg.TargetDatabase.Password, key); err != nil {
			return fmt.Errorf("task %s: target-database.password: %w", cfg.Name, err)
		}
		jobs[i] = job{cfg: cfg, src: src}
	}
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = check.Run(ctx, j.cfg, j.src)
		}()
	}
	wg.Wait()
	if key == nil {
		for i, sc := range subtasks {
			noteCiphertext(out[i], "source_connection", "from.password", c.sources[sc.SourceID].From.Password)
			noteCiphertext(out[i], "target_connection", "target-database.password", sc.TargetDatabase.Password)
		}
	}
	return nil
}

// noteCiphertext adds to the fix of a failed connection item that the
// password it used has the form of a `dmctl encrypt` ciphertext, when
// dmctl was given no --secret-key-path to decrypt it.
func noteCiphertext(r *check.Report, item, field, stored string) {
	if !looksEncrypted(stored) {
		return
	}
	for i := range r.Items {
		if it := &r.Items[i]; it.Name == item && it.State == check.StateFail {
			it.Fix += fmt.Sprintf("; %s has the form of a `dmctl encrypt` ciphertext: give dmctl the --secret-key-path it was encrypted with", field)
		}
	}
}

// printChecks writes each source's items, failures first, then warnings,
// then passed checks.
func printChecks(w io.Writer, doc *taskCheckJSON) error {
	var b strings.Builder
	for _, r := range doc.Reports {
		fmt.Fprintf(&b, "task %s, source %s: %d failure(s), %d warning(s)\n", r.Task, r.Source, len(r.Failures()), len(r.Warnings()))
		for _, st := range []check.State{check.StateFail, check.StateWarn, check.StatePass} {
			for _, it := range r.Items {
				if it.State == st {
					fmt.Fprintf(&b, "  [%s] %s\n", strings.ToUpper(string(st)), it.Line())
				}
			}
		}
	}
	fmt.Fprintf(&b, "task %s: %d failure(s), %d warning(s)\n", doc.Task, doc.Failures, doc.Warnings)
	_, err := io.WriteString(w, b.String())
	return err
}
