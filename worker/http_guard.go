package worker

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/dmworker/dm-worker/pkg/errs"
	"go.uber.org/zap"
)

// Guard wraps the API handler with what every request goes through
// (DESIGN.md §4a, §6):
//   - requests that change state (any method but GET, HEAD and OPTIONS) are
//     refused with 403 `forbidden` unless the peer is a loopback address or
//     presented a client certificate the server verified
//     (--status-tls-client-ca);
//   - request bodies over 1 MiB are refused with 413 `request-too-large`
//     (at once when Content-Length says so, else when a handler reads past
//     the limit);
//   - a panic in a handler is answered with 500 `internal` and logged;
//   - any error answer (status >= 400) that is not JSON — net/http's and
//     pprof's plain-text errors — is rewritten into the §6 shape
//     {"error":{"code","message"}}.
//
// Behind a reverse proxy on the same host every request comes from
// loopback: such a proxy must do its own access control.
func Guard(h http.Handler, logger *zap.Logger) http.Handler {
	if logger == nil {
		logger = zap.NewNop()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBodyBytes {
			writeError(w, tooLarge(r))
			return
		}
		if !safeMethod(r.Method) && !trustedPeer(r) {
			writeError(w, &APIError{http.StatusForbidden, CodeForbidden, fmt.Sprintf(
				"%s %s from %s refused: requests that change state are accepted only from loopback, or from clients with a certificate when the worker runs with --status-tls-client-ca",
				r.Method, r.URL.Path, peerHost(r))})
			return
		}
		body := &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, maxBodyBytes)}
		r.Body = body
		gw := &guardWriter{ResponseWriter: w, r: r, body: body}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler { // net/http's own sentinel: let the server abort the connection
					panic(p)
				}
				logger.Error("HTTP handler panicked", zap.String("method", r.Method), zap.String("path", r.URL.Path),
					zap.Any("panic", p), zap.StackSkip("stack", 1))
				if gw.wroteHeader {
					panic(http.ErrAbortHandler) // too late for an answer: drop the connection
				}
				writeError(gw.ResponseWriter, &APIError{http.StatusInternalServerError, errs.CodeInternal,
					fmt.Sprintf("%s %s: internal error; the worker logged the details", r.Method, r.URL.Path)})
				return
			}
			gw.finish()
		}()
		h.ServeHTTP(gw, r)
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// trustedPeer: loopback, or a client certificate verified by the server.
func trustedPeer(r *http.Request) bool {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return true
	}
	ip := net.ParseIP(peerHost(r))
	return ip != nil && ip.IsLoopback()
}

func peerHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func tooLarge(r *http.Request) *APIError {
	return &APIError{http.StatusRequestEntityTooLarge, CodeRequestTooLarge,
		fmt.Sprintf("%s %s: request body larger than %d bytes", r.Method, r.URL.Path, maxBodyBytes)}
}

// limitedBody records that a read hit the body limit.
type limitedBody struct {
	io.ReadCloser
	exceeded bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		b.exceeded = true
	}
	return n, err
}

// guardWriter passes answers through, except error answers that must be
// rewritten: those it holds back and finish writes in the §6 shape.
type guardWriter struct {
	http.ResponseWriter
	r    *http.Request
	body *limitedBody

	wroteHeader bool
	// capture is set when an error answer is being held back.
	capture bool
	status  int
	buf     bytes.Buffer
}

const maxCapturedMessage = 1024

func (g *guardWriter) WriteHeader(status int) {
	if g.wroteHeader {
		return
	}
	g.wroteHeader = true
	if status >= 400 && (g.body.exceeded || !isJSON(g.Header().Get("Content-Type"))) {
		g.capture, g.status = true, status
		return
	}
	g.ResponseWriter.WriteHeader(status)
}

func (g *guardWriter) Write(p []byte) (int, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	if g.capture {
		if room := maxCapturedMessage - g.buf.Len(); room > 0 {
			g.buf.Write(p[:min(len(p), room)])
		}
		return len(p), nil
	}
	return g.ResponseWriter.Write(p)
}

// Flush passes through unless an error answer is held back.
func (g *guardWriter) Flush() {
	if g.capture {
		return
	}
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (g *guardWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// finish writes a held-back error answer in the §6 shape.
func (g *guardWriter) finish() {
	if !g.capture {
		return
	}
	h := g.ResponseWriter.Header()
	h.Del("Content-Length")
	h.Del("X-Content-Type-Options")
	if g.body.exceeded {
		writeError(g.ResponseWriter, tooLarge(g.r))
		return
	}
	msg := strings.TrimSpace(g.buf.String())
	if msg == "" {
		msg = http.StatusText(g.status)
	}
	writeError(g.ResponseWriter, &APIError{g.status, codeForStatus(g.status), fmt.Sprintf("%s %s: %s", g.r.Method, g.r.URL.Path, msg)})
}

func isJSON(ct string) bool {
	return strings.HasPrefix(strings.TrimSpace(strings.ToLower(ct)), "application/json")
}

// codeForStatus is the stable code of an error answer a handler wrote as
// plain text.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeBadRequest
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusRequestEntityTooLarge:
		return CodeRequestTooLarge
	case http.StatusInternalServerError:
		return errs.CodeInternal
	}
	return fmt.Sprintf("http-%d", status)
}

// StatusTLSConfig builds the HTTPS config of the API from
// --status-tls-cert/--status-tls-key and, when clientCA is set, requires
// client certificates signed by the CA in that file. Errors name the file.
func StatusTLSConfig(certFile, keyFile, clientCA string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("status API TLS: load --status-tls-cert %s and --status-tls-key %s: %w", certFile, keyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if clientCA == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(clientCA)
	if err != nil {
		return nil, fmt.Errorf("status API TLS: read --status-tls-client-ca %s: %w", clientCA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("status API TLS: --status-tls-client-ca %s holds no PEM certificate", clientCA)
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	return cfg, nil
}
