package server

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// aloneEnv names, in the process alone runs, the benchmark it runs.
const aloneEnv = "SPOTWISE_BENCH_ALONE"

// alone runs the calling benchmark again in a process of its own and
// reports that run's figures, unless this process is that one (then it
// returns false and the benchmark measures). Every system-level benchmark
// measures a server the way one runs: alone in its process. A figure of
// the whole process, its RSS, says nothing of one benchmark in a process
// where others ran before it (under make bench the 100k-queued one ran
// after the aged 200/s one and measured 343 MB against 270 alone), and
// latencies share the collector and the heap the earlier ones left.
func alone(b *testing.B) bool {
	b.Helper()
	if os.Getenv(aloneEnv) == b.Name() {
		return false
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^$", "-test.bench", "^"+b.Name()+"$", "-test.benchtime", "1x", "-test.timeout", "60m")
	cmd.Env = append(os.Environ(), aloneEnv+"="+b.Name())
	out, err := cmd.CombinedOutput()
	figures := benchFigures(string(out), b.Name())
	if err != nil || figures == nil {
		b.Fatalf("%s in a process of its own: %v\n%s", b.Name(), err, out)
	}
	for unit, v := range figures {
		b.ReportMetric(v, unit)
	}
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(strings.TrimSpace(line), "bench") || strings.HasPrefix(line, "queued ") {
			b.Log(strings.TrimSpace(line))
		}
	}
	return true
}

// benchFigures reads the figures of benchmark name from go test's output
// (every "value unit" pair of its line but the time and allocations);
// nil when the line is not there.
func benchFigures(out, name string) map[string]float64 {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 3 || (f[0] != name && !strings.HasPrefix(f[0], name+"-")) {
			continue
		}
		figures := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil
			}
			switch f[i+1] {
			case "ns/op", "B/op", "allocs/op":
				continue
			}
			figures[f[i+1]] = v
		}
		return figures
	}
	return nil
}

func TestBenchFigures(t *testing.T) {
	out := "goos: linux\nBenchmarkMemory100kQueuedJobs-2   \t       1\t40567848644 ns/op\t       294.4 heap-MB\t    100000 queued\t       270.3 settled-rss-MB\t 12 B/op\nPASS\n"
	got := benchFigures(out, "BenchmarkMemory100kQueuedJobs")
	want := map[string]float64{"heap-MB": 294.4, "queued": 100000, "settled-rss-MB": 270.3}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if benchFigures(out, "BenchmarkMemory100k") != nil || benchFigures("PASS\n", "BenchmarkMemory100kQueuedJobs") != nil {
		t.Fatal("figures of a benchmark that did not run")
	}
}
