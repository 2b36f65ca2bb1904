package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// DM's dmctl command names. A DM user types `start-task task.yaml` or
// `query-status my-task`; each of DM's names here parses DM's flags and runs
// the dmctl command that does the same. A DM flag with no equivalent is
// refused, naming what to do instead, rather than ignored: doing more or less
// than the user asked is worse than saying no. Flags that only shape DM's
// output (query-status --more, check-task --error) are accepted with a note.

// dmCommands are DM's names, listed under their own heading by --help.
func dmCommands() []command {
	return []command{{
		name:  "start-task",
		args:  "FILE [--remove-meta] [--start-time T]",
		short: "task start FILE (-s SOURCE: not supported, every instance of the file starts)",
		run:   dmStartTask,
		dm:    true,
	}, {
		name:  "check-task",
		args:  "FILE",
		short: "task check FILE (--error/--warn are accepted; every item is printed)",
		run:   dmCheckTask,
		dm:    true,
	}, {
		name:  "pause-task",
		args:  "TASK|FILE",
		short: "task pause TASK",
		run:   dmTaskByName("task pause"),
		dm:    true,
	}, {
		name:  "resume-task",
		args:  "TASK|FILE",
		short: "task resume TASK",
		run:   dmTaskByName("task resume"),
		dm:    true,
	}, {
		name:  "stop-task",
		args:  "TASK|FILE",
		short: "task stop TASK",
		run:   dmTaskByName("task stop"),
		dm:    true,
	}, {
		name:  "query-status",
		args:  "[TASK|FILE]",
		short: "task status TASK; without a task, task list",
		run:   dmQueryStatus,
		dm:    true,
	}, {
		name:  "operate-source",
		args:  "create FILE... | stop (FILE... | -s SOURCE...) | show [-s SOURCE]",
		short: "source create FILE / source delete SOURCE / source list",
		run:   dmOperateSource,
		dm:    true,
	}, {
		name:  "list-member",
		args:  "[--worker] [--master] [--leader] [--name N]",
		short: "worker list (there is no master: the SCHEDULER column shows the leading worker)",
		run:   dmListMember,
		dm:    true,
	}, {
		name:  "transfer-source",
		args:  "SOURCE WORKER",
		short: "source transfer SOURCE WORKER",
		run:   dmRename("source transfer"),
		dm:    true,
	}, {
		name:  "start-relay",
		args:  "-s SOURCE",
		short: "relay start SOURCE (relay runs on the source's bound worker: name no workers)",
		run:   dmRelay("relay start"),
		dm:    true,
	}, {
		name:  "stop-relay",
		args:  "-s SOURCE",
		short: "relay stop SOURCE",
		run:   dmRelay("relay stop"),
		dm:    true,
	}, {
		name:  "pause-relay",
		args:  "-s SOURCE",
		short: "relay pause SOURCE",
		run:   dmRelay("relay pause"),
		dm:    true,
	}, {
		name:  "resume-relay",
		args:  "-s SOURCE",
		short: "relay resume SOURCE",
		run:   dmRelay("relay resume"),
		dm:    true,
	}, {
		name:  "purge-relay",
		args:  "-s SOURCE --filename F",
		short: "relay purge SOURCE --filename F",
		run:   dmPurgeRelay,
		dm:    true,
	}, {
		name:  "binlog skip",
		args:  "TASK [-b FILE:POS] [-s SOURCE]",
		short: "task handle-error TASK skip",
		run:   dmBinlog("skip"),
		dm:    true,
	}, {
		name:  "binlog replace",
		args:  "TASK SQL... [-b FILE:POS] [-s SOURCE]",
		short: "task handle-error TASK replace --sql SQL...",
		run:   dmBinlog("replace"),
		dm:    true,
	}, {
		name:  "binlog",
		args:  "revert|inject|list ...",
		short: "not supported: a skip or replace runs at once and cannot be queued, listed or taken back",
		run:   dmBinlogOther,
		dm:    true,
	}, {
		name:  "config task",
		args:  "TASK",
		short: "task config TASK",
		run:   dmRename("task config"),
		dm:    true,
	}, {
		name:  "config",
		args:  "source|master|worker ...",
		short: "not supported: only `config task TASK` has an equivalent",
		run:   dmConfigOther,
		dm:    true,
	}, {
		name:  "validation show-error",
		args:  "TASK [--error unprocessed|ignored|resolved|all] [-s SOURCE]",
		short: "validation errors TASK --state new|ignored|resolved|all",
		run:   dmShowError,
		dm:    true,
	}, {
		name:  "validation ignore-error",
		args:  "TASK (ID | --all) [-s SOURCE]",
		short: "validation ignore TASK",
		run:   dmErrorOp("validation ignore"),
		dm:    true,
	}, {
		name:  "validation resolve-error",
		args:  "TASK (ID | --all) [-s SOURCE]",
		short: "validation resolve TASK",
		run:   dmErrorOp("validation resolve"),
		dm:    true,
	}, {
		name:  "validation clear-error",
		args:  "TASK (ID | --all) [-s SOURCE]",
		short: "validation clear TASK",
		run:   dmErrorOp("validation clear"),
		dm:    true,
	}}
}

// runAs runs the dmctl command called name with args.
func runAs(ctx context.Context, e *env, name string, args []string) error {
	target, rest := lookup(commands(), strings.Fields(name))
	if target == nil || len(rest) != 0 || target.name != name {
		return fmt.Errorf("internal: no dmctl command %q", name)
	}
	return target.run(ctx, e, target, args)
}

// dmRename is a DM name whose arguments are ours.
func dmRename(ours string) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, _ *command, args []string) error {
		return runAs(ctx, e, ours, args)
	}
}

// dmSources is DM's -s: repeatable, and comma-separated as DM's flag
// library splits it.
type dmSources []string

func (l *dmSources) String() string { return strings.Join(*l, ",") }
func (l *dmSources) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// dmSourceFlag registers DM's -s/--source.
func dmSourceFlag(fs *flag.FlagSet) *dmSources {
	var l dmSources
	fs.Var(&l, "s", "source ID (DM's -s; repeatable)")
	fs.Var(&l, "source", "source ID (DM's --source; repeatable)")
	return &l
}

// noSubset refuses DM's -s on a command that acts on every source of a task.
func noSubset(cmd *command, sources dmSources) error {
	if len(sources) > 0 {
		return usagef(cmd, "-s %s: acting on some sources of a task only has no equivalent here; "+
			"this command acts on every source of the task (leave -s out)", strings.Join(sources, ","))
	}
	return nil
}

// taskNameArg is a task argument as DM takes it: a task name, or the path
// of a task file whose name field names the task.
func taskNameArg(arg string) (string, error) {
	if !strings.HasSuffix(arg, ".yaml") && !strings.HasSuffix(arg, ".yml") && !strings.ContainsRune(arg, '/') {
		return arg, nil
	}
	return fileField(arg, "task file", "name", " field: give the task name instead")
}

func dmStartTask(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	sources := dmSourceFlag(fs)
	removeMeta := fs.Bool("remove-meta", false, "remove the task's checkpoints and shard DDL state before starting")
	startTime := fs.String("start-time", "", "start an incremental task from the binlog written at this time")
	pos, err := parseArgs(cmd, fs, args, "FILE")
	if err != nil {
		return err
	}
	if len(*sources) > 0 {
		return usagef(cmd, "-s %s: starting a task on some of its sources only has no equivalent here; "+
			"every mysql-instances entry of the file starts: remove the others from the file instead",
			strings.Join(*sources, ","))
	}
	out := []string{pos[0]}
	if *removeMeta {
		out = append(out, "--remove-meta")
	}
	if *startTime != "" {
		out = append(out, "--start-time", *startTime)
	}
	return runAs(ctx, e, "task start", out)
}

func dmCheckTask(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	fs.Int("error", 0, "DM: how many failed items to print (every item is printed here)")
	fs.Int("warn", 0, "DM: how many warnings to print (every item is printed here)")
	startTime := fs.String("start-time", "", "DM: check as for start-task --start-time")
	pos, err := parseArgs(cmd, fs, args, "FILE")
	if err != nil {
		return err
	}
	if *startTime != "" {
		return usagef(cmd, "--start-time has no equivalent in task check; `start-task FILE --start-time T` checks the file before it starts")
	}
	return runAs(ctx, e, "task check", pos)
}

// dmTaskByName is pause-task, resume-task and stop-task: a task name or
// file, every source.
func dmTaskByName(ours string) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, cmd *command, args []string) error {
		fs := newFlags(cmd)
		sources := dmSourceFlag(fs)
		pos, err := parseArgs(cmd, fs, args, "TASK")
		if err != nil {
			return err
		}
		if err := noSubset(cmd, *sources); err != nil {
			return err
		}
		name, err := taskNameArg(pos[0])
		if err != nil {
			return err
		}
		return runAs(ctx, e, ours, []string{name})
	}
}

func dmQueryStatus(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	sources := dmSourceFlag(fs)
	fs.Bool("more", false, "DM: the full status (status here is always full)")
	pos, err := parseAllArgs(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(*sources) > 0 {
		fmt.Fprintf(e.stderr, "note: -s %s: the status shows every source of the task\n", strings.Join(*sources, ","))
	}
	switch len(pos) {
	case 0:
		return runAs(ctx, e, "task list", nil)
	case 1:
		name, err := taskNameArg(pos[0])
		if err != nil {
			return err
		}
		return runAs(ctx, e, "task status", []string{name})
	default:
		return usagef(cmd, "takes at most one task name or file, got %q", pos)
	}
}

func dmOperateSource(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	sources := dmSourceFlag(fs)
	sample := fs.Bool("print-sample-config", false, "DM: print a sample source config")
	pos, err := parseAllArgs(cmd, fs, args)
	if err != nil {
		return err
	}
	if *sample {
		return usagef(cmd, "--print-sample-config has no equivalent; README.md's Quickstart has a source config")
	}
	if len(pos) == 0 {
		return usagef(cmd, "needs an operation: create, stop or show")
	}
	op, files := pos[0], pos[1:]
	switch op {
	case "create":
		if len(*sources) > 0 {
			return usagef(cmd, "create takes source config files, not -s")
		}
		if len(files) == 0 {
			return usagef(cmd, "create needs at least one source config file")
		}
		if len(files) > 1 && e.opts.output == outputJSON {
			return usagef(cmd, "--output json prints one document: create one source per command")
		}
		for _, f := range files {
			if err := runAs(ctx, e, "source create", []string{f}); err != nil {
				return err
			}
		}
		return nil
	case "stop":
		ids := append([]string(nil), *sources...)
		for _, f := range files {
			sc, err := sourceIDOfFile(f)
			if err != nil {
				return err
			}
			ids = append(ids, sc)
		}
		if len(ids) == 0 {
			return usagef(cmd, "stop needs source config files or -s SOURCE")
		}
		if len(ids) > 1 && e.opts.output == outputJSON {
			return usagef(cmd, "--output json prints one document: stop one source per command")
		}
		for _, id := range ids {
			if err := runAs(ctx, e, "source delete", []string{id}); err != nil {
				return err
			}
		}
		return nil
	case "show":
		if len(files) > 0 {
			return usagef(cmd, "show takes no files")
		}
		if len(*sources) > 0 {
			fmt.Fprintf(e.stderr, "note: -s %s: every source is listed\n", strings.Join(*sources, ","))
		}
		return runAs(ctx, e, "source list", nil)
	default:
		return usagef(cmd, "unknown operation %q: use create, stop or show (DM's update is `dmctl source update FILE`)", op)
	}
}

// sourceIDOfFile reads the source-id of a source config file.
func sourceIDOfFile(path string) (string, error) {
	return fileField(path, "source config file", "source-id", "")
}

// fileField reads the top-level string field of a YAML file (what names
// the file in errors; hint follows "has no FIELD" when it is missing).
func fileField(path, what, field, hint string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s %s: %w", what, path, err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("%s %s: %w", what, path, err)
	}
	v, _ := doc[field].(string)
	if v == "" {
		return "", fmt.Errorf("%s %s has no %s%s", what, path, field, hint)
	}
	return v, nil
}

func dmListMember(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	fs.Bool("worker", false, "DM: list workers")
	master := fs.Bool("master", false, "DM: list masters")
	fs.Bool("leader", false, "DM: show the leader")
	var names stringList
	fs.Var(&names, "name", "DM: only these members")
	fs.Var(&names, "n", "DM: only these members")
	if _, err := parseArgs(cmd, fs, args); err != nil {
		return err
	}
	if *master {
		fmt.Fprintln(e.stderr, "note: there is no dm-master: workers elect a scheduler among themselves (the SCHEDULER column)")
	}
	if len(names) > 0 {
		fmt.Fprintf(e.stderr, "note: --name %s: every worker is listed\n", names.String())
	}
	return runAs(ctx, e, "worker list", nil)
}

// dmRelay is start-relay, stop-relay, pause-relay and resume-relay: one
// source named by -s.
func dmRelay(ours string) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, cmd *command, args []string) error {
		fs := newFlags(cmd)
		sources := dmSourceFlag(fs)
		pos, err := parseAllArgs(cmd, fs, args)
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usagef(cmd, "worker names %q: the relay runs on the worker the source is bound to "+
				"(`dmctl source list` shows it; `transfer-source` moves it); leave them out", pos)
		}
		if len(*sources) != 1 {
			return usagef(cmd, "needs exactly one -s SOURCE, got %d", len(*sources))
		}
		return runAs(ctx, e, ours, []string{(*sources)[0]})
	}
}

func dmPurgeRelay(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	sources := dmSourceFlag(fs)
	filename := fs.String("filename", "", "purge the relay files before this one")
	subDir := fs.String("sub-dir", "", "DM: the relay sub-directory")
	if _, err := parseArgs(cmd, fs, args); err != nil {
		return err
	}
	if *subDir != "" {
		return usagef(cmd, "--sub-dir has no equivalent: a worker keeps one relay directory per source; leave it out")
	}
	if len(*sources) != 1 {
		return usagef(cmd, "needs exactly one -s SOURCE, got %d", len(*sources))
	}
	if *filename == "" {
		return usagef(cmd, "needs --filename F (dmctl relay purge also takes --inactive or --time)")
	}
	return runAs(ctx, e, "relay purge", []string{(*sources)[0], "--filename", *filename})
}

// dmBinlog is `binlog skip` and `binlog replace`.
func dmBinlog(op string) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, cmd *command, args []string) error {
		fs := newFlags(cmd)
		sources := dmSourceFlag(fs)
		var pos string
		fs.StringVar(&pos, "b", "", "the event as FILE:POS")
		fs.StringVar(&pos, "binlog-pos", "", "the event as FILE:POS")
		rest, err := parseAllArgs(cmd, fs, args)
		if err != nil {
			return err
		}
		if len(rest) == 0 {
			return usagef(cmd, "needs a task name")
		}
		if op == "skip" && len(rest) != 1 {
			return usagef(cmd, "takes one task name, got %q", rest)
		}
		if op == "replace" && len(rest) < 2 {
			return usagef(cmd, "needs a task name and at least one statement")
		}
		if len(*sources) > 1 {
			return usagef(cmd, "-s %s: name one source, or none for every source of the task", sources.String())
		}
		out := []string{rest[0], op}
		if pos != "" {
			out = append(out, "--binlog-pos", pos)
		}
		for _, q := range rest[1:] {
			out = append(out, "--sql", q)
		}
		if len(*sources) == 1 {
			out = append(out, "--source", (*sources)[0])
		}
		return runAs(ctx, e, "task handle-error", out)
	}
}

func dmBinlogOther(_ context.Context, _ *env, cmd *command, args []string) error {
	op := ""
	if len(args) > 0 {
		op = args[0]
	}
	return usagef(cmd, "binlog %s has no equivalent here: `binlog skip` and `binlog replace` act at once on the event "+
		"a task is stuck on (`dmctl task handle-error`), so there is nothing queued to list, inject or revert", op)
}

func dmConfigOther(_ context.Context, _ *env, cmd *command, args []string) error {
	what := ""
	if len(args) > 0 {
		what = args[0]
	}
	return usagef(cmd, "config %s has no equivalent here: `config task TASK` prints a task's config; "+
		"a source's config is what you gave `operate-source create`, and there is no dm-master", what)
}

// dmErrorStates maps DM's validation error states to ours.
var dmErrorStates = map[string]string{"unprocessed": "new", "ignored": "ignored", "resolved": "resolved", "all": "all"}

func dmShowError(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	sources := dmSourceFlag(fs)
	state := fs.String("error", "unprocessed", "which errors: unprocessed, ignored, resolved or all")
	pos, err := parseArgs(cmd, fs, args, "TASK")
	if err != nil {
		return err
	}
	ours, ok := dmErrorStates[*state]
	if !ok {
		return usagef(cmd, "--error %q: use unprocessed, ignored, resolved or all", *state)
	}
	if len(*sources) > 1 {
		return usagef(cmd, "-s %s: name one source, or none for every source", sources.String())
	}
	out := []string{pos[0], "--state", ours}
	if len(*sources) == 1 {
		out = append(out, "--source", (*sources)[0])
	}
	return runAs(ctx, e, "validation errors", out)
}

// dmErrorOp is validation ignore-error, resolve-error and clear-error.
func dmErrorOp(ours string) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, cmd *command, args []string) error {
		fs := newFlags(cmd)
		sources := dmSourceFlag(fs)
		all := fs.Bool("all", false, "every error")
		pos, err := parseAllArgs(cmd, fs, args)
		if err != nil {
			return err
		}
		if len(*sources) > 1 {
			return usagef(cmd, "-s %s: name one source, or none", sources.String())
		}
		out := append([]string(nil), pos...)
		if *all {
			out = append(out, "--all")
		}
		if len(*sources) == 1 {
			out = append(out, "--source", (*sources)[0])
		}
		return runAs(ctx, e, ours, out)
	}
}
