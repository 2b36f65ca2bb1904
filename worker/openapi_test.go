package worker

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit"
)

// openAPIDoc is the part of an OpenAPI document the tests read.
type openAPIDoc struct {
	OpenAPI    string                                 `json:"openapi"`
	Paths      map[string]map[string]any              `json:"paths"`
	Components struct{ Schemas map[string]apiSchema } `json:"components"`
}

type apiSchema struct {
	Type       string         `json:"type"`
	Required   []string       `json:"required"`
	Properties map[string]any `json:"properties"`
	Enum       []string       `json:"enum"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("worker/openapi.yaml is not valid YAML of an OpenAPI document: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Fatalf("openapi: %q, want 3.0.x", doc.OpenAPI)
	}
	return doc
}

// TestOpenAPIDocsCopy keeps docs/openapi.yaml identical to the embedded
// worker/openapi.yaml, the one source.
func TestOpenAPIDocsCopy(t *testing.T) {
	docs, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, openAPI) {
		t.Fatal("docs/openapi.yaml differs from worker/openapi.yaml (the source, embedded in the worker); " +
			"edit worker/openapi.yaml and run: cp worker/openapi.yaml docs/openapi.yaml")
	}
}

// httpMethods are the operation keys of an OpenAPI path item.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPIMatchesRoutes checks that the document has exactly the routes
// of the route table, with the same methods.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	code := make(map[string][]string)
	for _, r := range (&Server{}).routes(prometheus.NewRegistry()) {
		if _, dup := code[r.pattern]; dup {
			t.Errorf("route %s is registered twice", r.pattern)
		}
		ms := make([]string, 0, len(r.methods))
		for _, m := range r.methods {
			ms = append(ms, strings.ToLower(m))
		}
		slices.Sort(ms)
		code[r.pattern] = ms
	}
	documented := make(map[string][]string)
	for path, item := range doc.Paths {
		var ms []string
		for k := range item {
			if slices.Contains(httpMethods, k) {
				ms = append(ms, k)
			}
		}
		slices.Sort(ms)
		documented[path] = ms
	}
	for _, p := range slices.Sorted(maps.Keys(code)) {
		if got, ok := documented[p]; !ok {
			t.Errorf("route %s %v is not in openapi.yaml", p, code[p])
		} else if !slices.Equal(got, code[p]) {
			t.Errorf("route %s: openapi.yaml documents methods %v, the handler answers %v", p, got, code[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := code[p]; !ok {
			t.Errorf("openapi.yaml documents %s, which the worker does not serve", p)
		}
	}
}

// TestOpenAPISchemasMatchStructs checks that each schema's properties are
// the JSON fields of its Go struct, and that the fields without omitempty
// are the required ones.
func TestOpenAPISchemasMatchStructs(t *testing.T) {
	doc := loadOpenAPI(t)
	cases := map[string]reflect.Type{
		"WorkerStatus":            reflect.TypeFor[WorkerStatus](),
		"SubTaskStatus":           reflect.TypeFor[SubTaskStatus](),
		"TargetConnections":       reflect.TypeFor[dbconn.TargetConnections](),
		"SourceConnections":       reflect.TypeFor[dbconn.SourceConnections](),
		"RelayStatus":             reflect.TypeFor[RelayStatus](),
		"ValidatorStatus":         reflect.TypeFor[ValidatorStatus](),
		"ValidationErrorCounts":   reflect.TypeFor[unit.ValidationErrorCounts](),
		"StatusError":             reflect.TypeFor[errs.Error](),
		"TaskError":               reflect.TypeFor[TaskError](),
		"PurgeRequest":            reflect.TypeFor[PurgeRequest](),
		"HandleErrorRequest":      reflect.TypeFor[unit.HandleErrorRequest](),
		"ValidationErrorsRequest": reflect.TypeFor[ValidationErrorsRequest](),
	}
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s is missing from openapi.yaml", name)
			continue
		}
		all, required := jsonFields(cases[name])
		if got := slices.Sorted(maps.Keys(s.Properties)); !slices.Equal(got, all) {
			t.Errorf("schema %s has properties %v; the Go struct %s has JSON fields %v", name, got, cases[name], all)
		}
		if got := slices.Sorted(slices.Values(s.Required)); !slices.Equal(got, required) {
			t.Errorf("schema %s requires %v; the Go struct %s always writes %v", name, got, cases[name], required)
		}
	}
}

// jsonFields returns the JSON names of t's fields (embedded structs
// flattened) and those without omitempty, both sorted.
func jsonFields(t reflect.Type) (all, required []string) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			a, r := jsonFields(f.Type)
			all, required = append(all, a...), append(required, r...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			required = append(required, name)
		}
	}
	slices.Sort(all)
	slices.Sort(required)
	return all, required
}

// The HTTP API's error codes are the const group of codes.go whose doc
// starts with apiCodeGroup, and errs.CodeInternal.
const (
	apiCodeFile  = "codes.go"
	apiCodeGroup = "Stable error codes of the HTTP API"
)

// TestOpenAPIErrorCodes checks that the document's ErrorCode enum is
// exactly the error codes of the API.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	enum := doc.Components.Schemas["ErrorCode"].Enum
	codes := append(codeConstants(t, apiCodeFile, apiCodeGroup), errs.CodeInternal)
	if !slices.Contains(enum, errs.CodeInternal) {
		t.Errorf("error code %q (errs.CodeInternal) is not in openapi.yaml's ErrorCode enum", errs.CodeInternal)
	}
	for _, e := range enum {
		if !slices.Contains(codes, e) {
			t.Errorf("openapi.yaml's ErrorCode %q is not a Code* constant of the group %q in %s", e, apiCodeGroup, apiCodeFile)
		}
	}
}

// codeConstants returns the values of the Code* string constants of the
// const group of a file of this package whose doc comment starts with
// group, failing the test for each missing from the document's ErrorCode
// enum.
func codeConstants(t *testing.T, file, group string) []string {
	t.Helper()
	enum := loadOpenAPI(t).Components.Schemas["ErrorCode"].Enum
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(node ast.Node) bool {
		if gd, ok := node.(*ast.GenDecl); ok {
			return gd.Doc != nil && strings.HasPrefix(gd.Doc.Text(), group)
		}
		vs, ok := node.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, id := range vs.Names {
			if !strings.HasPrefix(id.Name, "Code") || i >= len(vs.Values) {
				continue
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			code, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, code)
			if !slices.Contains(enum, code) {
				t.Errorf("error code %s = %q (%s) is not in openapi.yaml's ErrorCode enum", id.Name, code, file)
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatalf("found no Code* constants in the group %q of %s", group, file)
	}
	return out
}

// TestOpenAPIServed checks GET /api/v1/openapi.yaml.
func TestOpenAPIServed(t *testing.T) {
	h := (&Server{}).Handler(prometheus.NewRegistry())
	rec := serve(h, http.MethodGet, "/api/v1/openapi.yaml", "")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/yaml" || !bytes.Equal(rec.Body.Bytes(), openAPI) {
		t.Errorf("GET /api/v1/openapi.yaml: %d %q, %d bytes (want 200 application/yaml, the embedded document)",
			rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
	}
	rec = serve(h, http.MethodPost, "/api/v1/openapi.yaml", "")
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != http.MethodGet {
		t.Errorf("POST /api/v1/openapi.yaml: %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

// TestOpenAPIRefsResolve checks that every $ref names a component the
// document defines, and that every path parameter is declared.
func TestOpenAPIRefsResolve(t *testing.T) {
	var doc map[string]any
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	components, _ := doc["components"].(map[string]any)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if k == "$ref" {
					ref, _ := c.(string)
					parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
					kind, _ := components[parts[0]].(map[string]any)
					if len(parts) != 2 || !strings.HasPrefix(ref, "#/components/") || kind[parts[1]] == nil {
						t.Errorf("%s: $ref %q names no component", path, ref)
					}
					continue
				}
				walk(path+"/"+k, c)
			}
		case []any:
			for i, c := range v {
				walk(path+"/"+strconv.Itoa(i), c)
			}
		}
	}
	walk("", doc)

	// Path parameters: declared on the path item or an operation, directly
	// or through #/components/parameters.
	params, _ := components["parameters"].(map[string]any)
	declared := func(list any) []string {
		var names []string
		items, _ := list.([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			if ref, ok := m["$ref"].(string); ok {
				m, _ = params[strings.TrimPrefix(ref, "#/components/parameters/")].(map[string]any)
			}
			if m["in"] == "path" {
				names = append(names, m["name"].(string))
			}
		}
		return names
	}
	paths, _ := doc["paths"].(map[string]any)
	for p, v := range paths {
		item, _ := v.(map[string]any)
		for op, ov := range item {
			if !slices.Contains(httpMethods, op) {
				continue
			}
			o, _ := ov.(map[string]any)
			names := append(declared(item["parameters"]), declared(o["parameters"])...)
			for _, seg := range strings.Split(p, "/") {
				if name, ok := strings.CutPrefix(seg, "{"); ok && !slices.Contains(names, strings.TrimSuffix(name, "}")) {
					t.Errorf("%s %s: path parameter %s is not declared", op, p, seg)
				}
			}
		}
	}
}
