package worker

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/backoff"
	"github.com/dmworker/dm-worker/pkg/periodic"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/unit"
)

// Resumable is what the checker can auto-resume: subtasks and the relay.
type Resumable interface {
	Name() string
	// Kind labels the item's auto-resumes in metrics ("subtask", "relay").
	Kind() string
	Stage() stage.Stage
	Result() *unit.Result
	ExplicitlyPaused() bool
	AutoResume(ctx context.Context) error
}

// CheckerConfig configures the auto-resume checker. Zero durations take the
// defaults: Interval 1s, BackoffMin 1s, BackoffMax 5m, QuietWindow 5m.
type CheckerConfig struct {
	Interval    time.Duration // how often items are looked at
	BackoffMin  time.Duration // delay before the first auto-resume of an error streak
	BackoffMax  time.Duration // cap of the delay
	QuietWindow time.Duration // running this long without error resets the delay to BackoffMin
	Enable      bool
}

func (c CheckerConfig) withDefaults() CheckerConfig {
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 5 * time.Minute
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	if c.QuietWindow <= 0 {
		c.QuietWindow = 5 * time.Minute
	}
	return c
}

// Checker auto-resumes items paused by errors that are all resumable, with
// an exponential backoff (pkg/backoff) per item: the first resume of a
// streak waits BackoffMin after the checker first saw the item paused,
// every auto-resume followed by another error doubles the delay (each
// delay spread by ±10 %, capped at BackoffMax), and QuietWindow of running
// without error after an auto-resume resets it. Items with a
// non-resumable error and explicitly paused items are never resumed.
type Checker struct {
	cfg     CheckerConfig
	list    func() []Resumable
	clock   Clock
	metrics *Metrics
	logger  *zap.Logger
	// items is owned by the Run goroutine.
	items map[string]*resumeState
}

// resumeState is the checker's memory of one item.
type resumeState struct {
	bo           *backoff.Backoff // the item's delays: BackoffMin, doubled per failed auto-resume
	backoff      time.Duration    // the delay before the next auto-resume
	pausedAt     time.Time        // when the current error pause was first seen; zero when not in one
	resumed      bool             // auto-resumed since the delay was last reset
	runningSince time.Time        // when it was last auto-resumed
	decision     string           // last logged decision, to log each decision once
}

// NewChecker returns a checker of the items list returns (called every
// Interval). metrics may be nil.
func NewChecker(cfg CheckerConfig, list func() []Resumable, clock Clock, metrics *Metrics, logger *zap.Logger) *Checker {
	if clock == nil {
		clock = RealClock{}
	}
	return &Checker{
		cfg:     cfg.withDefaults(),
		list:    list,
		clock:   clock,
		metrics: metrics,
		logger:  logger.Named("checker"),
		items:   make(map[string]*resumeState),
	}
}

// Run checks the items every Interval until ctx is done. The owner waits
// for it to return.
func (c *Checker) Run(ctx context.Context) {
	if !c.cfg.Enable {
		c.logger.Info("auto-resume disabled (checker.check-enable is false)")
		<-ctx.Done()
		return
	}
	periodic.Run(ctx, c.cfg.Interval, periodic.AfterInterval, c.check)
}

// check looks at every item once.
func (c *Checker) check(ctx context.Context) {
	now := c.clock.Now()
	seen := make(map[string]bool)
	for _, it := range c.list() {
		name := it.Name()
		seen[name] = true
		st := c.items[name]
		if st == nil {
			st = &resumeState{bo: backoff.New(c.cfg.BackoffMin, c.cfg.BackoffMax)}
			st.backoff = st.bo.Next()
			c.items[name] = st
		}
		c.checkItem(ctx, it, st, now)
	}
	for name := range c.items {
		if !seen[name] {
			delete(c.items, name)
		}
	}
}

func (c *Checker) checkItem(ctx context.Context, it Resumable, st *resumeState, now time.Time) {
	stg := it.Stage()
	if stg != stage.Paused {
		st.pausedAt = time.Time{}
		if stg == stage.Running && st.resumed && now.Sub(st.runningSince) >= c.cfg.QuietWindow {
			st.resumed = false
			st.bo.Reset()
			st.backoff = st.bo.Next()
			c.decide(it, st, "backoff reset after a quiet window", "")
		}
		return
	}
	res := it.Result()
	if !res.Failed() {
		st.pausedAt = time.Time{}
		return
	}
	code := res.Errors[0].Code
	switch {
	case it.ExplicitlyPaused():
		st.pausedAt = time.Time{}
		c.decide(it, st, "explicitly paused; not resuming", code)
		return
	case !res.Resumable():
		st.pausedAt = time.Time{}
		for _, e := range res.Errors {
			if !e.Resumable {
				code = e.Code
				break
			}
		}
		c.decide(it, st, "non-resumable error; left paused for the operator", code)
		return
	}
	if st.pausedAt.IsZero() {
		// A new error pause. An auto-resume that ends in another error
		// doubles the delay.
		st.pausedAt = now
		if st.resumed {
			st.backoff = st.bo.Next()
		}
		c.decide(it, st, "resumable error; waiting for backoff", code)
	}
	if now.Sub(st.pausedAt) < st.backoff {
		return
	}
	if err := it.AutoResume(ctx); err != nil {
		c.logger.Warn("auto-resume failed", zap.String("task", it.Name()), zap.Duration("backoff", st.backoff),
			zap.String("error-code", code), zap.Error(err))
		st.decision = ""
		return
	}
	st.pausedAt = time.Time{}
	st.resumed = true
	st.runningSince = now
	st.decision = ""
	if c.metrics != nil {
		c.metrics.AutoResumes.WithLabelValues(it.Kind()).Inc()
	}
	c.logger.Info("auto-resumed", zap.String("task", it.Name()), zap.Duration("backoff", st.backoff),
		zap.String("error-code", code))
}

// decide logs a decision about an item once per change of decision.
func (c *Checker) decide(it Resumable, st *resumeState, decision, code string) {
	if st.decision == decision {
		return
	}
	st.decision = decision
	c.logger.Info(decision, zap.String("task", it.Name()), zap.Duration("backoff", st.backoff),
		zap.String("error-code", code))
}
