package job

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestStateTransitions(t *testing.T) {
	// allowed is the life of a job as users see it; every pair not listed
	// is refused.
	allowed := map[State][]State{
		// A queued job whose cost has reached its max_cost_usd fails.
		Queued:        {Placing, Cancelled, Expired, Failed},
		Placing:       {Running, Queued, Succeeded, Failed, Cancelled},
		Running:       {Checkpointing, Migrating, Queued, Succeeded, Failed, Cancelled},
		Checkpointing: {Migrating, Queued, Running, Succeeded, Failed, Cancelled, Expired},
		Migrating:     {Running, Queued, Succeeded, Failed, Cancelled, Expired},
		Succeeded:     nil,
		Failed:        nil,
		Cancelled:     nil,
		Expired:       nil,
	}
	if len(allowed) != len(States) {
		t.Fatalf("test covers %d states, States lists %d", len(allowed), len(States))
	}
	for _, from := range States {
		for _, to := range append(slices.Clone(States), State("paused"), State("")) {
			want := slices.Contains(allowed[from], to)
			t.Run(string(from)+"->"+string(to), func(t *testing.T) {
				if got := from.CanMoveTo(to); got != want {
					t.Errorf("CanMoveTo = %v, want %v", got, want)
				}
			})
		}
	}
}

func TestStateKinds(t *testing.T) {
	tests := []struct {
		s                       State
		terminal, active, valid bool
	}{
		{Queued, false, false, true},
		{Placing, false, true, true},
		{Running, false, true, true},
		{Checkpointing, false, true, true},
		{Migrating, false, true, true},
		{Succeeded, true, false, true},
		{Failed, true, false, true},
		{Cancelled, true, false, true},
		{Expired, true, false, true},
		{"paused", false, false, false},
		{"", false, false, false},
		{"Running", false, false, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.s), func(t *testing.T) {
			if tt.s.Terminal() != tt.terminal || tt.s.Active() != tt.active || tt.s.Valid() != tt.valid {
				t.Errorf("Terminal, Active, Valid = %v, %v, %v; want %v, %v, %v",
					tt.s.Terminal(), tt.s.Active(), tt.s.Valid(), tt.terminal, tt.active, tt.valid)
			}
		})
	}
}

func TestStateJSON(t *testing.T) {
	for _, s := range States {
		t.Run(string(s), func(t *testing.T) {
			var got State
			if err := json.Unmarshal(mustJSON(t, s), &got); err != nil || got != s {
				t.Errorf("round trip = %q, %v", got, err)
			}
		})
	}
	for _, in := range []string{`"paused"`, `""`, `"RUNNING"`, `3`} {
		t.Run("refuses "+in, func(t *testing.T) {
			got := Running
			err := json.Unmarshal([]byte(in), &got)
			if err == nil {
				t.Fatalf("%s accepted", in)
			}
			if got != Running {
				t.Errorf("refused value changed the state to %q", got)
			}
			if in[0] == '"' && !strings.Contains(err.Error(), "unknown job state") {
				t.Errorf("error %q does not say the state is unknown", err)
			}
		})
	}
}
