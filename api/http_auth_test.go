package api_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/job"
)

func wantCode(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
		t.Errorf("%s: %v, want %d %s", what, err, status, code)
	}
}

func TestEveryEndpointButHealthNeedsAToken(t *testing.T) {
	e := newEnv(t)
	id := e.submit(spec())
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/jobs"}, {http.MethodPost, "/v1/jobs"}, {http.MethodGet, "/v1/jobs/" + id},
		{http.MethodDelete, "/v1/jobs/" + id}, {http.MethodGet, "/v1/tokens"}, {http.MethodPost, "/v1/tokens"},
		{http.MethodDelete, "/v1/tokens/aaaaaaaaaaaaaaaa"}, {http.MethodGet, "/v1/nope"},
		{http.MethodGet, "/v1/costs"}, {http.MethodGet, "/v1/market"}, {http.MethodGet, "/v1/market/prices?key=x"}, {http.MethodGet, "/v1/alerts"},
	} {
		for name, hdr := range map[string]string{"no token": "", "a made-up token": "Bearer spw_aaaaaaaaaaaaaaaa_bbbb", "basic auth": "Basic dXNlcjpwYXNz"} {
			res := e.do(r.method, r.path, spec().YAML(), map[string]string{"Authorization": hdr})
			if res.status != http.StatusUnauthorized || res.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with %s: %d %s, want 401 with WWW-Authenticate", r.method, r.path, name, res.status, res.body)
			}
		}
	}
	if res := e.do(http.MethodGet, "/healthz", nil, map[string]string{"Authorization": ""}); res.status != http.StatusOK {
		t.Errorf("/healthz without a token: %d", res.status)
	}
	// The server's address leads a person to the dashboard's sign-in,
	// which holds no data.
	if res := e.do(http.MethodGet, "/", nil, map[string]string{"Authorization": ""}); res.status != http.StatusFound || res.header.Get("Location") != "/ui/" {
		t.Errorf("/ without a token: %d to %q, want 302 to /ui/", res.status, res.header.Get("Location"))
	}
	// Nothing was cancelled or submitted by all that.
	if v, err := e.client.Get(t.Context(), id); err != nil || v.State != job.Queued {
		t.Errorf("job after unauthenticated calls: %+v %v", v, err)
	}
	if keys := e.storedKeys(); len(keys) != 1 {
		t.Errorf("%d jobs stored, want 1", len(keys))
	}
}

func TestTeamsSeeOnlyTheirJobs(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	nlp := e.as("nlp", auth.Submitter)
	cv := e.as("cv", auth.Submitter)
	cvViewer := e.as("cv", auth.Viewer)
	platform := e.as("", auth.Viewer)

	// A spec with no team is the submitter's team's.
	v, _, err := nlp.Submit(ctx, spec().Team("").Set("secret_env", map[string]string{"HF_TOKEN": "hf_abc123"}).
		Set("env", map[string]string{"MODE": "train"}).YAML(), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if v.Team != "nlp" {
		t.Fatalf("submitted for team %q, want nlp", v.Team)
	}
	if _, _, err := nlp.Submit(ctx, spec().Team("cv").YAML(), "application/yaml", ""); err == nil {
		t.Error("team nlp submitted a job for team cv")
	} else {
		wantCode(t, "submit for another team", err, http.StatusForbidden, api.CodeForbidden)
	}
	cvJob, _, err := cv.Submit(ctx, spec().Team("").Name("cv-job").YAML(), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}

	// Team cv does not see nlp's job: not found, as if it did not exist.
	_, err = cv.Get(ctx, v.ID)
	wantCode(t, "cv reads nlp's job", err, http.StatusNotFound, api.CodeNotFound)
	_, err = cv.Cancel(ctx, v.ID, "hostile")
	wantCode(t, "cv cancels nlp's job", err, http.StatusNotFound, api.CodeNotFound)
	if l, err := cv.List(ctx, api.Query{}); err != nil || len(l.Jobs) != 1 || l.Jobs[0].ID != cvJob.ID {
		t.Errorf("cv lists: %+v %v, want only its own job", l, err)
	}
	if l, err := cv.List(ctx, api.Query{Team: "nlp"}); err != nil || len(l.Jobs) != 0 {
		t.Errorf("cv lists nlp's jobs: %+v %v, want none", l, err)
	}
	// A viewer reads but does not submit or cancel.
	if _, err := cvViewer.Get(ctx, cvJob.ID); err != nil {
		t.Errorf("cv viewer reads its team's job: %v", err)
	}
	_, _, err = cvViewer.Submit(ctx, spec().Team("").YAML(), "application/yaml", "")
	wantCode(t, "a viewer submits", err, http.StatusForbidden, api.CodeForbidden)
	_, err = cvViewer.Cancel(ctx, cvJob.ID, "")
	wantCode(t, "a viewer cancels", err, http.StatusForbidden, api.CodeForbidden)
	// A platform viewer sees every team's jobs.
	if l, err := platform.List(ctx, api.Query{}); err != nil || len(l.Jobs) != 2 {
		t.Errorf("platform viewer lists %+v %v, want both jobs", l, err)
	}

	// The secret's value is never returned, to anyone; its name is.
	for who, c := range map[string]*api.Client{"its team": nlp, "the operator": e.client, "a platform viewer": platform} {
		got, err := c.Get(ctx, v.ID)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if got.Spec.SecretEnv["HF_TOKEN"] != api.Withheld || got.Spec.Env["MODE"] != "train" {
			t.Errorf("%s sees secret_env %v, env %v", who, got.Spec.SecretEnv, got.Spec.Env)
		}
		raw := e.do(http.MethodGet, "/v1/jobs/"+v.ID, nil, map[string]string{"Authorization": "Bearer " + c.Token})
		if strings.Contains(string(raw.body), "hf_abc123") {
			t.Errorf("%s: the secret is in the answer", who)
		}
	}
	// Cancelled by its team, and the history says by whom.
	got, err := nlp.Cancel(ctx, v.ID, "done with it")
	if err != nil || got.State != job.Cancelled || !strings.Contains(got.Message, "by token:") {
		t.Errorf("nlp cancels its job: %+v %v", got, err)
	}
}

func TestTokensEndExpireAndStayInTheirTeam(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	admin := e.as("nlp", auth.Admin)

	// An admin makes tokens for its own team, up to admin.
	made, err := admin.CreateToken(ctx, api.TokenRequest{Role: auth.Submitter, Name: "ci", TTL: job.Duration(time.Hour)})
	if err != nil || made.Info.Team != "nlp" || made.Info.Role != auth.Submitter || !strings.HasPrefix(made.Token, "spw_") {
		t.Fatalf("admin creates a token: %+v %v", made, err)
	}
	for _, bad := range []api.TokenRequest{{Team: "cv", Role: auth.Viewer}, {Role: auth.Operator}} {
		_, err := admin.CreateToken(ctx, bad)
		wantCode(t, "admin creates "+string(bad.Role)+" of "+bad.Team, err, http.StatusForbidden, api.CodeForbidden)
	}
	sub := api.NewClient(e.srv.URL)
	sub.Token = made.Token
	if _, err := sub.CreateToken(ctx, api.TokenRequest{Role: auth.Viewer}); err == nil {
		t.Error("a submitter created a token")
	}
	if _, _, err := sub.Submit(ctx, spec().Team("").YAML(), "application/yaml", ""); err != nil {
		t.Fatalf("the new token submits: %v", err)
	}
	l, err := admin.ListTokens(ctx, "")
	if err != nil || len(l.Tokens) != 2 {
		t.Fatalf("admin lists %+v %v", l, err)
	}
	for _, tok := range l.Tokens {
		if tok.Hash != "" || tok.Team != "nlp" {
			t.Errorf("listed %+v", tok)
		}
	}
	if _, err := e.as("cv", auth.Admin).ListTokens(ctx, "nlp"); err == nil {
		t.Error("cv's admin listed nlp's tokens")
	}
	// cv's admin cannot tell that nlp's token exists.
	_, err = e.as("cv", auth.Admin).RevokeToken(ctx, made.Info.ID)
	wantCode(t, "cv revokes nlp's token", err, http.StatusNotFound, api.CodeNotFound)

	// Expired (the clock is the server's wall clock, faked here).
	e.clk.Advance(time.Hour)
	_, err = sub.List(ctx, api.Query{})
	wantCode(t, "expired token", err, http.StatusUnauthorized, api.CodeUnauthenticated)
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token error %v does not say so", err)
	}

	// Revoked: at once.
	other, err := admin.CreateToken(ctx, api.TokenRequest{Role: auth.Viewer})
	if err != nil {
		t.Fatal(err)
	}
	viewer := api.NewClient(e.srv.URL)
	viewer.Token = other.Token
	if _, err := viewer.List(ctx, api.Query{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RevokeToken(ctx, other.Info.ID); err != nil {
		t.Fatal(err)
	}
	_, err = viewer.List(ctx, api.Query{})
	wantCode(t, "revoked token", err, http.StatusUnauthorized, api.CodeUnauthenticated)
}
