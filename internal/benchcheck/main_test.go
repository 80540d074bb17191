package main

import (
	"strings"
	"testing"
)

func TestReportsEachFigureBesideItsTarget(t *testing.T) {
	out := `goos: linux
BenchmarkReaders1000-2   	       1	42545838305 ns/op	         0 get-failed	      3619 get-max-ms	        53.93 get-p50-ms	      12.5 get-p99-ms	 9 get-again-p99-ms	         2 list-failed	   947.1 list-p50-ms	      70 list-p99-ms	      1172 rss-MB
BenchmarkCycle10kJobs2kOffers-2 	      10	  356172835 ns/op	 71.23 cycle-ms	 80.1 cycle-max-ms	 123 B/op
BenchmarkNotices-2 	 1	 5 ckpt-req-p50-ms	 8 ckpt-req-p99-ms
PASS
`
	var echo, table strings.Builder
	figures, err := read(strings.NewReader(out), &echo)
	if err != nil {
		t.Fatal(err)
	}
	if echo.String() != out {
		t.Fatalf("the output was not passed through:\n%s", echo.String())
	}
	missed := report(&table, figures)
	// list p99 70 > 50, 2 lists failed, no replace figure from BenchmarkNotices.
	if missed != 3 {
		t.Errorf("missed = %d, want 3:\n%s", missed, table.String())
	}
	for _, want := range []string{
		"GET one job, 1,000 readers", "12.5 ms", "< 20.0 ms",
		"list 100 per page, 1,000 readers", "70.0 ms", "MISSED",
		"71.2 ms", "MISSED (not reported)", "not run",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table has no %q:\n%s", want, table.String())
		}
	}
}
