package stream

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/backoff"
)

// sinkRetry is the retry pacing of a sink's Write (DESIGN.md §4: retried
// with backoff): waits from min doubling to max between failures, and a
// Write that keeps failing for giveUpAfter gives up: the task then pauses
// with the error and is resumed through checking, where the sink's
// readiness probe is retried with the reason in status.
type sinkRetry struct {
	min, max, giveUpAfter time.Duration
}

// defaultSinkRetry is the pacing every sink uses.
var defaultSinkRetry = sinkRetry{min: 100 * time.Millisecond, max: 5 * time.Second, giveUpAfter: 30 * time.Second}

// retryReportKey carries, in a Write's ctx, the function told about each
// failed attempt (and nil once an attempt succeeds), so the task can show
// a sink that is being retried in status while Write still runs.
type retryReportKey struct{}

// withRetryReport returns ctx with report as the retry reporter of Writes
// under it.
func withRetryReport(ctx context.Context, report func(error)) context.Context {
	return context.WithValue(ctx, retryReportKey{}, report)
}

// NewSink builds the sink of one stream from its config. It does not
// connect or touch the file system: Probe does, and Write connects on
// demand. Errors name the stream and the bad field.
func NewSink(stream string, cfg config.SinkConfig, logger *zap.Logger) (Sink, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	logger = logger.With(zap.String("stream", stream), zap.String("sink", cfg.Type))
	missing := func(field string) error {
		return fmt.Errorf("stream %q: sink.%s must be set when sink.type is %s", stream, field, cfg.Type)
	}
	switch cfg.Type {
	case config.SinkFile:
		if cfg.File == nil {
			return nil, missing(config.SinkFile)
		}
		return newFileSink(stream, *cfg.File, logger)
	case config.SinkWebhook:
		if cfg.Webhook == nil {
			return nil, missing(config.SinkWebhook)
		}
		return newWebhookSink(stream, *cfg.Webhook, logger)
	case config.SinkNATS:
		if cfg.NATS == nil {
			return nil, missing(config.SinkNATS)
		}
		return newNATSSink(stream, *cfg.NATS, logger)
	case config.SinkKafka:
		if cfg.Kafka == nil {
			return nil, missing(config.SinkKafka)
		}
		return newKafkaSink(stream, *cfg.Kafka, logger)
	}
	return nil, fmt.Errorf("stream %q: sink.type %q: unknown sink type; use file, webhook, nats or kafka", stream, cfg.Type)
}

// appendSinkRecord appends the JSON object {"key":<Key>,"value":<Value>} that
// every sink carries (a file line, a webhook array element, a NATS body, a
// Kafka record value). An empty Key or Value is written as null.
func appendSinkRecord(buf []byte, e Event) []byte {
	if e.rec != nil {
		return append(buf, e.rec[:len(e.rec)-1]...)
	}
	buf = append(buf, `{"key":`...)
	buf = appendRawJSON(buf, e.Key)
	buf = append(buf, `,"value":`...)
	buf = appendRawJSON(buf, e.Value)
	return append(buf, '}')
}

func appendRawJSON(buf, raw []byte) []byte {
	if len(raw) == 0 {
		return append(buf, "null"...)
	}
	return append(buf, raw...)
}

// retryLoop runs attempt until it succeeds, waiting with backoff between
// failures, and gives up only when ctx is done: then the error names what
// was being done and the last failure (the last attempt that ran to its
// end, when ctx ended in the middle of one). attempt logs nothing itself;
// each failure is logged here once, with the delay before the next try.
func retryLoop(ctx context.Context, logger *zap.Logger, what string, attempt func(context.Context) error) error {
	return defaultSinkRetry.run(ctx, logger, what, attempt)
}

// run is retryLoop with p's pacing.
func (p sinkRetry) run(ctx context.Context, logger *zap.Logger, what string, attempt func(context.Context) error) error {
	b := backoff.New(p.min, p.max)
	report, _ := ctx.Value(retryReportKey{}).(func(error))
	if report == nil {
		report = func(error) {}
	}
	var (
		last      error // the failure of the last attempt that ran to its end
		firstFail time.Time
	)
	giveUp := func(n int, err error) error {
		if last == nil {
			last = err
		}
		return fmt.Errorf("%s: gave up after %d attempt(s) (%w): %w", what, n, context.Cause(ctx), last)
	}
	for n := 1; ; n++ {
		err := attempt(ctx)
		if err == nil {
			if n > 1 {
				logger.Info("sink delivery recovered", zap.String("op", what), zap.Int("attempts", n))
				report(nil)
			}
			return nil
		}
		if ctx.Err() != nil {
			return giveUp(n, err)
		}
		last = err
		report(fmt.Errorf("%s: attempt %d failed, retrying: %w", what, n, err))
		if firstFail.IsZero() {
			firstFail = time.Now()
		} else if time.Since(firstFail) >= p.giveUpAfter {
			return fmt.Errorf("%s: still failing after %s and %d attempts; the stream pauses and is resumed "+
				"through the sink's readiness check: %w", what, p.giveUpAfter, n, err)
		}
		d := b.Next()
		logger.Warn("sink delivery failed, retrying", zap.String("op", what), zap.Int("attempt", n),
			zap.Duration("retry-in", d), zap.Error(err))
		if !backoff.Sleep(ctx, backoff.RealClock{}, d) {
			return giveUp(n, err)
		}
	}
}

// redactedURL is u with any password masked, for errors and logs.
func redactedURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparseable URL)"
	}
	return p.Redacted()
}
