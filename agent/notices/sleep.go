package notices

import (
	"context"
	"time"

	"github.com/spotwise/spotwise/clock"
)

// sleep waits d of clk between polls, reporting false when ctx ends first.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
