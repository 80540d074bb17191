package api_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/job"
)

func TestClientErrors(t *testing.T) {
	e := newEnv(t)
	done := e.submit(spec())
	e.setRecord(done, func(r *job.Record) { r.Status.State = job.Succeeded })
	cases := []struct {
		name       string
		call       func() error
		wantStatus int
		wantCode   string
		wantFields []string
	}{
		{"submit invalid spec", func() error {
			_, _, err := e.client.Submit(t.Context(), spec().Set("resources", map[string]any{"gpus_per_node": 0}).Set("command", nil).YAML(), "application/yaml", "")
			return err
		}, http.StatusBadRequest, api.CodeInvalidSpec, []string{"command", "resources.gpus_per_node"}},
		{"submit as a form", func() error {
			_, _, err := e.client.Submit(t.Context(), spec().YAML(), "multipart/form-data; boundary=x", "")
			return err
		}, http.StatusUnsupportedMediaType, api.CodeMediaType, nil},
		{"get unknown", func() error {
			_, err := e.client.Get(t.Context(), job.NewID(t0))
			return err
		}, http.StatusNotFound, api.CodeNotFound, nil},
		{"get an id with a slash", func() error {
			_, err := e.client.Get(t.Context(), "../../v1/jobs")
			return err
		}, http.StatusNotFound, api.CodeNotFound, nil},
		{"cancel finished", func() error {
			_, err := e.client.Cancel(t.Context(), done, "too late")
			return err
		}, http.StatusConflict, api.CodeAlreadyFinished, nil},
		{"list unknown state", func() error {
			_, err := e.client.List(t.Context(), api.Query{States: []job.State{"done"}})
			return err
		}, http.StatusBadRequest, api.CodeInvalidRequest, nil},
		{"list bad cursor", func() error {
			_, err := e.client.ListAll(t.Context(), api.Query{After: "nope"}, 0)
			return err
		}, http.StatusBadRequest, api.CodeInvalidRequest, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ae *api.Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T), want *api.Error", err, err)
			}
			if ae.Status != tc.wantStatus || ae.Code != tc.wantCode {
				t.Errorf("error %d %s, want %d %s", ae.Status, ae.Code, tc.wantStatus, tc.wantCode)
			}
			var fields []string
			for _, f := range ae.Fields {
				fields = append(fields, f.Field)
				if !strings.Contains(ae.Error(), f.Field+": ") {
					t.Errorf("Error() %q does not name %s", ae.Error(), f.Field)
				}
			}
			if strings.Join(fields, ",") != strings.Join(tc.wantFields, ",") {
				t.Errorf("fields %v, want %v", fields, tc.wantFields)
			}
		})
	}
}

func TestClientServerDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens here now
	c := api.NewClient(addr)
	calls := map[string]func() error{
		"submit": func() error { _, _, err := c.Submit(t.Context(), spec().YAML(), "application/yaml", ""); return err },
		"get":    func() error { _, err := c.Get(t.Context(), job.NewID(t0)); return err },
		"cancel": func() error { _, err := c.Cancel(t.Context(), job.NewID(t0), ""); return err },
		"list":   func() error { _, err := c.List(t.Context(), api.Query{}); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			if err == nil || !strings.Contains(err.Error(), "spotwise server") || !strings.Contains(err.Error(), addr) {
				t.Fatalf("error %v, want one naming the address and `spotwise server`", err)
			}
			var ae *api.Error
			if errors.As(err, &ae) {
				t.Errorf("a connection failure is reported as an API error %+v", ae)
			}
		})
	}
}

func TestClientNonJSONAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/jobs" {
			_, _ = w.Write([]byte("<html>proxy login</html>"))
			return
		}
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	defer srv.Close()
	c := api.NewClient(srv.URL + "/")
	_, err := c.Get(t.Context(), job.NewID(t0))
	if err == nil || !strings.Contains(err.Error(), "502") {
		t.Errorf("a non-JSON error page gives %v, want the HTTP status", err)
	}
	_, err = c.List(t.Context(), api.Query{})
	if err == nil || !strings.Contains(err.Error(), "reading server answer") {
		t.Errorf("a non-JSON success gives %v, want a read error", err)
	}
}

func TestNewClientAddress(t *testing.T) {
	cases := map[string]string{
		"127.0.0.1:8080":           "http://127.0.0.1:8080",
		"http://127.0.0.1:8080/":   "http://127.0.0.1:8080",
		"https://spotwise.example": "https://spotwise.example",
	}
	for in, want := range cases {
		if got := api.NewClient(in).Base; got != want {
			t.Errorf("NewClient(%q).Base = %q, want %q", in, got, want)
		}
	}
}

func TestClientRoundTrip(t *testing.T) {
	e := newEnv(t)
	v, created, err := e.client.Submit(t.Context(), spec().JSON(), "application/json", "round-trip")
	if err != nil || !created {
		t.Fatalf("submit: %v", err)
	}
	again, created, err := e.client.Submit(t.Context(), spec().JSON(), "application/json", "round-trip")
	if err != nil || created || again.ID != v.ID {
		t.Fatalf("retry: %+v created=%v %v", again, created, err)
	}
	got, err := e.client.Get(t.Context(), v.ID)
	if err != nil || got.ID != v.ID || got.Spec == nil || got.Spec.Work.ReferenceGPU != "V100" {
		t.Fatalf("get: %+v %v", got, err)
	}
	c, err := e.client.Cancel(t.Context(), v.ID, "reason with spaces & symbols?")
	if err != nil || c.State != job.Cancelled || !strings.HasSuffix(c.Message, "reason with spaces & symbols?") {
		t.Fatalf("cancel: %+v %v", c, err)
	}
}
