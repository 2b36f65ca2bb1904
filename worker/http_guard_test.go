package worker

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/tests/tlstest"
)

func guarded(t *testing.T) http.Handler {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/", (&Server{}).Handler(prometheus.NewRegistry()))
	mux.HandleFunc("/test/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	mux.HandleFunc("/test/plain-error", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "teapot says no", http.StatusTeapot)
	})
	mux.HandleFunc("/test/read-all", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
	})
	return Guard(mux, zaptest.NewLogger(t))
}

// request runs one request from peer (host:port) through h.
func request(h http.Handler, method, path, peer string, body io.Reader, contentLength int64) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, body)
	req.RemoteAddr = peer
	if contentLength != 0 {
		req.ContentLength = contentLength
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestGuardAccessAndErrorShapes: POSTs from non-loopback peers are refused,
// GETs are not; oversized bodies get 413; every error is in the §6 shape.
func TestGuardAccessAndErrorShapes(t *testing.T) {
	h := guarded(t)
	const remote, local, local6 = "192.0.2.10:4711", "127.0.0.1:4711", "[::1]:4711"
	big := strings.Repeat("x", maxBodyBytes+1)
	tests := []struct {
		name          string
		method, path  string
		peer          string
		body          string
		chunked       bool // no Content-Length: the limit is hit while reading
		status        int
		code          string // "" = no error expected
		messageHas    string
		contentLength int64
	}{
		{name: "GET status remote", method: http.MethodGet, path: "/api/v1/status", peer: remote, status: http.StatusOK},
		{name: "POST purge remote", method: http.MethodPost, path: "/api/v1/relay/purge", peer: remote, body: `{"inactive":true}`,
			status: http.StatusForbidden, code: CodeForbidden, messageHas: "192.0.2.10"},
		{name: "POST handle-error remote", method: http.MethodPost, path: "/api/v1/subtasks/t1/handle-error", peer: remote, body: `{"op":"skip"}`,
			status: http.StatusForbidden, code: CodeForbidden},
		{name: "POST validation remote", method: http.MethodPost, path: "/api/v1/subtasks/t1/validation/errors", peer: remote, body: `{"op":"clear","all":true}`,
			status: http.StatusForbidden, code: CodeForbidden},
		{name: "DELETE remote", method: http.MethodDelete, path: "/api/v1/status", peer: remote, status: http.StatusForbidden, code: CodeForbidden},
		{name: "POST purge loopback reaches the handler", method: http.MethodPost, path: "/api/v1/relay/purge", peer: local, body: `{"inactive":true}`,
			status: http.StatusConflict, code: CodeNotBound},
		{name: "POST purge ipv6 loopback", method: http.MethodPost, path: "/api/v1/relay/purge", peer: local6, body: `{"inactive":true}`,
			status: http.StatusConflict, code: CodeNotBound},
		{name: "413 by Content-Length", method: http.MethodPost, path: "/api/v1/relay/purge", peer: local, body: big,
			status: http.StatusRequestEntityTooLarge, code: CodeRequestTooLarge},
		{name: "413 by Content-Length, remote too", method: http.MethodPost, path: "/api/v1/relay/purge", peer: remote, body: big,
			status: http.StatusRequestEntityTooLarge, code: CodeRequestTooLarge},
		{name: "413 while decoding JSON", method: http.MethodPost, path: "/api/v1/relay/purge", peer: local,
			body: `{"filename":"` + big + `"}`, chunked: true, status: http.StatusRequestEntityTooLarge, code: CodeRequestTooLarge},
		{name: "413 while reading, plain-text handler", method: http.MethodPost, path: "/test/read-all", peer: local, body: big, chunked: true,
			status: http.StatusRequestEntityTooLarge, code: CodeRequestTooLarge},
		{name: "1 MiB exactly is fine", method: http.MethodPost, path: "/test/read-all", peer: local, body: big[:maxBodyBytes], chunked: true, status: http.StatusOK},
		{name: "bad JSON", method: http.MethodPost, path: "/api/v1/relay/purge", peer: local, body: `{"inactive":`, status: http.StatusBadRequest, code: CodeBadRequest},
		{name: "unknown field", method: http.MethodPost, path: "/api/v1/relay/purge", peer: local, body: `{"nope":1}`, status: http.StatusBadRequest, code: CodeBadRequest},
		{name: "404", method: http.MethodGet, path: "/no/such", peer: remote, status: http.StatusNotFound, code: CodeNotFound},
		{name: "405", method: http.MethodGet, path: "/api/v1/relay/purge", peer: local, status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed},
		{name: "panic", method: http.MethodGet, path: "/test/panic", peer: local, status: http.StatusInternalServerError, code: errs.CodeInternal, messageHas: "internal error"},
		{name: "plain-text error rewritten", method: http.MethodGet, path: "/test/plain-error", peer: local, status: http.StatusTeapot, code: "http-418", messageHas: "teapot says no"},
		{name: "pprof unknown profile", method: http.MethodGet, path: "/debug/pprof/nosuch", peer: local, status: http.StatusNotFound, code: CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				body = io.MultiReader(strings.NewReader(tt.body)) // hides the length from httptest
			}
			cl := int64(0)
			if tt.chunked {
				cl = -1
			}
			rec := request(h, tt.method, tt.path, tt.peer, body, cl)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tt.status, clipBody(rec.Body.String()))
			}
			if tt.code == "" {
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			code, msg := apiErrorOf(t, rec)
			if code != tt.code {
				t.Errorf("code %q, want %q (message %q)", code, tt.code, msg)
			}
			if msg == "" || !strings.Contains(msg, tt.messageHas) {
				t.Errorf("message %q lacks %q", msg, tt.messageHas)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil || len(raw) != 1 {
				t.Errorf("error body has other top-level fields: %s", rec.Body)
			}
		})
	}
}

func clipBody(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// TestGuardClientCertificates: a verified client certificate admits a POST
// from any peer; a TLS connection without one does not.
func TestGuardClientCertificates(t *testing.T) {
	h := guarded(t)
	post := func(state *tls.ConnectionState) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/relay/purge", strings.NewReader(`{"inactive":true}`))
		req.RemoteAddr = "198.51.100.7:5555"
		req.TLS = state
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := post(&tls.ConnectionState{}); rec.Code != http.StatusForbidden {
		t.Fatalf("TLS without a verified client certificate: %d", rec.Code)
	}
	verified := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{}}}}
	if rec := post(verified); rec.Code != http.StatusConflict {
		t.Fatalf("verified client certificate: %d %s", rec.Code, rec.Body)
	}
}

// TestStatusTLSServer runs the guarded API over real HTTPS with client
// certificates required: a client with the certificate gets answers and may
// POST; a client without one, or one not trusting the server's CA, fails.
func TestStatusTLSServer(t *testing.T) {
	files := tlstest.Generate(t, tlstest.Options{})
	tlsCfg, err := StatusTLSConfig(files.ServerCert, files.ServerKey, files.CA)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: guarded(t), TLSConfig: tlsCfg, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("ServeTLS: %v", err)
		}
	})
	base := "https://" + ln.Addr().String()

	caPEM, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	clientCert, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	client := func(certs []tls.Certificate, roots *x509.CertPool) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}}
	}

	good := client([]tls.Certificate{clientCert}, roots)
	resp, err := good.Get(base + "/api/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with client certificate: %d", resp.StatusCode)
	}
	resp, err = good.Post(base+"/api/v1/relay/purge", "application/json", bytes.NewReader([]byte(`{"inactive":true}`)))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusConflict { // reached the handler: not bound
		t.Fatalf("POST with client certificate: %d", resp.StatusCode)
	}

	if _, err := client(nil, roots).Get(base + "/api/v1/status"); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if _, err := client([]tls.Certificate{clientCert}, x509.NewCertPool()).Get(base + "/healthz"); err == nil {
		t.Fatal("a client that does not trust the server's CA connected")
	}

	// Config errors name the file.
	if _, err := StatusTLSConfig(files.ServerCert, files.ServerKey, files.Dir+"/missing.pem"); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("missing client CA: %v", err)
	}
	if _, err := StatusTLSConfig(files.ServerCert, files.ServerCert, ""); err == nil || !strings.Contains(err.Error(), "--status-tls-key") {
		t.Fatalf("bad key: %v", err)
	}
	if _, err := StatusTLSConfig(files.ServerCert, files.ServerKey, files.ServerKey); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("CA file without certificate: %v", err)
	}
}

// TestDecodeBodyTooLarge: the API handler itself answers 413 for a body over
// the limit, also without the guard.
func TestDecodeBodyTooLarge(t *testing.T) {
	h := (&Server{}).Handler(prometheus.NewRegistry())
	body := `{"filename":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	rec := request(h, http.MethodPost, "/api/v1/relay/purge", "127.0.0.1:1", io.MultiReader(strings.NewReader(body)), -1)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", rec.Code)
	}
	if code, _ := apiErrorOf(t, rec); code != CodeRequestTooLarge {
		t.Fatalf("code %q", code)
	}
}
