package worker

import (
	_ "embed" // the OpenAPI document
	"net/http"
)

// openAPI is the OpenAPI 3 document of this HTTP API. worker/openapi.yaml
// is the one source; docs/openapi.yaml is a copy that a test keeps
// identical, and another test checks the document against routes and the
// status structs.
//
//go:embed openapi.yaml
var openAPI []byte

// serveOpenAPI answers GET /api/v1/openapi.yaml.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(openAPI) // the client went away; nothing to do
}
