package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
)

// NATS sink tuning.
const (
	// natsWindow bounds the publishes awaiting their ack.
	natsWindow = 256
	// natsAckWait is how long one publish waits for its ack before it
	// counts as failed (and is published again).
	natsAckWait = 5 * time.Second
	// natsConnectTimeout bounds one connection attempt.
	natsConnectTimeout = 5 * time.Second
	// natsReconnectBuf -1: nothing is buffered while the client
	// reconnects; a publish then fails at once and Write retries it with
	// backoff, so a server that is down costs no memory beyond the batch.
	natsReconnectBuf = -1
	// natsDuplicates is the de-duplication window of a stream the sink
	// creates: a publish repeated within it (same Nats-Msg-Id) is dropped.
	natsDuplicates = 10 * time.Minute
)

// natsSink publishes every event to JetStream, to the subject
// <subject>.<db>.<table> (a database's DDL to <subject>.<db>._), with
// Nats-Msg-Id = the event ID and the body {"key":…,"value":…}.
//
// Tokens: a db or table name holding a character NATS does not allow in a
// token ('.', '*', '>', whitespace, control characters) or '%' has it
// written as %XX (its bytes in hex); a table named "_" becomes "%5F", so
// "_" alone always means "no table".
//
// Publishes are asynchronous with at most natsWindow awaiting their ack;
// Write returns once every event of the batch is acknowledged. When a
// publish fails (server down, ack timeout), the events from the first
// unacknowledged one on are published again, with backoff, until ctx is
// done; JetStream drops the ones it already stored by their Nats-Msg-Id
// (within the stream's duplicate window), so retries add no copies. Order
// holds on a healthy connection (one connection publishes in order); it
// could break only if the server stored a later event after refusing an
// earlier one.
//
// Stream: sink.nats.stream "" uses the stream already bound to
// <subject>.>, or creates one named after the subject (dots as
// underscores); a named stream is used when it exists (it must take
// <subject>.>) and created with that subject otherwise.
type natsSink struct {
	stream string
	cfg    config.NATSSinkConfig
	shown  string // URL list with passwords masked
	logger *zap.Logger

	mu sync.Mutex
	// The fields below are guarded by mu.
	nc       *nats.Conn
	js       jetstream.JetStream
	jsStream string // the JetStream stream ensured on nc; "" = not yet
}

func newNATSSink(stream string, cfg config.NATSSinkConfig, logger *zap.Logger) (*natsSink, error) {
	if err := config.ValidateNATSSubject(cfg.Subject); err != nil {
		return nil, fmt.Errorf("stream %q: sink.nats.subject %q: %w", stream, cfg.Subject, err)
	}
	if strings.TrimSpace(cfg.URL) == "" {
		return nil, fmt.Errorf("stream %q: sink.nats.url must not be empty", stream)
	}
	var shown []string
	for _, u := range strings.Split(cfg.URL, ",") {
		shown = append(shown, redactedURL(strings.TrimSpace(u)))
	}
	return &natsSink{stream: stream, cfg: cfg, shown: strings.Join(shown, ","), logger: logger}, nil
}

// natsSubject is the subject of an event under prefix.
func natsSubject(prefix, db, table string) string {
	t := "_"
	if table != "" {
		t = natsToken(table)
	}
	return prefix + "." + natsToken(db) + "." + t
}

// natsToken escapes a name into one NATS subject token (see natsSink).
func natsToken(name string) string {
	if name == "" || name == "_" {
		return "%5F"
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c == 0x7f || c == '.' || c == '*' || c == '>' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Probe connects and makes sure the JetStream stream exists (creating it
// when it may).
func (s *natsSink) Probe(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.ensure(ctx)
	return err
}

// Write publishes the batch and waits for every ack (see natsSink).
func (s *natsSink) Write(ctx context.Context, batch []Event) error {
	if len(batch) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	msgs := make([]natsOut, len(batch))
	for i, e := range batch {
		msgs[i] = natsOut{subject: natsSubject(s.cfg.Subject, e.DB, e.Table), data: appendSinkRecord(nil, e)}
	}
	done := 0 // msgs[:done] are acknowledged
	what := fmt.Sprintf("NATS sink of stream %q: publish %d event(s) to %s.> at %s", s.stream, len(batch), s.cfg.Subject, s.shown)
	return retryLoop(ctx, s.logger, what, func(ctx context.Context) error {
		js, err := s.ensure(ctx)
		if err != nil {
			return err
		}
		n, err := publishWindow(ctx, js, batch[done:], msgs[done:])
		done += n
		if errors.Is(err, nats.ErrReconnectBufExceeded) {
			err = fmt.Errorf("the connection to the server is down and the client reconnects (nothing is buffered meanwhile): %w", err)
		}
		if err != nil && done < len(batch) {
			return fmt.Errorf("event %s (%d of %d): %w", batch[done].ID, done+1, len(batch), err)
		}
		return err
	})
}

// natsOut is the subject and body of one event's message.
type natsOut struct {
	subject string
	data    []byte
}

// publishWindow publishes msgs asynchronously with at most natsWindow
// awaiting their ack, in order, and returns how many leading messages are
// acknowledged.
func publishWindow(ctx context.Context, js jetstream.JetStream, batch []Event, msgs []natsOut) (int, error) {
	type inflight struct {
		idx int
		f   jetstream.PubAckFuture
	}
	q := make([]inflight, 0, natsWindow)
	acked := 0
	// await waits for the first n futures of q, in order.
	await := func(n int) error {
		for _, in := range q[:n] {
			select {
			case <-in.f.Ok():
			case err := <-in.f.Err():
				return err
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			acked = in.idx + 1
		}
		q = append(q[:0], q[n:]...)
		return nil
	}
	for i, m := range msgs {
		if len(q) == natsWindow {
			if err := await(natsWindow / 2); err != nil {
				return acked, err
			}
		}
		// A new nats.Msg each time: the client keeps the one of an earlier
		// attempt (to retry it itself) until that attempt's future ends.
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: m.subject, Data: m.data}, jetstream.WithMsgID(batch[i].ID))
		if err != nil {
			return acked, err
		}
		q = append(q, inflight{idx: i, f: f})
	}
	return acked, await(len(q))
}

// ensure returns the JetStream context, connecting and ensuring the stream
// first when needed. A connection that was closed is replaced.
func (s *natsSink) ensure(ctx context.Context) (jetstream.JetStream, error) {
	if s.nc != nil && s.nc.IsClosed() {
		s.nc, s.js, s.jsStream = nil, nil, ""
	}
	if s.nc == nil {
		opts := []nats.Option{
			nats.Name("dm-worker stream " + s.stream),
			nats.Timeout(natsConnectTimeout),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(250 * time.Millisecond),
			nats.ReconnectBufSize(natsReconnectBuf),
		}
		if s.cfg.Credentials != "" {
			opts = append(opts, nats.UserCredentials(s.cfg.Credentials))
		}
		nc, err := nats.Connect(s.cfg.URL, opts...)
		if err != nil {
			return nil, fmt.Errorf("NATS sink of stream %q: connect to %s: %w; check sink.nats.url, sink.nats.credentials and that the server runs", s.stream, s.shown, err)
		}
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(natsWindow), jetstream.WithPublishAsyncTimeout(natsAckWait))
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("NATS sink of stream %q: JetStream at %s: %w", s.stream, s.shown, err)
		}
		s.nc, s.js = nc, js
	}
	if s.jsStream == "" {
		name, err := s.ensureStream(ctx)
		if err != nil {
			return nil, fmt.Errorf("NATS sink of stream %q at %s: %w", s.stream, s.shown, err)
		}
		s.jsStream = name
		s.logger.Info("NATS sink ready", zap.String("jetstream-stream", name), zap.String("subjects", s.cfg.Subject+".>"))
	}
	return s.js, nil
}

// ensureStream finds or creates the JetStream stream for <subject>.>.
func (s *natsSink) ensureStream(ctx context.Context) (string, error) {
	subjects := s.cfg.Subject + ".>"
	name := s.cfg.Stream
	if name == "" {
		found, err := s.js.StreamNameBySubject(ctx, subjects)
		switch {
		case err == nil:
			return found, nil
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			return "", fmt.Errorf("look up the JetStream stream of %s: %w; is JetStream enabled on the server (nats-server -js)?", subjects, err)
		}
		name = strings.ReplaceAll(s.cfg.Subject, ".", "_")
	} else {
		st, err := s.js.Stream(ctx, name)
		switch {
		case err == nil:
			info := st.CachedInfo()
			if !slices.ContainsFunc(info.Config.Subjects, func(f string) bool { return natsSubjectCovers(f, subjects) }) {
				return "", fmt.Errorf("JetStream stream %q (sink.nats.stream) takes subjects %q, not %s; add %s to its subjects or name another stream",
					name, info.Config.Subjects, subjects, subjects)
			}
			return name, nil
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			return "", fmt.Errorf("JetStream stream %q (sink.nats.stream): %w; is JetStream enabled on the server (nats-server -js)?", name, err)
		}
	}
	_, err := s.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:        name,
		Description: "change events of dm-worker stream " + s.stream,
		Subjects:    []string{subjects},
		Duplicates:  natsDuplicates,
	})
	if err != nil {
		return "", fmt.Errorf("create JetStream stream %q for %s: %w; create it yourself or grant the worker's NATS user the right to", name, subjects, err)
	}
	s.logger.Info("NATS sink created a JetStream stream", zap.String("jetstream-stream", name), zap.String("subjects", subjects))
	return name, nil
}

// natsSubjectCovers reports whether the subject filter f matches every
// subject that filter sub matches (sub's wildcards only as its tokens).
func natsSubjectCovers(f, sub string) bool {
	ft, st := strings.Split(f, "."), strings.Split(sub, ".")
	for i, tok := range ft {
		if tok == ">" {
			return i < len(st)
		}
		if i >= len(st) {
			return false
		}
		switch {
		case tok == "*" && st[i] != ">":
		case tok == st[i]:
		default:
			return false
		}
	}
	return len(ft) == len(st)
}

// Close drains nothing (every acknowledged event is stored) and closes the
// connection.
func (s *natsSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nc != nil {
		s.nc.Close()
		s.nc, s.js, s.jsStream = nil, nil, ""
	}
	return nil
}
