// Command dmctl is the master-side CLI of dm-worker: it writes the desired
// state of DESIGN.md §3 into etcd (sources, bindings, relay, subtasks,
// validators, stream tasks) as a master would, and reads the status the
// workers publish there.
//
// It owns nothing in etcd beyond what a master writes; it never writes a
// key a worker owns (worker info, keepalive, status), except the shard DDL
// state under P/shardddl/, which `shard-ddl-lock unlock` changes through
// ha/shardddl as any worker does (DESIGN.md §3). Every command checks
// all of its input and every object it refers to before it writes
// anything, so a failing command leaves etcd as it was.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/etcdutil"
	"github.com/dmworker/dm-worker/pkg/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Output formats of --output.
const (
	outputText = "text"
	outputJSON = "json"
)

// globalOptions are the flags given before the command.
type globalOptions struct {
	endpoints string
	prefix    string
	caCert    string
	cert      string
	key       string
	output    string
	timeout   time.Duration
	version   bool
	// etcdUser and etcdPassword log in to etcd with auth enabled.
	etcdUser, etcdPassword string
	// secretKeyPath is the key file of `encrypt` and of password decryption.
	secretKeyPath string
	// statusCA, statusCert and statusKey: talk HTTPS to workers started with
	// --status-tls-cert (statusCA verifies them; statusCert/statusKey are
	// the client certificate for workers with --status-tls-client-ca).
	statusCA, statusCert, statusKey string
}

// env is what a command runs with: the global options, the output streams
// and the etcd connection, opened on first use and closed by run.
type env struct {
	opts   globalOptions
	stdout io.Writer
	stderr io.Writer

	cli *clientv3.Client
	st  *ha.Store
	// http is the client for workers' HTTPS APIs (nil: plain HTTP), built
	// from the --status-tls-* flags before the command runs.
	http *http.Client
}

// store connects to etcd on first use and returns the typed store.
func (e *env) store(ctx context.Context) (*ha.Store, error) {
	if e.st != nil {
		return e.st, nil
	}
	var endpoints []string
	for _, ep := range strings.Split(e.opts.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			endpoints = append(endpoints, ep)
		}
	}
	cli, err := etcdutil.Connect(ctx, etcdutil.Options{
		Endpoints:   endpoints,
		CACert:      e.opts.caCert,
		Cert:        e.opts.cert,
		Key:         e.opts.key,
		Username:    e.opts.etcdUser,
		Password:    e.opts.etcdPassword,
		Prefix:      e.opts.prefix,
		DialTimeout: e.opts.timeout,
	})
	if err != nil {
		return nil, err
	}
	e.cli = cli
	e.st = ha.NewStore(cli, e.opts.prefix)
	return e.st, nil
}

// close closes the etcd connection if one was opened.
func (e *env) close() error {
	if e.cli == nil {
		return nil
	}
	err := e.cli.Close()
	e.cli, e.st = nil, nil
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// command is one dmctl command, e.g. "source create".
type command struct {
	// name is the words that select the command.
	name string
	// args describes the arguments and flags after the name.
	args string
	// short is a one-line description for the usage listing.
	short string
	// run executes the command with the arguments after its name.
	run func(ctx context.Context, e *env, cmd *command, args []string) error
	// dm marks one of DM's command names (dm_names.go), listed apart.
	dm bool
}

// commands lists every command in the order of the usage text.
func commands() []command {
	var all []command
	all = append(all, workerCommands()...)
	all = append(all, sourceCommands()...)
	all = append(all, bindCommands()...)
	all = append(all, relayCommands()...)
	all = append(all, taskCommands()...)
	all = append(all, validationCommands()...)
	all = append(all, streamCommands()...)
	all = append(all, shardDDLLockCommands()...)
	all = append(all, secretCommands()...)
	all = append(all, dmCommands()...)
	return all
}

// usageError is a mistake in the command line; run prints the usage of the
// command with it.
type usageError struct {
	cmd *command
	msg string
}

func (u *usageError) Error() string { return u.msg }

// usagef builds a usageError for cmd.
func usagef(cmd *command, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// run is dmctl without the process around it: it parses args, runs one
// command and returns the exit code (0 success, 1 any error).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	fs := globalFlags(&e.opts)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout, fs)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "dmctl: %v\n", err)
		if strings.Contains(err.Error(), "-master-addr") {
			fmt.Fprint(stderr, "dmctl: there is no dm-master here: give --etcd-endpoints, the etcd the workers use\n")
		}
		fmt.Fprintln(stderr)
		printUsage(stderr, fs)
		return 1
	}
	if e.opts.version {
		fmt.Fprintln(stdout, version.String("dmctl"))
		return 0
	}
	if problem := e.opts.check(); problem != "" {
		fmt.Fprintf(stderr, "dmctl: %s\n", problem)
		return 1
	}
	if e.http, err = workerHTTPSClient(e.opts); err != nil {
		fmt.Fprintf(stderr, "dmctl: %v\n", err)
		return 1
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprint(stderr, "dmctl: no command given\n\n")
		printUsage(stderr, fs)
		return 1
	}
	if rest[0] == "help" {
		printUsage(stdout, fs)
		return 0
	}
	cmd, cmdArgs := lookup(commands(), rest)
	if cmd == nil {
		fmt.Fprintf(stderr, "dmctl: unknown command %q\n\n", strings.Join(rest[:min(2, len(rest))], " "))
		printUsage(stderr, fs)
		return 1
	}

	return e.runCommand(ctx, cmd, cmdArgs)
}

// globalFlags is the flag set of dmctl's global options, stored into o.
func globalFlags(o *globalOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("dmctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.endpoints, "etcd-endpoints", config.DefaultEtcdEndpoint, "comma-separated etcd client URLs")
	fs.StringVar(&o.prefix, "etcd-prefix", config.DefaultEtcdPrefix, "cluster key prefix in etcd")
	fs.StringVar(&o.caCert, "etcd-cacert", "", "PEM file of the CA that signed etcd's certificate")
	fs.StringVar(&o.cert, "etcd-cert", "", "PEM client certificate for etcd")
	fs.StringVar(&o.key, "etcd-key", "", "PEM client key for etcd")
	fs.StringVar(&o.etcdUser, "etcd-username", "", "etcd user (etcd auth); its role needs readwrite on the etcd-prefix")
	fs.StringVar(&o.etcdPassword, "etcd-password", "", "password of --etcd-username")
	fs.StringVar(&o.secretKeyPath, "secret-key-path", "", "AES-256 key file (64 hex characters, mode 0600) for `encrypt` and encrypted passwords")
	fs.StringVar(&o.statusCA, "status-tls-ca", "", "PEM CA that signed the workers' HTTPS certificates; talk HTTPS to workers")
	fs.StringVar(&o.statusCert, "status-tls-cert", "", "PEM client certificate for workers started with --status-tls-client-ca (implies HTTPS)")
	fs.StringVar(&o.statusKey, "status-tls-key", "", "PEM key of --status-tls-cert")
	fs.StringVar(&o.output, "output", outputText, "output format: text or json")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "time limit for the whole command")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	return fs
}

// runCommand runs one command within --timeout, closes the etcd connection
// and reports the outcome: usage on a usage error, the error with a hint
// on a timeout. It returns the exit code.
func (e *env) runCommand(ctx context.Context, cmd *command, cmdArgs []string) int {
	stdout, stderr := e.stdout, e.stderr
	ctx, cancel := context.WithTimeout(ctx, e.opts.timeout)
	defer cancel()
	err := cmd.run(ctx, e, cmd, cmdArgs)
	connected := e.cli != nil
	if cerr := e.close(); cerr != nil && err == nil {
		err = fmt.Errorf("close etcd connection: %w", cerr)
	}
	var ue *usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		printCommandUsage(stdout, cmd)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "dmctl %s: %s\n", cmd.name, ue.msg)
		printCommandUsage(stderr, cmd)
		return 1
	case err != nil:
		// etcdutil.Connect explains an unreachable etcd itself; a timeout
		// after connecting gets the hint here.
		if connected && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			err = fmt.Errorf("%w (the command took longer than --timeout %s; check that etcd at %s answers, or raise --timeout)",
				err, e.opts.timeout, e.opts.endpoints)
		}
		fmt.Fprintf(stderr, "dmctl %s: %v\n", cmd.name, err)
		return 1
	}
	return 0
}

// check returns a description of the first bad global option, or "".
func (o *globalOptions) check() string {
	switch {
	case o.output != outputText && o.output != outputJSON:
		return fmt.Sprintf("--output %q: use text or json", o.output)
	case o.timeout <= 0:
		return fmt.Sprintf("--timeout %s: must be positive", o.timeout)
	case strings.TrimSpace(strings.ReplaceAll(o.endpoints, ",", "")) == "":
		return "--etcd-endpoints is empty: give at least one etcd client URL"
	case !strings.HasPrefix(o.prefix, "/") || strings.HasSuffix(o.prefix, "/") && o.prefix != "/":
		return fmt.Sprintf("--etcd-prefix %q: must start with '/' and not end with '/' (e.g. /dm)", o.prefix)
	case (o.etcdUser == "") != (o.etcdPassword == ""):
		return "--etcd-username and --etcd-password go together: give both or neither"
	case (o.statusCert == "") != (o.statusKey == ""):
		return "--status-tls-cert and --status-tls-key go together: give both or neither"
	}
	return ""
}

// lookup finds the command whose name words start args and returns it with
// the remaining arguments; nil when none matches. The longest name wins:
// "shard-ddl-lock unlock L" is the unlock command, not the listing of
// task "unlock".
func lookup(all []command, args []string) (*command, []string) {
	var best *command
	n := 0
	for i := range all {
		words := strings.Fields(all[i].name)
		if len(args) < len(words) || len(words) <= n {
			continue
		}
		match := true
		for j, w := range words {
			if args[j] != w {
				match = false
				break
			}
		}
		if match {
			best, n = &all[i], len(words)
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, args[n:]
}

// printUsage writes the global usage: flags and every command.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, "Usage: dmctl [global flags] COMMAND [args]\n\nCommands:\n")
	for _, c := range commands() {
		if !c.dm {
			fmt.Fprintf(w, "  %-44s %s\n", strings.TrimSpace(c.name+" "+c.args), c.short)
		}
	}
	fmt.Fprint(w, "\nDM's command names (each runs the command named after it, with DM's flags):\n")
	for _, c := range commands() {
		if c.dm {
			fmt.Fprintf(w, "  %-44s = %s\n", strings.TrimSpace(c.name+" "+c.args), c.short)
		}
	}
	fmt.Fprint(w, "\nGlobal flags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// printCommandUsage writes one command's usage line.
func printCommandUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: dmctl [global flags] %s\n  %s\n", strings.TrimSpace(c.name+" "+c.args), c.short)
}

// parseArgs parses fs from args, allowing flags after positional arguments
// ("source create FILE --worker w1"); "--" ends flag parsing. It returns the
// positional arguments and checks that there are exactly want of them.
func parseArgs(cmd *command, fs *flag.FlagSet, args []string, want ...string) ([]string, error) {
	pos, err := parseAllArgs(cmd, fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != len(want) {
		if len(want) == 0 {
			return nil, usagef(cmd, "takes no arguments, got %q", pos)
		}
		return nil, usagef(cmd, "needs %s, got %d argument(s) %q", strings.Join(want, " "), len(pos), pos)
	}
	return pos, nil
}

// parseAllArgs is parseArgs without the count check: it returns every
// positional argument, for commands whose arguments are optional.
func parseAllArgs(cmd *command, fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef(cmd, "%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// fs.Parse stops at the first positional argument or after "--".
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return pos, nil
}

// newFlags returns an empty flag set for cmd.
func newFlags(cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet("dmctl "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// positional parses a command without flags and checks its name
// arguments: kinds[i] is "source", "worker", "task" or "stream".
func positional(cmd *command, args []string, kinds ...string) ([]string, error) {
	return positionalFlags(cmd, newFlags(cmd), args, kinds...)
}

// positionalFlags is positional for a command with the flags of fs.
func positionalFlags(cmd *command, fs *flag.FlagSet, args []string, kinds ...string) ([]string, error) {
	want := make([]string, len(kinds))
	for i, k := range kinds {
		want[i] = strings.ToUpper(k)
	}
	pos, err := parseArgs(cmd, fs, args, want...)
	if err != nil {
		return nil, err
	}
	for i, k := range kinds {
		if err := config.ValidateName(k, pos[i]); err != nil {
			return nil, err
		}
	}
	return pos, nil
}

// connect parses a command's name arguments (see positional) and connects
// to etcd.
func (e *env) connect(ctx context.Context, cmd *command, args []string, kinds ...string) ([]string, *ha.Store, error) {
	pos, err := positional(cmd, args, kinds...)
	if err != nil {
		return nil, nil, err
	}
	st, err := e.store(ctx)
	if err != nil {
		return nil, nil, err
	}
	return pos, st, nil
}

// connectCluster parses a command's name arguments (see positional),
// connects to etcd and reads the cluster.
func (e *env) connectCluster(ctx context.Context, cmd *command, args []string, kinds ...string) ([]string, *ha.Store, *cluster, error) {
	pos, err := positional(cmd, args, kinds...)
	if err != nil {
		return nil, nil, nil, err
	}
	st, c, err := e.cluster(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return pos, st, c, nil
}

// cluster connects to etcd and reads the cluster.
func (e *env) cluster(ctx context.Context) (*ha.Store, *cluster, error) {
	st, err := e.store(ctx)
	if err != nil {
		return nil, nil, err
	}
	c, err := readCluster(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	return st, c, nil
}
