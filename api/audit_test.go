package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/internal/testutil"
)

// Every call that changes something is an audit record, allowed or
// refused: who, what of, from where, how it ended. A team's admin reads
// its team's, an operator everyone's.
func TestChangesAreAudited(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	nlp, cv := e.as("nlp", auth.Submitter), e.as("cv", auth.Submitter)
	v, _, err := nlp.Submit(ctx, spec().Team("").YAML(), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	_, _, _ = nlp.Submit(ctx, spec().Team("cv").YAML(), "application/yaml", "") // forbidden
	_, _ = cv.Cancel(ctx, v.ID, "hostile")                                      // not found
	if _, err := nlp.Cancel(ctx, v.ID, ""); err != nil {
		t.Fatal(err)
	}
	admin := e.as("nlp", auth.Admin)
	tok, err := admin.CreateToken(ctx, api.TokenRequest{Role: auth.Viewer, Name: "dash"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RevokeToken(ctx, tok.Info.ID); err != nil {
		t.Fatal(err)
	}
	e.do(http.MethodPost, "/v1/jobs", spec().YAML(), map[string]string{"Authorization": ""}) // anonymous

	type row struct{ action, target, team, who, outcome string }
	want := []row{
		{"job.submit", v.ID, "nlp", "submitter of nlp", "ok"},
		{"job.submit", "", "cv", "submitter of nlp", "forbidden"},
		{"job.cancel", v.ID, "nlp", "submitter of cv", "not_found"},
		{"job.cancel", v.ID, "nlp", "submitter of nlp", "ok"},
		{"token.create", tok.Info.ID, "nlp", "admin of nlp", "ok"},
		{"token.revoke", tok.Info.ID, "nlp", "admin of nlp", "ok"},
		{"job.submit", "", "", "anonymous", "unauthenticated"},
	}
	var got []row
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		l, err := e.client.ListAudit(ctx, "", "", "", 0)
		if err != nil {
			return err
		}
		got = got[:0]
		for _, en := range l.Records {
			r := en.Record
			who := "anonymous"
			if r.Principal != "anonymous" {
				who = r.Role + " of " + r.Team
			}
			if r.Principal != "anonymous" && (!strings.HasPrefix(r.Principal, "token:") || !strings.HasPrefix(r.Source, "127.0.0.1:")) {
				return fmt.Errorf("record %+v: want a token principal and the client's address", r)
			}
			got = append(got, row{r.Action, r.Target, r.TargetTeam, who, r.Outcome})
		}
		if len(got) < len(want) {
			return fmt.Errorf("%d records: %v", len(got), got)
		}
		return nil
	})
	if !slices.Equal(got, want) {
		t.Errorf("audit records:\n got %v\nwant %v", got, want)
	}
	// nlp's admin reads nlp's records (the hostile cancel included), and
	// one job's.
	l, err := admin.ListAudit(ctx, "", v.ID, "", 0)
	if err != nil || len(l.Records) != 3 {
		t.Errorf("nlp admin, one job: %+v %v, want its submission and both cancellations", l, err)
	}
	if _, err := nlp.ListAudit(ctx, "", "", "", 0); err == nil {
		t.Error("a submitter read the audit records")
	}
	if _, err := admin.ListAudit(ctx, "cv", "", "", 0); err == nil {
		t.Error("nlp's admin read cv's audit records")
	}
}
