// Command dm-worker runs one data-migration worker beside etcd: it registers
// itself, follows the desired state a master writes into etcd and runs the
// bound source's relay, subtasks, validators and stream tasks.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/etcdutil"
	dmlog "github.com/dmworker/dm-worker/pkg/log"
	"github.com/dmworker/dm-worker/pkg/secret"
	"github.com/dmworker/dm-worker/pkg/version"
	"github.com/dmworker/dm-worker/relay"
	"github.com/dmworker/dm-worker/unit/dump"
	"github.com/dmworker/dm-worker/unit/load"
	"github.com/dmworker/dm-worker/unit/syncer"
	"github.com/dmworker/dm-worker/unit/validate"
	"github.com/dmworker/dm-worker/worker"
	"github.com/dmworker/dm-worker/worker/scheduler"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := config.ParseWorkerConfig(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dm-worker: %v\n", err)
		return 1
	}
	if cfg.PrintVersion {
		fmt.Println(version.String("dm-worker"))
		return 0
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "dm-worker: invalid config:\n%v\n", err)
		return 1
	}
	logger, flush, err := dmlog.New(dmlog.Config{Level: cfg.LogLevel, Format: cfg.LogFormat, File: cfg.LogFile})
	if err != nil {
		fmt.Fprintf(os.Stderr, "dm-worker: %v\n", err)
		return 1
	}
	defer flush()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, cfg, logger); err != nil {
		logger.Error("dm-worker stopped with an error", zap.Error(err))
		fmt.Fprintf(os.Stderr, "dm-worker: %v\n", err)
		return 1
	}
	logger.Info("dm-worker stopped")
	return 0
}

// serve runs the worker until ctx is cancelled (SIGTERM/SIGINT).
func serve(ctx context.Context, cfg *config.WorkerConfig, logger *zap.Logger) error {
	logger = logger.With(zap.String("worker", cfg.Name))
	logger.Info("dm-worker starting", zap.String("version", version.Version),
		zap.Strings("etcd-endpoints", cfg.EtcdEndpoints), zap.String("etcd-prefix", cfg.EtcdPrefix),
		zap.String("status-addr", cfg.StatusAddr), zap.Bool("embed-etcd", cfg.EmbedEtcd),
		zap.String("etcd-username", cfg.EtcdUsername), zap.String("secret-key-path", cfg.SecretKeyPath),
		zap.Bool("status-tls", cfg.StatusTLSCert != ""), zap.Bool("status-tls-client-ca", cfg.StatusTLSClientCA != ""))

	// Local files first: a key file others can read, or a bad certificate,
	// stops the worker before it touches the network.
	key, tlsCfg, err := loadLocalFiles(cfg, logger)
	if err != nil {
		return err
	}

	// Listen first: a taken address is reported at once, before etcd.
	ln, err := net.Listen("tcp", cfg.StatusAddr)
	if err != nil {
		return fmt.Errorf("listen on status-addr %s: %w; pick a free address with --status-addr", cfg.StatusAddr, err)
	}
	defer ln.Close() // Serve owns it once started; closing twice is harmless

	if cfg.EmbedEtcd {
		e, err := etcdutil.StartEmbedded(filepath.Join(cfg.DataDir, "etcd"), cfg.EtcdEndpoints[0], logger)
		if err != nil {
			return err
		}
		defer e.Close()
		logger.Info("embedded etcd ready", zap.String("client-url", cfg.EtcdEndpoints[0]))
	}
	cli, err := etcdutil.Connect(ctx, etcdutil.Options{
		Endpoints: cfg.EtcdEndpoints, CACert: cfg.EtcdCACert, Cert: cfg.EtcdCert, Key: cfg.EtcdKey,
		Username: cfg.EtcdUsername, Password: cfg.EtcdPassword, Prefix: cfg.EtcdPrefix, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer cli.Close()

	m, err := newMetrics()
	if err != nil {
		return err
	}
	// One budget of target connections for every task of the worker.
	budget := dbconn.NewBudget(dbconn.BudgetOptions{Limit: cfg.TargetConnectionLimit, Logger: logger})
	if err := m.reg.Register(worker.NewTargetConnCollector(budget)); err != nil {
		return fmt.Errorf("register target connection metrics: %w", err)
	}
	logger.Info("target connections", zap.Int("target-connection-limit", budget.Limit()))
	// One budget of connections to each source, the source's facts
	// (flavor) learned there once.
	sources := dbconn.NewBudget(dbconn.BudgetOptions{Kind: dbconn.Sources, Limit: cfg.SourceConnectionLimit, Logger: logger})
	if err := m.reg.Register(worker.NewSourceConnCollector(sources)); err != nil {
		return fmt.Errorf("register source connection metrics: %w", err)
	}
	logger.Info("source connections", zap.Int("source-connection-limit", sources.Limit()))
	// A meta store that cannot be opened stops no one: every stream shows
	// why in status, everything else runs.
	meta, metaErr := worker.OpenStreamMeta(cfg.DataDir)
	if metaErr != nil {
		logger.Error("stream meta store unavailable; stream tasks will not run until it is fixed", zap.Error(metaErr))
	} else {
		defer meta.Close()
	}
	srv := worker.NewServer(worker.ServerConfig{
		Name: cfg.Name, Addr: cfg.AdvertiseAddr, Client: cli, Prefix: cfg.EtcdPrefix,
		KeepaliveTTL: cfg.KeepaliveTTL.Duration,
		NewFactory: worker.NewUnitFactory(worker.UnitOptions{DataDir: cfg.DataDir, Sync: m.sync, Dump: m.dump, Load: m.load, Validate: m.valid,
			Budget: budget, Sources: sources, Logger: logger, Etcd: cli, Prefix: cfg.EtcdPrefix}),
		NewRelay:   worker.NewRelayFactory(cfg.RelayDir, worker.RelayOptions{Worker: cfg.Name, Metrics: m.relay, Sources: sources}),
		NewStreams: worker.NewStreamRuntimeBuilder(m.worker, sources),
		StreamMeta: meta, StreamMetaErr: metaErr,
		SecretKey: key, Budget: budget, Sources: sources,
		Metrics: m.worker, Logger: logger,
		Scheduler: cfg.Scheduler, SchedulerMetrics: m.sched,
	})
	return runServers(ctx, cfg, srv, m.reg, ln, tlsCfg, logger)
}

// loadLocalFiles reads the secret key and the status TLS certificate and
// creates the data directories.
func loadLocalFiles(cfg *config.WorkerConfig, logger *zap.Logger) (*secret.Key, *tls.Config, error) {
	var key *secret.Key
	if cfg.SecretKeyPath != "" {
		k, err := secret.LoadKeyFile(cfg.SecretKeyPath)
		if err != nil {
			return nil, nil, fmt.Errorf("--secret-key-path: %w", err)
		}
		key = k
	}
	var tlsCfg *tls.Config
	if cfg.StatusTLSCert != "" {
		c, err := worker.StatusTLSConfig(cfg.StatusTLSCert, cfg.StatusTLSKey, cfg.StatusTLSClientCA)
		if err != nil {
			return nil, nil, err
		}
		tlsCfg = c
	}
	return key, tlsCfg, makeDataDirs(cfg, logger)
}

// processMetrics are the registry of GET /metrics and the metrics of the
// worker, the sync unit and the relay registered in it.
type processMetrics struct {
	reg    *prometheus.Registry
	worker *worker.Metrics
	sync   *syncer.Metrics
	dump   *dump.Metrics
	load   *load.Metrics
	relay  *relay.Metrics
	valid  *validate.Metrics
	sched  *scheduler.Metrics
}

func newMetrics() (processMetrics, error) {
	m := processMetrics{reg: prometheus.NewRegistry(), worker: worker.NewMetrics(), sync: syncer.NewMetrics(), relay: relay.NewMetrics()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := m.worker.Register(m.reg); err != nil {
		return m, fmt.Errorf("register metrics: %w", err)
	}
	if err := m.sync.Register(m.reg); err != nil {
		return m, fmt.Errorf("register sync metrics: %w", err)
	}
	if err := m.relay.Register(m.reg); err != nil {
		return m, fmt.Errorf("register relay metrics: %w", err)
	}
	m.dump, m.load, m.valid = dump.NewMetrics(m.reg), load.NewMetrics(m.reg), validate.NewMetrics(m.reg)
	m.sched = scheduler.NewMetrics(m.reg)
	return m, nil
}

// runServers serves the HTTP API on ln and runs srv until ctx is cancelled
// or either fails, then shuts the HTTP server down.
func runServers(ctx context.Context, cfg *config.WorkerConfig, srv *worker.Server, reg *prometheus.Registry,
	ln net.Listener, tlsCfg *tls.Config, logger *zap.Logger) error {
	httpSrv := &http.Server{
		Handler:           worker.Logged(worker.Guard(srv.Handler(reg), logger), logger),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         tlsCfg,
		// TLS handshake failures and the like go to the worker's log.
		ErrorLog: mustStdLog(logger.Named("http")),
	}
	httpErr := make(chan error, 1)
	if tlsCfg != nil {
		go func() { httpErr <- httpSrv.ServeTLS(ln, "", "") }()
	} else {
		go func() { httpErr <- httpSrv.Serve(ln) }()
	}
	logger.Info("serving HTTP API", zap.String("addr", ln.Addr().String()), zap.Bool("https", tlsCfg != nil))

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(runCtx) }()

	var result error
	select {
	case err := <-runErr:
		result = err
	case err := <-httpErr:
		result = fmt.Errorf("HTTP server on %s: %w", cfg.StatusAddr, err)
		cancelRun()
		<-runErr
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shutCtx); err != nil {
		logger.Warn("HTTP shutdown", zap.Error(err))
	}
	return result
}

// dataDirMode is the mode data-dir and relay-dir are created with
// (DESIGN.md §4a): the worker's user and its group only.
const dataDirMode = 0o750

// makeDataDirs creates data-dir and relay-dir (0750) when they do not exist;
// existing directories keep their modes, with a warning when others may
// read them.
func makeDataDirs(cfg *config.WorkerConfig, logger *zap.Logger) error {
	for _, d := range []struct{ flag, path string }{{"data-dir", cfg.DataDir}, {"relay-dir", cfg.RelayDir}} {
		if err := os.MkdirAll(d.path, dataDirMode); err != nil {
			return fmt.Errorf("create --%s %s: %w", d.flag, d.path, err)
		}
		if st, err := os.Stat(d.path); err == nil && st.Mode().Perm()&0o007 != 0 {
			logger.Warn("directory is open to others: they can read relay data; run chmod o-rwx on it",
				zap.String("flag", d.flag), zap.String("path", d.path), zap.String("mode", fmt.Sprintf("%04o", st.Mode().Perm())))
		}
	}
	return nil
}

// mustStdLog is a standard logger writing to logger at warn level, for
// net/http's own messages (TLS handshake failures and the like).
func mustStdLog(logger *zap.Logger) *log.Logger {
	l, err := zap.NewStdLogAt(logger, zap.WarnLevel)
	if err != nil {
		// Only an invalid level makes NewStdLogAt fail.
		return zap.NewStdLog(logger)
	}
	return l
}
