package trace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

// sharedTraces is where the measured traces live, relative to this
// package; tests that need them skip when they are not there.
const sharedTraces = "../../../shared/traces"

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseJSON(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		step   time.Duration
		avail  []int
		prices []money.Micros
		err    string
	}{
		{"one node", `{"metadata": {"gap_seconds": 195}, "data": [1, 0, 1]}`, 195 * time.Second, []int{1, 0, 1}, nil, ""},
		{"sixteen nodes", `{"metadata": {"gap_seconds": 300}, "data": [0, 3, 16, 7]}`, 300 * time.Second, []int{0, 3, 16, 7}, nil, ""},
		{"with prices", `{"metadata": {"gap_seconds": 32}, "data": [1, 0], "prices": [0.918, 1.2754]}`, 32 * time.Second, []int{1, 0},
			[]money.Micros{money.MustParse("0.918"), money.MustParse("1.2754")}, ""},
		{"whole floats read as counts", `{"metadata": {"gap_seconds": 30.5}, "data": [1.0, 0]}`, 30500 * time.Millisecond, []int{1, 0}, nil, ""},
		{"extra fields are ignored", `{"metadata": {"gap_seconds": 60, "zone": "x"}, "data": [1], "note": "hi"}`, time.Minute, []int{1}, nil, ""},

		{"not JSON", `gap_seconds: 60`, 0, nil, nil, "not a JSON trace"},
		{"no metadata", `{"data": [1, 0]}`, 0, nil, nil, "metadata.gap_seconds is missing"},
		{"no step", `{"metadata": {}, "data": [1, 0]}`, 0, nil, nil, "metadata.gap_seconds is missing"},
		{"zero step", `{"metadata": {"gap_seconds": 0}, "data": [1]}`, 0, nil, nil, "not a usable step"},
		{"negative step", `{"metadata": {"gap_seconds": -5}, "data": [1]}`, 0, nil, nil, "not a usable step"},
		{"step as a quoted number", `{"metadata": {"gap_seconds": "60"}, "data": [1]}`, time.Minute, []int{1}, nil, ""},
		{"step as a word", `{"metadata": {"gap_seconds": "soon"}, "data": [1]}`, 0, nil, nil, "not a JSON trace"},
		{"no data", `{"metadata": {"gap_seconds": 60}}`, 0, nil, nil, "data is missing"},
		{"empty data", `{"metadata": {"gap_seconds": 60}, "data": []}`, 0, nil, nil, "no samples"},
		{"negative count", `{"metadata": {"gap_seconds": 60}, "data": [1, -1]}`, 0, nil, nil, "data[1]"},
		{"fractional count", `{"metadata": {"gap_seconds": 60}, "data": [0.5]}`, 0, nil, nil, "data[0]: 0.5 is not a count"},
		{"prices too short", `{"metadata": {"gap_seconds": 60}, "data": [1, 1], "prices": [0.9]}`, 0, nil, nil, "1 prices for 2 samples"},
		{"negative price", `{"metadata": {"gap_seconds": 60}, "data": [1], "prices": [-0.9]}`, 0, nil, nil, "prices[0]"},
		{"price in exponent form", `{"metadata": {"gap_seconds": 60}, "data": [1], "prices": [9e-1]}`, 0, nil, nil, "plain decimals"},
		{"prices rounded to the micro-dollar", `{"metadata": {"gap_seconds": 60}, "data": [1, 1, 1], "prices": [17.529215999999998, 0.1234564, 2.0000005]}`, time.Minute, []int{1, 1, 1},
			[]money.Micros{money.MustParse("17.529216"), money.MustParse("0.123456"), money.MustParse("2.000001")}, ""},
		{"price with a bad digit", `{"metadata": {"gap_seconds": 60}, "data": [1], "prices": ["0.1234567x"]}`, 0, nil, nil, "not a JSON trace"},
		{"free on-demand", `{"metadata": {"gap_seconds": 60, "on_demand_price": 0}, "data": [1]}`, 0, nil, nil, "on_demand_price 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseJSON(strings.NewReader(tt.body))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseJSON = %v, %v; want an error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Step != tt.step || !slices.Equal(got.Avail, tt.avail) || !slices.Equal(got.Prices, tt.prices) {
				t.Errorf("ParseJSON = step %v, %v, %v; want %v, %v, %v", got.Step, got.Avail, got.Prices, tt.step, tt.avail, tt.prices)
			}
		})
	}
}

func TestParseCSV(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		step   time.Duration
		avail  []int
		prices []money.Micros
		err    string
	}{
		{"availability only", "time_seconds,available\n0,1\n195,0\n390,1\n", 195 * time.Second, []int{1, 0, 1}, nil, ""},
		{"with prices and comments", "# us-east-1a\ntime_seconds,available,price_usd_per_hour\n100,4,0.9731\n# a note\n130,0,1.05\n", 30 * time.Second, []int{4, 0},
			[]money.Micros{money.MustParse("0.9731"), money.MustParse("1.05")}, ""},
		{"spaces and upper-case header", "Time_Seconds, Available\n0, 1\n60, 1\n", time.Minute, []int{1, 1}, nil, ""},
		{"fractional step", "time_seconds,available\n0,1\n0.5,1\n1.0,0\n", 500 * time.Millisecond, []int{1, 1, 0}, nil, ""},

		{"empty", "", 0, nil, nil, "empty CSV"},
		{"no header", "0,1\n60,1\n", 0, nil, nil, "line 1: header"},
		{"unknown third column", "time_seconds,available,price\n0,1,1\n60,1,1\n", 0, nil, nil, "line 1: header"},
		{"too many fields", "time_seconds,available\n0,1,3\n60,1\n", 0, nil, nil, "line 2: 3 fields, want 2"},
		{"time not a number", "time_seconds,available\nnoon,1\n60,1\n", 0, nil, nil, `line 2: time_seconds "noon"`},
		{"count not a number", "time_seconds,available\n0,yes\n60,1\n", 0, nil, nil, "line 2: available"},
		{"negative count", "time_seconds,available\n0,1\n60,-2\n", 0, nil, nil, "line 3: available"},
		{"missing row", "time_seconds,available\n0,1\n60,1\n180,1\n", 0, nil, nil, "line 4: time_seconds 180, want 120"},
		{"one row", "time_seconds,available\n0,1\n", 0, nil, nil, "at least two"},
		{"time going back", "time_seconds,available\n60,1\n0,1\n", 0, nil, nil, "does not grow"},
		{"bad price", "time_seconds,available,price_usd_per_hour\n0,1,cheap\n60,1,1\n", 0, nil, nil, "line 2: price_usd_per_hour"},
		{"missing price", "time_seconds,available,price_usd_per_hour\n0,1\n60,1,1\n", 0, nil, nil, "line 2: 2 fields, want 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCSV(strings.NewReader(tt.body))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseCSV = %+v, %v; want an error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Step != tt.step || !slices.Equal(got.Avail, tt.avail) || !slices.Equal(got.Prices, tt.prices) {
				t.Errorf("ParseCSV = step %v, %v, %v; want %v, %v, %v", got.Step, got.Avail, got.Prices, tt.step, tt.avail, tt.prices)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "us-east-1a_v100_1.json", `{"metadata": {"gap_seconds": 60}, "data": [1, 0, 1]}`)
	write(t, dir, "us-east-1b_v100_1.csv", "time_seconds,available\n0,0\n60,1\n")
	write(t, dir, "README.md", "not a trace")
	write(t, dir, "SUMMARY.tsv", "path\tbytes\n")

	t.Run("a folder is every trace file in it, by name", func(t *testing.T) {
		ts, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tr := range ts {
			names = append(names, tr.Name)
		}
		if !slices.Equal(names, []string{"us-east-1a", "us-east-1b"}) {
			t.Errorf("names %v", names)
		}
		if ts[1].Len() != 2 || ts[0].Max() != 1 || ts[0].Source != filepath.Join(dir, "us-east-1a_v100_1.json") {
			t.Errorf("traces %+v", ts)
		}
	})
	t.Run("files and folders mix", func(t *testing.T) {
		other := t.TempDir()
		f := write(t, other, "zone-c.csv", "time_seconds,available\n0,1\n60,1\n")
		ts, err := Load(dir, f)
		if err != nil || len(ts) != 3 || ts[2].Name != "zone-c" {
			t.Fatalf("Load = %+v, %v", ts, err)
		}
	})
	t.Run("shared zone names keep their file names", func(t *testing.T) {
		d := t.TempDir()
		write(t, d, "us-west-2a_k80_1.json", `{"metadata": {"gap_seconds": 600}, "data": [1]}`)
		write(t, d, "us-west-2a_v100_1.json", `{"metadata": {"gap_seconds": 600}, "data": [0]}`)
		ts, err := Load(d)
		if err != nil {
			t.Fatal(err)
		}
		if ts[0].Name != "us-west-2a_k80_1" || ts[1].Name != "us-west-2a_v100_1" {
			t.Errorf("names %q, %q", ts[0].Name, ts[1].Name)
		}
	})
	errs := []struct {
		name  string
		setup func(t *testing.T) []string
		want  []string
	}{
		{"missing file", func(t *testing.T) []string { return []string{filepath.Join(dir, "nope.json")} }, []string{"nope.json"}},
		{"no paths", func(t *testing.T) []string { return nil }, []string{"no trace files"}},
		{"folder without traces", func(t *testing.T) []string {
			d := t.TempDir()
			write(t, d, "notes.txt", "x")
			return []string{d}
		}, []string{"holds no .json or .csv"}},
		{"unknown extension", func(t *testing.T) []string { return []string{write(t, t.TempDir(), "z.tsv", "x")} }, []string{"z.tsv", "unknown format"}},
		{"a bad file is named with its problem", func(t *testing.T) []string {
			return []string{write(t, t.TempDir(), "bad_v100_1.json", `{"metadata": {"gap_seconds": 60}, "data": [1, 2.5]}`)}
		}, []string{"bad_v100_1.json", "data[1]"}},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := Load(tt.setup(t)...)
			if err == nil {
				t.Fatalf("Load = %+v, want an error", ts)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestLoadSharedTraces(t *testing.T) {
	dir := filepath.Join(sharedTraces, "availability/1-node/aws-02-15-2023")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared traces not here: %v", err)
	}
	ts, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 9 {
		t.Fatalf("%d traces, want the 9 zones", len(ts))
	}
	for _, tr := range ts {
		if tr.Step != 195*time.Second || tr.Len() != 20158 || tr.Max() != 1 || tr.Prices != nil || !strings.HasPrefix(tr.Name, "us-") {
			t.Errorf("%s: step %v, %d samples, max %d, prices %v", tr.Name, tr.Step, tr.Len(), tr.Max(), tr.Prices != nil)
		}
	}
	priced := filepath.Join(sharedTraces, "preemption/1-node/aws-04-19-2023/us-east-1b_intel_64.json")
	tr, err := LoadFile(priced)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Prices) != tr.Len() || tr.Prices[0] < money.MustParse("1") {
		t.Errorf("priced trace: %d prices for %d samples, first %s", len(tr.Prices), tr.Len(), tr.Prices[0])
	}
}
