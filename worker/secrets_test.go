package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/secret"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

// recordingFactory records the configs units are built and updated with.
type recordingFactory struct {
	*swFactory
	mu sync.Mutex
	// guarded by mu:
	built map[string]*config.SubTaskConfig
}

func (f *recordingFactory) NewUnit(t unit.Type, cfg *config.SubTaskConfig, logger *zap.Logger) (unit.Unit, error) {
	f.mu.Lock()
	f.built[cfg.Name] = cfg.Clone()
	f.mu.Unlock()
	return f.swFactory.NewUnit(t, cfg, logger)
}

func (f *recordingFactory) builtWith(task string) *config.SubTaskConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.built[task]
}

type secretEnv struct {
	*serverEnv
	factory *recordingFactory
	mu      sync.Mutex
	// guarded by mu: the source configs NewFactory was called with.
	sources []*config.SourceConfig
}

func startSecretServer(t *testing.T, key *secret.Key) *secretEnv {
	t.Helper()
	etcd := etcdtest.Start(t)
	se := &secretEnv{factory: &recordingFactory{swFactory: newSWFactory(), built: map[string]*config.SubTaskConfig{}}}
	e := &serverEnv{swEnv: &swEnv{
		t: t, etcd: etcd,
		master:  ha.NewStore(etcd.DirectClient(t), "/dm"),
		factory: se.factory.swFactory,
		metrics: NewMetrics(),
	}}
	se.serverEnv = e
	e.run(ServerConfig{
		Client: etcd.Client(t),
		NewFactory: func(src *config.SourceConfig, _ func() binlog.StreamOpener) unit.Factory {
			se.mu.Lock()
			se.sources = append(se.sources, src.Clone())
			se.mu.Unlock()
			return se.factory
		},
		SecretKey: key,
		Logger:    zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	return se
}

func (se *secretEnv) lastSource() *config.SourceConfig {
	se.mu.Lock()
	defer se.mu.Unlock()
	if len(se.sources) == 0 {
		return nil
	}
	return se.sources[len(se.sources)-1]
}

func mustKey(t *testing.T, b byte) *secret.Key {
	t.Helper()
	raw := make([]byte, secret.KeySize)
	for i := range raw {
		raw[i] = b + byte(i)
	}
	k, err := secret.NewKey(raw, "/etc/dm/secret.key")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustEncrypt(t *testing.T, k *secret.Key, pw string) string {
	t.Helper()
	ct, err := secret.Encrypt(k, pw)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

// TestServerDecryptsPasswords: the data plane gets decrypted passwords,
// the configs kept for change detection stay as etcd holds them, and a
// password encrypted with another key is an error of that subtask only.
func TestServerDecryptsPasswords(t *testing.T) {
	key, other := mustKey(t, 1), mustKey(t, 100)
	se := startSecretServer(t, key)
	e := se.serverEnv

	srcCT := mustEncrypt(t, key, "source-pw-Zq1")
	src := testSourceConfig()
	src.From.Password = srcCT
	if _, err := e.master.PutSourceConfig(e.ctx(), src); err != nil {
		t.Fatal(err)
	}
	if _, err := e.master.PutBound(e.ctx(), ha.Bound{Source: testSource, Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	put := func(name, pw string) {
		t.Helper()
		c := taskConfig(name)
		c.TargetDatabase.Password = pw
		if _, err := e.master.PutSubTask(e.ctx(), c, ha.Stage{Expect: stage.Running, Source: testSource, Task: name}); err != nil {
			t.Fatal(err)
		}
	}
	tgtCT := mustEncrypt(t, key, "target-pw-Xy2")
	wrongCT := mustEncrypt(t, other, "wrong-key-pw-Wv3")
	put("good", tgtCT)
	put("plain", "plain-pw")
	put("wrongkey", wrongCT)

	testutil.Eventually(t, 10*time.Second, "good and plain running", func() error {
		return errors.Join(e.checkSubtaskStage("good", stage.Running), e.checkSubtaskStage("plain", stage.Running))
	})
	if s := se.lastSource(); s == nil || s.From.Password != "source-pw-Zq1" {
		t.Fatalf("the unit factory got source password %q, want the decrypted one", s.From.Password)
	}
	if c := se.factory.builtWith("good"); c == nil || c.TargetDatabase.Password != "target-pw-Xy2" {
		t.Fatalf("unit of task good built with %+v, want the decrypted target password", c)
	}
	if c := se.factory.builtWith("plain"); c.TargetDatabase.Password != "plain-pw" {
		t.Fatalf("plaintext password changed: %q", c.TargetDatabase.Password)
	}
	// What change detection compares with stays as etcd holds it.
	e.srv.mu.Lock()
	kept := e.srv.swCfg.From.Password
	e.srv.mu.Unlock()
	if kept != srcCT {
		t.Fatal("the server's kept source config was changed by decryption")
	}
	if c := e.srv.SourceWorker().SubTask("good").Config(); c.TargetDatabase.Password != tgtCT {
		t.Fatal("the subtask's kept config was changed by decryption")
	}

	testutil.Eventually(t, 5*time.Second, "wrongkey reported", func() error {
		return e.checkErrorListed(func(te TaskError) bool { return te.Task == "wrongkey" && te.Code == CodePasswordUndecryptable })
	})
	if e.subtaskStage("wrongkey") != "<absent>" {
		t.Fatalf("subtask wrongkey exists in stage %s", e.subtaskStage("wrongkey"))
	}
	var msg string
	for _, te := range e.srv.Status().Errors {
		if te.Task == "wrongkey" {
			msg = te.Message
			if te.Resumable {
				t.Error("undecryptable password reported as resumable")
			}
		}
	}
	for _, want := range []string{`"wrongkey"`, "target-database.password", "/etc/dm/secret.key", "dmctl encrypt"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}

	// Nothing secret in the status, as served or published.
	testutil.Eventually(t, 5*time.Second, "status published with the error", func() error {
		st, _, err := e.master.GetStatuses(e.ctx())
		if err != nil {
			return err
		}
		if !strings.Contains(string(st["w1"]), CodePasswordUndecryptable) {
			return fmt.Errorf("status key holds %s", st["w1"])
		}
		return nil
	})
	st, _, _ := e.master.GetStatuses(e.ctx())
	local, _ := json.Marshal(e.srv.Status())
	for _, s := range []string{"source-pw-Zq1", "target-pw-Xy2", "wrong-key-pw-Wv3", srcCT, tgtCT, wrongCT} {
		if strings.Contains(string(st["w1"]), s) || strings.Contains(string(local), s) {
			t.Errorf("status contains a password or ciphertext %q", s)
		}
	}

	// A config update of the good task reaches its unit with the password
	// decrypted (the unit compares decrypted with decrypted).
	c := taskConfig("good")
	c.TargetDatabase.Password = tgtCT
	c.Syncer.WorkerCount = 3
	if _, err := e.master.PutSubTaskConfig(e.ctx(), c); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "good updated", func() bool {
		u := se.factory.latest("good")
		if u == nil {
			return false
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.cfg != nil && u.cfg.Syncer.WorkerCount == 3
	})
	u := se.factory.latest("good")
	u.mu.Lock()
	got := u.cfg.TargetDatabase.Password
	u.mu.Unlock()
	if got != "target-pw-Xy2" {
		t.Fatalf("unit updated with target password %q, want the decrypted one", got)
	}
}

// TestServerUndecryptableSourcePassword: the source is not started, the
// error is in status, and nothing crashes.
func TestServerUndecryptableSourcePassword(t *testing.T) {
	se := startSecretServer(t, mustKey(t, 1))
	e := se.serverEnv
	src := testSourceConfig()
	src.From.Password = mustEncrypt(t, mustKey(t, 50), "src-pw")
	if _, err := e.master.PutSourceConfig(e.ctx(), src); err != nil {
		t.Fatal(err)
	}
	if _, err := e.master.PutBound(e.ctx(), ha.Bound{Source: testSource, Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "source error in status", func() error {
		return e.checkErrorListed(func(te TaskError) bool {
			return te.Code == CodePasswordUndecryptable && strings.Contains(te.Message, testSource) && strings.Contains(te.Message, "from.password")
		})
	})
	if e.srv.SourceWorker() != nil || se.lastSource() != nil {
		t.Fatal("a source worker was started with an undecryptable password")
	}
	// Fixing the config (plaintext) starts the source.
	src.From.Password = "now-plain"
	if _, err := e.master.PutSourceConfig(e.ctx(), src); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "source started", func() error {
		if es := e.srv.Status().Errors; e.srv.SourceWorker() == nil || len(es) != 0 {
			return fmt.Errorf("source worker running: %v, status errors %s", e.srv.SourceWorker() != nil, errorList(es))
		}
		return nil
	})
}
