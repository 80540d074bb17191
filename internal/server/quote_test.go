package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spotwise/spotwise/internal/testutil"
)

// post sends an authenticated POST to s and decodes a 200 answer.
func post(t *testing.T, s *Server, path, ctype string, body []byte, into any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+s.HTTPAddr()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Authorization", "Bearer "+s.OperatorToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
	if into != nil {
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatal(err)
		}
	}
}

// What POST /v1/quote says the scheduler would do is what it does with
// the job submitted next: the same offer, the same estimate. The
// simulated clock is paused so that prices do not move between the two.
func TestQuoteIsWhatTheServerThenDoes(t *testing.T) {
	s := startServer(t, testConfig(t.TempDir()))
	post(t, s, "/v1/sim/clock", "application/json", []byte(`{"paused": true}`), nil)
	for _, spec := range []string{
		`{"name": "quoted", "team": "nlp", "command": ["python", "train.py"], "resources": {"gpus_per_node": 1}, "work": "20h on T4", "purchase": "spot"}`,
		`{"name": "quoted-od", "team": "nlp", "command": ["python", "train.py"], "resources": {"gpus_per_node": 8, "nodes": 2}, "work": "400h on V100", "purchase": "on-demand"}`,
	} {
		offers, err := s.Cloud().Offers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var rep QuoteReport
		// The feeds bring the book region by region at start: quote once
		// the scheduler's book holds every offer of the cloud.
		testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			rep = QuoteReport{}
			post(t, s, "/v1/quote", "application/json", []byte(spec), &rep)
			if rep.Book.Offers != len(offers) || rep.Decision.Offer == "" {
				return fmt.Errorf("the quote's book has %d of %d offers (decision %q, pending %v)", rep.Book.Offers, len(offers), rep.Decision.Offer, rep.Decision.Pending)
			}
			return nil
		})
		if !rep.Book.At.Equal(s.Clock().Now()) {
			t.Errorf("quoted at %s, the server's clock reads %s", rep.Book.At, s.Clock().Now())
		}
		if len(rep.Options) == 0 || rep.Options[0].RateSource == "" {
			t.Fatalf("no ranked options: %+v", rep.Options)
		}
		v, _, err := clientOf(s).Submit(t.Context(), []byte(spec), "application/json", "")
		if err != nil {
			t.Fatal(err)
		}
		testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			got, err := clientOf(s).Get(t.Context(), v.ID)
			if err != nil || got.Current == nil {
				return fmt.Errorf("job %s not placed yet (%v)", v.ID, err)
			}
			a := got.Current
			if a.Placement.OfferID != rep.Decision.Offer || a.Placement.Nodes != rep.Decision.Nodes ||
				a.EstimatedCost != rep.Decision.Cost || a.EstimatedRuntime != rep.Decision.Runtime {
				t.Fatalf("quoted %s x%d, %s, %s; the scheduler placed it on %s x%d, %s, %s", rep.Decision.Offer, rep.Decision.Nodes,
					rep.Decision.Runtime.D(), rep.Decision.Cost.Human(), a.Placement.OfferID, a.Placement.Nodes, a.EstimatedRuntime.D(), a.EstimatedCost.Human())
			}
			return nil
		})
	}
}
