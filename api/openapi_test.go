package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/scheduler"
)

func TestOpenAPIDocumentIsValidOpenAPI31(t *testing.T) {
	doc, err := libopenapi.NewDocument(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Errorf("OpenAPI version %q", v)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("building a validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s: %s", e.Message, e.Reason)
		}
	}
}

// The spec's schema in the document is job.Schema, whole.
func TestOpenAPIEmbedsTheJobSpecSchema(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var inDoc, spec map[string]any
	if err := json.Unmarshal(doc.Components.Schemas["JobSpec"], &inDoc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(job.Schema(), &spec); err != nil {
		t.Fatal(err)
	}
	delete(spec, "$schema")
	delete(spec, "$id")
	if !reflect.DeepEqual(inDoc, spec) {
		t.Error("components.schemas.JobSpec is not job.Schema()")
	}
}

// Every schema of a response lists every field its Go type sends, and as
// required exactly those always sent: a field added to JobView that the
// document does not know fails here, before a client meets it.
func TestOpenAPISchemasHaveEveryFieldOfTheirType(t *testing.T) {
	for name, typ := range map[string]reflect.Type{
		"JobView":        reflect.TypeFor[api.JobView](),
		"Summary":        reflect.TypeFor[api.Summary](),
		"JobList":        reflect.TypeFor[api.JobList](),
		"Estimate":       reflect.TypeFor[api.Estimate](),
		"EventView":      reflect.TypeFor[api.EventView](),
		"StreamJob":      reflect.TypeFor[api.StreamJob](),
		"StreamEnd":      reflect.TypeFor[api.StreamEnd](),
		"StreamGap":      reflect.TypeFor[api.StreamGap](),
		"LogLine":        reflect.TypeFor[api.LogLineView](),
		"LogPage":        reflect.TypeFor[api.LogPage](),
		"Error":          reflect.TypeFor[api.Error](),
		"FieldError":     reflect.TypeFor[job.FieldError](),
		"Placement":      reflect.TypeFor[job.Placement](),
		"Attempt":        reflect.TypeFor[job.Attempt](),
		"Span":           reflect.TypeFor[job.Span](),
		"Notice":         reflect.TypeFor[job.Notice](),
		"PendingReason":  reflect.TypeFor[job.PendingReason](),
		"CheckpointRef":  reflect.TypeFor[job.CheckpointRef](),
		"TokenRequest":   reflect.TypeFor[api.TokenRequest](),
		"CreatedToken":   reflect.TypeFor[api.CreatedToken](),
		"TokenList":      reflect.TypeFor[api.TokenList](),
		"Token":          reflect.TypeFor[auth.Token](),
		"AuditList":      reflect.TypeFor[api.AuditList](),
		"AuditEntry":     reflect.TypeFor[events.AuditEntry](),
		"AuditRecord":    reflect.TypeFor[events.AuditRecord](),
		"Instance":       reflect.TypeFor[providers.Instance](),
		"SchedulerStats": reflect.TypeFor[scheduler.Stats](),
	} {
		t.Run(name, func(t *testing.T) { checkSchemaFields(t, api.OpenAPI(), name, typ) })
	}
}

// checkSchemaFields checks that components.schemas[name] of an OpenAPI
// document has a property for every JSON field of typ, and requires
// exactly the fields always sent (no omitempty or omitzero).
func checkSchemaFields(t *testing.T, doc []byte, name string, typ reflect.Type) {
	t.Helper()
	var d struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
				Required   []string       `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	s, ok := d.Components.Schemas[name]
	if !ok {
		t.Fatalf("no schema %s", name)
	}
	var fields, always []string
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		jname, opts, _ := strings.Cut(tag, ",")
		if !f.IsExported() || jname == "-" {
			continue
		}
		if jname == "" {
			jname = f.Name
		}
		fields = append(fields, jname)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			always = append(always, jname)
		}
	}
	props := make([]string, 0, len(s.Properties))
	for p := range s.Properties {
		props = append(props, p)
	}
	slices.Sort(fields)
	slices.Sort(props)
	if !slices.Equal(fields, props) {
		t.Errorf("%s's fields: %v\nthe schema's properties: %v", typ, fields, props)
	}
	slices.Sort(always)
	slices.Sort(s.Required)
	if !slices.Equal(always, s.Required) {
		t.Errorf("%s always sends %v\nthe schema requires %v", typ, always, s.Required)
	}
}

func TestOpenAPIIsServedWithoutAToken(t *testing.T) {
	e := newEnv(t)
	res := e.do(http.MethodGet, "/v1/openapi.json", nil, map[string]string{"Authorization": ""})
	if res.status != http.StatusOK || !bytes.Equal(res.body, api.OpenAPI()) {
		t.Fatalf("GET /v1/openapi.json: %d %.200s", res.status, res.body)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if res := e.do(http.MethodPost, "/v1/openapi.json", nil, nil); res.status != http.StatusMethodNotAllowed || res.header.Get("Allow") != "GET" {
		t.Errorf("POST /v1/openapi.json: %d (Allow %q), want 405 with Allow: GET", res.status, res.header.Get("Allow"))
	}
}
