package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxAnswerBytes bounds what dmctl reads of a worker's answer.
const maxAnswerBytes = 64 << 20

// workerAPIError is the error body a worker answers with (DESIGN.md §6):
// {"error":{"code","message"}}, with the worker it came from.
type workerAPIError struct {
	Worker  string
	Status  int
	Code    string
	Message string
}

func (e *workerAPIError) Error() string {
	return fmt.Sprintf("worker %s answered %d %s: %s", e.Worker, e.Status, e.Code, e.Message)
}

// workerAddr returns the HTTP status address of worker as it registered it
// in P/worker/info, or an error saying what is missing.
func (c *cluster) workerAddr(worker string) (string, error) {
	info, ok := c.infos[worker]
	if !ok {
		if err := c.malformed(c.keys.WorkerInfo(worker)); err != nil {
			return "", fmt.Errorf("worker %s has a malformed info key in etcd (%w); restart the worker to rewrite it", worker, err)
		}
		return "", fmt.Errorf("worker %s has no info key in etcd, so its status address is unknown; start it (see `dmctl worker list`)", worker)
	}
	if info.Addr == "" {
		return "", fmt.Errorf("worker %s registered no status address; restart it with --status-addr/--advertise-addr", worker)
	}
	return info.Addr, nil
}

// sourceWorker returns the worker bound to source and its status address.
func (c *cluster) sourceWorker(source string) (worker, addr string, err error) {
	ws := c.boundWorkers(source)
	if len(ws) == 0 {
		return "", "", fmt.Errorf("source %s is not bound to any worker; bind it first with `dmctl bind %s WORKER`", source, source)
	}
	worker = ws[0]
	if !c.alive(worker) {
		return "", "", fmt.Errorf("worker %s bound to source %s is not alive (no keepalive key); start it and retry", worker, source)
	}
	addr, err = c.workerAddr(worker)
	if err != nil {
		return "", "", err
	}
	return worker, addr, nil
}

// workerHTTP returns the client and URL scheme for workers' HTTP APIs:
// every request dmctl sends to a worker goes through here (and through
// liveStatus for GET /api/v1/status).
func (e *env) workerHTTP() (*http.Client, string) {
	if e.http == nil {
		return http.DefaultClient, "http"
	}
	return e.http, "https"
}

// postWorker sends body as JSON to path on the worker's HTTP API and
// decodes a 2xx answer into out (when not nil). A non-2xx answer is a
// *workerAPIError with the worker's code and message.
func (e *env) postWorker(ctx context.Context, worker, addr, path string, body, out any) error {
	return e.callWorker(ctx, http.MethodPost, worker, addr, path, body, out)
}

// callWorker is postWorker for any method; a nil body sends none.
func (e *env) callWorker(ctx context.Context, method, worker, addr, path string, body, out any) error {
	client, scheme := e.workerHTTP()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request to worker %s: %w", worker, err)
		}
		rd = bytes.NewReader(b)
	}
	url := scheme + "://" + addr + path
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return fmt.Errorf("request to worker %s: %w", worker, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("worker %s at %s did not answer %s %s: %w; check that it runs and that its status address is reachable from here",
			worker, addr, method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("read the answer of worker %s to %s %s: %w", worker, method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var eb struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Code == "" {
			return &workerAPIError{Worker: worker, Status: resp.StatusCode, Code: "unexpected-answer",
				Message: fmt.Sprintf("%s %s: %s", method, path, clip(strings.TrimSpace(string(data)), 200))}
		}
		return &workerAPIError{Worker: worker, Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("the answer of worker %s to %s %s is not the expected JSON: %w", worker, method, path, err)
	}
	return nil
}

// apiCode returns the worker's error code of err, or "".
func apiCode(err error) string {
	var ae *workerAPIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// clip shortens s to at most n bytes for messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
