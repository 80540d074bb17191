// Command benchcheck reads the output of go test -bench (on stdin, passed
// through to stdout as it comes) and then prints every figure that has a
// target beside its target, and which targets were missed. It exits 1 when
// one was missed or a benchmark with targets did not report.
//
//	go test -run '^$' -bench . ./... | go run ./internal/benchcheck
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// target is one figure a benchmark must stay under.
type target struct {
	bench, unit string
	max         float64
	what        string
}

// targets are the ones the issues set; each benchmark's doc comment says
// how it measures.
var targets = []target{
	{"BenchmarkCycle10kJobs2kOffers", "cycle-ms", 100, "one cycle, 10k queued x 2k offers, one core"},
	{"BenchmarkSubmitToPlaced200PerSecond", "p99-ms", 50, "submit -> placed at 200/s, 25k jobs in the store"},
	{"BenchmarkSubmitToPlacedAged200PerSecond", "p99-ms", 50, "submit -> placed at 200/s for 5 min, 100k jobs in the store"},
	{"BenchmarkSubmitToPlacedAged200PerSecond", "last-minute-p99-ms", 50, "the same, its last minute"},
	{"BenchmarkSubmitToPlacedAged200PerSecond", "unplaced", 0, "the same, jobs not placed a minute after the end"},
	{"BenchmarkReaders1000", "get-p99-ms", 20, "GET one job, 1,000 readers"},
	{"BenchmarkReaders1000", "get-again-p99-ms", 20, "the same, every read but each reader's first"},
	{"BenchmarkReaders1000", "list-p99-ms", 50, "list 100 per page, 1,000 readers"},
	{"BenchmarkReaders1000", "get-failed", 0, "GETs that failed"},
	{"BenchmarkReaders1000", "list-failed", 0, "lists that failed"},
	{"BenchmarkNotices", "ckpt-req-p99-ms", 100, "notice -> checkpoint request, 10k running"},
	{"BenchmarkNotices", "replace-p99-ms", 1000, "notice -> replacement requested, 10k running"},
	{"BenchmarkMemory100kQueuedJobs", "rss-MB", 200, "RSS with 100k queued, as ps shows it"},
	{"BenchmarkFinished1M", "list-p99-ms", 50, "list 100 per page, 1M finished"},
	{"BenchmarkFinished1M", "rss-MB", 400, "RSS with 1M finished, serving, as ps shows it"},
	{"BenchmarkFinished1M", "get-p99-ms", 20, "GET one job, 1M finished, 100 readers"},
	{"BenchmarkFinished1M", "get-failed", 0, "GETs that failed, 1M finished"},
}

var benchLine = regexp.MustCompile(`^(Benchmark[^\s-]+)(-\d+)?\s+\d+\s+(.*)$`)

func main() {
	figures, err := read(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcheck:", err)
		os.Exit(2)
	}
	missed := report(os.Stdout, figures)
	if failed := figures[failedKey]; len(failed) > 0 {
		fmt.Printf("%d package(s) or benchmark(s) FAILED\n", len(failed))
		missed++
	}
	if missed > 0 {
		os.Exit(1)
	}
}

// failedKey collects the FAIL lines of the output.
const failedKey = "FAIL"

// read copies r to w and collects the figures of every benchmark line: by
// benchmark, by unit (the last line of a benchmark wins).
func read(r io.Reader, w io.Writer) (map[string]map[string]float64, error) {
	figures := map[string]map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w, line)
		if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL") {
			if figures[failedKey] == nil {
				figures[failedKey] = map[string]float64{}
			}
			figures[failedKey][line] = 1
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		if figures[m[1]] == nil {
			figures[m[1]] = map[string]float64{}
		}
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				figures[m[1]][f[i+1]] = v
			}
		}
	}
	return figures, sc.Err()
}

// report prints the targets table and returns how many were missed (a
// benchmark that ran without the figure counts as missed; one that did
// not run is listed as not run).
func report(w io.Writer, figures map[string]map[string]float64) (missed int) {
	fmt.Fprintf(w, "\n%-58s %14s %14s  %s\n", "target", "measured", "limit", "")
	for _, t := range targets {
		got, ran := figures[t.bench]
		v, ok := got[t.unit]
		status, measured := "ok", format(v, t.unit)
		switch {
		case !ran:
			status, measured = "not run", "-"
		case !ok:
			status, measured = "MISSED (not reported)", "-"
			missed++
		case v > t.max:
			status = "MISSED"
			missed++
		}
		limit := "< " + format(t.max, t.unit)
		if t.max == 0 {
			limit = "0"
		}
		fmt.Fprintf(w, "%-58s %14s %14s  %s\n", t.what, measured, limit, status)
	}
	if missed > 0 {
		fmt.Fprintf(w, "%d target(s) missed\n", missed)
	} else {
		fmt.Fprintln(w, "every target that ran was met")
	}
	return missed
}

func format(v float64, unit string) string {
	switch unit {
	case "ns/op":
		return fmt.Sprintf("%.1f ms", v/1e6)
	case "rss-MB":
		return fmt.Sprintf("%.0f MB", v)
	case "get-failed", "list-failed", "unplaced":
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f ms", v)
}
