package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"net/http"
	"slices"
	"sync"

	"github.com/spotwise/spotwise/job"
)

// openapiTemplate is the API's OpenAPI 3.1 document but for the job
// spec's schema, which job.Schema gives (so the two cannot differ).
//
//go:embed openapi.json
var openapiTemplate []byte

// OpenAPI returns the API's OpenAPI 3.1 document, served at
// GET /v1/openapi.json: every route, its parameters, bodies and
// responses, the error shape and the bearer scheme, with the job spec's
// JSON Schema as components.schemas.JobSpec (the body of POST /v1/jobs).
//
// It is served without a token, like /healthz: it describes the API and
// holds no data, and editors and client generators fetch it without one.
func OpenAPI() []byte { return bytes.Clone(openapiDoc()) }

var openapiDoc = sync.OnceValue(func() []byte {
	var doc map[string]any
	if err := json.Unmarshal(openapiTemplate, &doc); err != nil {
		panic("api: openapi.json: " + err.Error())
	}
	var spec map[string]any
	if err := json.Unmarshal(job.Schema(), &spec); err != nil {
		panic("api: job.Schema: " + err.Error())
	}
	// The document's dialect is already draft 2020-12, and an $id would
	// make the schema a resource of its own, with its own base URI.
	delete(spec, "$schema")
	delete(spec, "$id")
	doc["components"].(map[string]any)["schemas"].(map[string]any)["JobSpec"] = spec
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic("api: openapi document: " + err.Error())
	}
	return append(b, '\n')
})

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapiDoc())
}

// router is the API's handler: the routes it serves, behind
// authentication. It remembers the patterns it was given, so that tests
// can hold the API document against what is really served.
type router struct {
	http.Handler
	patterns []string
}

// Routes lists the ServeMux patterns of a handler Handler returned ("/v1/jobs",
// "/v1/jobs/{id}", "GET /v1/status", "/v1/sim/"), sorted; nil for any
// other handler.
func Routes(h http.Handler) []string {
	r, ok := h.(*router)
	if !ok {
		return nil
	}
	return slices.Sorted(slices.Values(r.patterns))
}
