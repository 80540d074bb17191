package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// The server with the scheduler removes the finished jobs its retention no
// longer keeps, on its own: of three cancelled jobs and one queued, with
// room for one finished job, the two oldest finished go.
func TestServerRemovesFinishedJobsPastItsRetention(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Retention.FinishedMaxJobs = 1
	cfg.Retention.Interval = job.Duration(time.Second)
	s := startServer(t, cfg)
	c := clientOf(s)
	ctx := context.Background()
	unplaceable := []byte("name: waits\ncommand: [x]\nresources: {gpus_per_node: 1}\nwork: 1h on T4\nmax_price_per_hour: 0.001\n")
	var ids []string
	for i := range 4 {
		v, _, err := c.Submit(ctx, unplaceable, "application/yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
		if i < 3 {
			if _, err := c.Cancel(ctx, v.ID, "done"); err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		for i, id := range ids {
			_, err := c.Get(ctx, id)
			if gone := err != nil; gone != (i < 2) {
				return fmt.Errorf("job %d (%s): gone = %v (%v)", i, id, gone, err)
			}
		}
		return nil
	})
}
