package chaos

import (
	"strings"
	"testing"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

func change(rev uint64, state job.State, attempt int) events.JobChange {
	return events.JobChange{ID: "j-1", Revision: rev, Record: &job.Record{ID: "j-1", Status: job.Status{State: state, Attempt: attempt}}}
}

// TestLedgerSeesRecordsGoBackwards feeds the ledger what the bucket's
// watches deliver, a replay after each restart included.
func TestLedgerSeesRecordsGoBackwards(t *testing.T) {
	tests := []struct {
		name    string
		changes []events.JobChange
		want    string // in what it says went backwards; "" for nothing
	}{
		{name: "a life, replayed after a restart", changes: []events.JobChange{
			change(1, job.Queued, 0), change(4, job.Placing, 1), change(9, job.Running, 1),
			change(9, job.Running, 1), // the replay
			change(12, job.Queued, 1), change(15, job.Running, 2), change(20, job.Succeeded, 2), change(20, job.Succeeded, 2),
		}},
		{name: "a replay older than what was seen", changes: []events.JobChange{
			change(1, job.Queued, 0), change(4, job.Placing, 1), change(9, job.Running, 1), change(4, job.Placing, 1),
		}, want: "revision 4 after revision 9"},
		{name: "attempts forgotten", changes: []events.JobChange{
			change(1, job.Queued, 0), change(4, job.Placing, 2), change(9, job.Placing, 1),
		}, want: "attempt 1 after attempt 2"},
		{name: "an end left", changes: []events.JobChange{
			change(1, job.Queued, 0), change(4, job.Cancelled, 0), change(9, job.Queued, 0),
		}, want: "queued after it had cancelled"},
		{name: "deleted", changes: []events.JobChange{
			change(1, job.Queued, 0), {ID: "j-1", Revision: 3},
		}, want: "deleted at revision 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger()
			for _, c := range tt.changes {
				l.observe(c)
			}
			got := l.wentBackwards()["j-1"]
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("went backwards: %q, want %q", got, tt.want)
			}
			last := tt.changes[len(tt.changes)-1]
			ended, _ := l.settled([]string{"j-1"})
			if want := last.Record != nil && last.Record.Status.State.Terminal(); tt.want == "" && ended != want {
				t.Errorf("ended %v, want %v", ended, want)
			}
		})
	}
}
