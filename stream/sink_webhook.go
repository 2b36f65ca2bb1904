package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
)

// webhookSnippet is how much of a refusing response's body is logged and
// put into the error.
const webhookSnippet = 256

// webhookSink POSTs JSON arrays of {"key","value"} objects, at most batch
// events per request, in order. A request is acknowledged by any 2xx
// answer; anything else (another status, a redirect, a transport error, a
// timeout) is retried with backoff until ctx is done. 4xx answers are
// retried too (DESIGN.md §4: retried with backoff otherwise): the status
// and the start of the body are logged at every failure, so that an
// operator sees a receiver that refuses the events. Each request carries
// Idempotency-Key = the ID of its first event, so a receiver can drop a
// request it has already taken.
type webhookSink struct {
	stream  string
	url     string
	shown   string // url with the password masked
	timeout time.Duration
	batch   int
	headers http.Header
	client  *http.Client
	logger  *zap.Logger

	body []byte // the request body; owned by Write (one Write at a time)
}

func newWebhookSink(stream string, cfg config.WebhookSinkConfig, logger *zap.Logger) (*webhookSink, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("stream %q: sink.webhook.url must not be empty", stream)
	}
	if _, err := http.NewRequest(http.MethodPost, cfg.URL, nil); err != nil {
		return nil, fmt.Errorf("stream %q: sink.webhook.url %s: %w", stream, redactedURL(cfg.URL), err)
	}
	s := &webhookSink{
		stream:  stream,
		url:     cfg.URL,
		shown:   redactedURL(cfg.URL),
		timeout: cfg.Timeout.Duration,
		batch:   cfg.Batch,
		headers: http.Header{},
		logger:  logger,
	}
	if s.timeout <= 0 {
		s.timeout = config.DefaultWebhookTimeout
	}
	if s.batch <= 0 {
		s.batch = config.DefaultWebhookBatch
	}
	for k, v := range cfg.Headers {
		s.headers.Set(k, v)
	}
	s.client = &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		// A redirect of a POST would turn into a GET without the events:
		// take the 3xx as the answer (not acknowledged, retried, logged).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// Probe sends a HEAD request; a 2xx or 405 (Method Not Allowed: the
// endpoint exists but takes POST only) answer means ready.
func (s *webhookSink) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, s.url, nil)
	if err != nil {
		return fmt.Errorf("webhook sink of stream %q: %s: %w", s.stream, s.shown, err)
	}
	for k, v := range s.headers {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook sink of stream %q: HEAD %s: %w; check that the receiver runs and sink.webhook.url is right", s.stream, s.shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusMethodNotAllowed {
		return nil
	}
	return fmt.Errorf("webhook sink of stream %q: HEAD %s answered %s; want 2xx or 405: check sink.webhook.url and the receiver",
		s.stream, s.shown, resp.Status)
}

// Write posts the batch in requests of at most batch events, each retried
// until acknowledged or ctx is done.
func (s *webhookSink) Write(ctx context.Context, batch []Event) error {
	for start := 0; start < len(batch); start += s.batch {
		part := batch[start:min(start+s.batch, len(batch))]
		s.encode(part)
		what := fmt.Sprintf("webhook sink of stream %q: POST %d event(s) to %s (Idempotency-Key %s)", s.stream, len(part), s.shown, part[0].ID)
		if err := retryLoop(ctx, s.logger, what, func(ctx context.Context) error { return s.post(ctx, part[0].ID) }); err != nil {
			return err
		}
	}
	return nil
}

// encode writes part as a JSON array into s.body.
func (s *webhookSink) encode(part []Event) {
	s.body = append(s.body[:0], '[')
	for i, e := range part {
		if i > 0 {
			s.body = append(s.body, ',')
		}
		s.body = appendSinkRecord(s.body, e)
	}
	s.body = append(s.body, ']')
}

// post sends s.body once.
func (s *webhookSink) post(ctx context.Context, key string) error {
	reqCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, s.url, bytes.NewReader(s.body))
	if err != nil {
		return err
	}
	for k, v := range s.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() == nil && errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("no answer within sink.webhook.timeout %s: %w", s.timeout, err)
		}
		return err
	}
	defer resp.Body.Close() // a read body: closing it loses nothing
	// The snippet only feeds the message; the rest is drained so that the
	// connection can be reused.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, webhookSnippet))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	return fmt.Errorf("answered %s: %q", resp.Status, strings.TrimSpace(string(snippet)))
}

// Close releases idle connections.
func (s *webhookSink) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
