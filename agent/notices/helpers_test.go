package notices

import (
	"testing"
	"time"

	"github.com/spotwise/spotwise/internal/testutil"
)

// t0 is when every test's fake clock starts.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func waitFor(t *testing.T, fn func() error) {
	t.Helper()
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, fn)
}
