package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/validate"
)

// maxBodyBytes bounds request bodies; every request body here is small.
const maxBodyBytes = 1 << 20

// APIError is an error the HTTP API answers with: a status and a stable
// code. Units return it (wrapped or not) to choose the answer.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string { return e.Message }

// PurgeRequest is the body of POST /api/v1/relay/purge; exactly one field
// is set.
type PurgeRequest struct {
	Inactive bool       `json:"inactive,omitempty"`
	Filename string     `json:"filename,omitempty"`
	Time     *time.Time `json:"time,omitempty"`
}

// ValidationErrorsRequest is the body of POST .../validation/errors.
type ValidationErrorsRequest struct {
	Op  string `json:"op"`
	ID  *int64 `json:"id,omitempty"`
	All bool   `json:"all,omitempty"`
}

// ValidationErrorHandler is implemented by validators that keep validation
// errors an operator can list and ignore/resolve/clear, whether or not
// they run.
type ValidationErrorHandler interface {
	ValidationErrors(ctx context.Context, state string) (any, error)
	// OperateValidationErrors applies op to error id, or to every error
	// when all is set, and returns how many errors changed.
	OperateValidationErrors(ctx context.Context, op string, id int64, all bool) (int64, error)
}

// route is one endpoint of the API: its ServeMux pattern, the methods it
// answers (others get a JSON 405) and its handler. docs/openapi.yaml
// documents exactly these routes (a test compares them).
type route struct {
	pattern string
	methods []string
	handler http.HandlerFunc
}

// routes returns every endpoint of the API (DESIGN.md §6); metrics come
// from gatherer.
func (s *Server) routes(gatherer prometheus.Gatherer) []route {
	get, post := []string{http.MethodGet}, []string{http.MethodPost}
	return []route{
		{"/healthz", get, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "ok")
		}},
		{"/metrics", get, promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}).ServeHTTP},
		{"/debug/pprof/", get, pprof.Index},
		{"/debug/pprof/cmdline", get, pprof.Cmdline},
		{"/debug/pprof/profile", get, pprof.Profile},
		// go tool pprof posts the addresses to symbolize.
		{"/debug/pprof/symbol", []string{http.MethodGet, http.MethodPost}, pprof.Symbol},
		{"/debug/pprof/trace", get, pprof.Trace},
		{"/api/v1/openapi.yaml", get, serveOpenAPI},
		{"/api/v1/status", get, func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, s.Status())
		}},
		{"/api/v1/subtasks/{task}", get, func(w http.ResponseWriter, r *http.Request) {
			name := r.PathValue("task")
			for _, st := range s.Status().SubTasks {
				if st.Name == name {
					writeJSON(w, http.StatusOK, st)
					return
				}
			}
			writeError(w, subtaskNotFound(name))
		}},
		{"/api/v1/streams/{stream}", get, func(w http.ResponseWriter, r *http.Request) {
			name := r.PathValue("stream")
			for _, st := range s.Status().Streams {
				if st.Name == name {
					writeJSON(w, http.StatusOK, st)
					return
				}
			}
			writeError(w, &APIError{http.StatusNotFound, CodeStreamNotFound,
				fmt.Sprintf("stream %q not found on worker %q", name, s.cfg.Name)})
		}},
		{"/api/v1/relay/purge", post, s.handlePurge},
		{"/api/v1/subtasks/{task}/handle-error", post, s.handleHandleError},
		{"/api/v1/subtasks/{task}/validation/errors", []string{http.MethodGet, http.MethodPost}, s.handleValidationErrors},
	}
}

// Handler returns the worker's HTTP API (DESIGN.md §6); metrics come from
// gatherer.
func (s *Server) Handler(gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.routes(gatherer) {
		mux.HandleFunc(r.pattern, method(r.methods, r.handler))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &APIError{http.StatusNotFound, CodeNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

func (s *Server) handlePurge(w http.ResponseWriter, r *http.Request) {
	var req PurgeRequest
	if !decodeBody(w, r, &req) {
		return
	}
	set := 0
	if req.Inactive {
		set++
	}
	if req.Filename != "" {
		set++
	}
	if req.Time != nil {
		set++
	}
	if set != 1 {
		writeError(w, &APIError{http.StatusBadRequest, CodeBadRequest,
			`purge needs exactly one of {"inactive":true}, {"filename":"<relay binlog file>"} or {"time":"<RFC 3339>"}`})
		return
	}
	sw := s.SourceWorker()
	if sw == nil {
		writeError(w, &APIError{http.StatusConflict, CodeNotBound, fmt.Sprintf("worker %q is bound to no source; nothing to purge", s.cfg.Name)})
		return
	}
	relay := sw.Relay()
	if relay == nil {
		writeError(w, &APIError{http.StatusConflict, CodeRelayNotEnabled,
			fmt.Sprintf("relay of source %q is not running on worker %q; nothing to purge", sw.Source(), s.cfg.Name)})
		return
	}
	purged, err := relay.Purge(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	if purged == nil {
		purged = []string{}
	}
	writeJSON(w, http.StatusOK, map[string][]string{"purged": purged})
}

func (s *Server) handleHandleError(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("task")
	var req unit.HandleErrorRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Op != unit.HandleErrorSkip && req.Op != unit.HandleErrorReplace {
		writeError(w, &APIError{http.StatusBadRequest, CodeBadRequest, fmt.Sprintf(`op %q: use "skip" or "replace"`, req.Op)})
		return
	}
	if req.Op == unit.HandleErrorReplace && len(req.SQLs) == 0 {
		writeError(w, &APIError{http.StatusBadRequest, CodeBadRequest, `op "replace" needs "sqls": the statements to run instead`})
		return
	}
	st := s.subTask(name)
	if st == nil {
		writeError(w, subtaskNotFound(name))
		return
	}
	h, ok := st.Unit().(unit.ErrorHandler)
	if !ok {
		writeError(w, &APIError{http.StatusConflict, CodeHandleErrorUnsupported,
			fmt.Sprintf("subtask %q is in unit %q, which is not stuck on a binlog event; handle-error applies to the sync unit", name, st.CurrentUnit())})
		return
	}
	if err := h.HandleError(r.Context(), req); err != nil {
		// The unit refuses this request in its current state (nothing is
		// stuck, a position it is not at): a conflict, not a server fault.
		writeError(w, &APIError{http.StatusConflict, CodeHandleErrorUnsupported, fmt.Sprintf("subtask %q: %v", name, err)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
}

func (s *Server) handleValidationErrors(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("task")
	var req ValidationErrorsRequest
	state := r.URL.Query().Get("state")
	if r.Method == http.MethodGet {
		if state == "" {
			state = "all"
		}
		if state != "new" && state != "ignored" && state != "resolved" && state != "all" {
			writeError(w, &APIError{http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("state %q: use new, ignored, resolved or all", state)})
			return
		}
	} else {
		if !decodeBody(w, r, &req) {
			return
		}
		if req.Op != "ignore" && req.Op != "resolve" && req.Op != "clear" {
			writeError(w, &APIError{http.StatusBadRequest, CodeBadRequest, fmt.Sprintf(`op %q: use "ignore", "resolve" or "clear"`, req.Op)})
			return
		}
		if (req.ID == nil) == !req.All {
			writeError(w, &APIError{http.StatusBadRequest, CodeBadRequest, `give exactly one of "id":N or "all":true`})
			return
		}
	}
	st := s.subTask(name)
	if st == nil {
		writeError(w, subtaskNotFound(name))
		return
	}
	v, ok := st.ValidationErrorHandler().(ValidationErrorHandler)
	if !ok {
		writeError(w, &APIError{http.StatusConflict, CodeValidatorNotRunning,
			fmt.Sprintf("subtask %q has no validator in this build", name)})
		return
	}
	if r.Method == http.MethodGet {
		out, err := v.ValidationErrors(r.Context(), state)
		if err != nil {
			writeError(w, validationAPIError(err))
			return
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	var id int64
	if req.ID != nil {
		id = *req.ID
	}
	n, err := v.OperateValidationErrors(r.Context(), req.Op, id, req.All)
	if err != nil {
		writeError(w, validationAPIError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": "ok", "changed": n})
}

// validationAPIError maps a validator's error to its HTTP status: an
// unknown error id is 404, a bad request 400, the target unreachable 503.
func validationAPIError(err error) error {
	switch code := errs.Code(err); {
	case code == validate.CodeErrorNotFound:
		return &APIError{http.StatusNotFound, CodeValidationErrNotFound, err.Error()}
	case code == validate.CodeBadOp:
		return &APIError{http.StatusBadRequest, CodeBadRequest, err.Error()}
	case errs.IsResumable(err):
		return &APIError{http.StatusServiceUnavailable, CodeTargetUnavailable, err.Error()}
	}
	return &APIError{http.StatusInternalServerError, errs.CodeInternal, err.Error()}
}

func (s *Server) subTask(name string) *SubTask {
	sw := s.SourceWorker()
	if sw == nil {
		return nil
	}
	return sw.SubTask(name)
}

func subtaskNotFound(name string) *APIError {
	if config.ValidateName("task", name) != nil {
		return &APIError{http.StatusNotFound, CodeSubTaskNotFound, fmt.Sprintf("subtask %q not found: not a valid task name", name)}
	}
	return &APIError{http.StatusNotFound, CodeSubTaskNotFound, fmt.Sprintf("subtask %q not found on this worker", name)}
}

// method wraps h so that methods other than ms get a JSON 405.
func method(ms []string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(ms, r.Method) {
			allow := strings.Join(ms, ", ")
			w.Header().Set("Allow", allow)
			writeError(w, &APIError{http.StatusMethodNotAllowed, CodeMethodNotAllowed, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, allow)})
			return
		}
		h(w, r)
	}
}

// decodeBody reads a JSON body into v, answering 400 and returning false
// when it is not valid JSON of that shape.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeError(w, tooLarge(r))
			return false
		}
		writeError(w, &APIError{http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("request body: %v", err)})
		return false
	}
	// dec.More would let a stray ']' or '}' after the value through.
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, &APIError{http.StatusBadRequest, CodeBadRequest, "request body: text after the JSON value (one JSON object per request)"})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // the client went away; nothing to do
}

func writeError(w http.ResponseWriter, err error) {
	var ae *APIError
	if !errors.As(err, &ae) {
		ae = &APIError{http.StatusInternalServerError, errs.CodeInternal, err.Error()}
	}
	writeJSON(w, ae.Status, map[string]any{"error": map[string]string{"code": ae.Code, "message": ae.Message}})
}

// Logged wraps h with request logging at debug level.
func Logged(h http.Handler, logger *zap.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		logger.Debug("http request", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Duration("took", time.Since(start)))
	})
}
