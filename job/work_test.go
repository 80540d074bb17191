package job

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestWorkShorthand(t *testing.T) {
	tests := []struct {
		in   string
		want Work
	}{
		{"48h on V100", Work{Duration: Duration(48 * time.Hour), ReferenceGPU: "V100"}},
		{"2d on A100-80GB", Work{Duration: Duration(48 * time.Hour), ReferenceGPU: "A100-80GB"}},
		{"90m on T4", Work{Duration: Duration(90 * time.Minute), ReferenceGPU: "T4"}},
		{"  1h30m   on   H100  ", Work{Duration: Duration(90 * time.Minute), ReferenceGPU: "H100"}},
		{"384 gpu-hours on V100", Work{GPUHours: 384, ReferenceGPU: "V100"}},
		{"1 gpu-hour on V100", Work{GPUHours: 1, ReferenceGPU: "V100"}},
		{"12.5 GPU-Hours on A10G", Work{GPUHours: 12.5, ReferenceGPU: "A10G"}},
		{"100 gpu hours on L4", Work{GPUHours: 100, ReferenceGPU: "L4"}},
		{"100gpuh on L4", Work{GPUHours: 100, ReferenceGPU: "L4"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var w Work
			if err := json.Unmarshal(mustJSON(t, tt.in), &w); err != nil {
				t.Fatal(err)
			}
			if w != tt.want {
				t.Fatalf("%q = %+v, want %+v", tt.in, w, tt.want)
			}
			// The short form written back reads as the same work.
			var again Work
			if err := json.Unmarshal(mustJSON(t, w.String()), &again); err != nil {
				t.Fatalf("String() = %q does not parse: %v", w.String(), err)
			}
			if again != w {
				t.Errorf("round trip through %q = %+v, want %+v", w.String(), again, w)
			}
			// So does the stored mapping form.
			var stored Work
			if err := json.Unmarshal(mustJSON(t, w), &stored); err != nil || stored != w {
				t.Errorf("round trip through %s = %+v, %v", mustJSON(t, w), stored, err)
			}
		})
	}
}

func TestWorkShorthandRefused(t *testing.T) {
	tests := []struct{ in, want string }{
		{"48 on V100", `"48" is not a duration`},
		{"48h", `write work as "48h on V100"`},
		{"48h on ", `write work as`},
		{"48h on  ", `write work as`},
		{"soon on V100", `"soon" is not a duration`},
		{"x gpu-hours on V100", `"x" is not a number of GPU-hours`},
		{"Inf gpu-hours on V100", `is not a number of GPU-hours`},
		{"NaN gpu-hours on V100", `is not a number of GPU-hours`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var w Work
			err := json.Unmarshal(mustJSON(t, tt.in), &w)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	t.Run("unknown field in mapping", func(t *testing.T) {
		var w Work
		if err := json.Unmarshal([]byte(`{"hours": 3, "reference_gpu": "V100"}`), &w); err == nil {
			t.Error("mapping with an unknown field accepted")
		}
	})
}

func TestReferenceDuration(t *testing.T) {
	tests := []struct {
		name string
		work Work
		gpus int
		want time.Duration
	}{
		{"duration ignores the shape", Work{Duration: Duration(6 * time.Hour)}, 64, 6 * time.Hour},
		{"gpu-hours on one GPU", Work{GPUHours: 3}, 1, 3 * time.Hour},
		{"gpu-hours on 8 GPUs", Work{GPUHours: 384}, 8, 48 * time.Hour},
		{"gpu-hours on 4 nodes x 8 GPUs", Work{GPUHours: 2048}, 32, 64 * time.Hour},
		{"fractional", Work{GPUHours: 1}, 3, 20 * time.Minute},
		{"zero GPUs read as one", Work{GPUHours: 2}, 0, 2 * time.Hour},
		{"huge saturates", Work{GPUHours: 1e300}, 1, math.MaxInt64},
		{"infinite saturates", Work{GPUHours: math.Inf(1)}, 1, math.MaxInt64},
		{"NaN is nothing", Work{GPUHours: math.NaN()}, 1, 0},
		{"negative is nothing", Work{GPUHours: -1}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.work.ReferenceDuration(tt.gpus); got != tt.want {
				t.Errorf("ReferenceDuration(%d) = %v, want %v", tt.gpus, got, tt.want)
			}
		})
	}
	t.Run("from a parsed spec", func(t *testing.T) {
		s := mustParse(t, yamlSpec(map[string]string{
			"work":      "384 gpu-hours on V100",
			"resources": "{gpus_per_node: 8, nodes: 2}",
		}))
		if s.TotalGPUs() != 16 {
			t.Errorf("TotalGPUs = %d, want 16", s.TotalGPUs())
		}
		if got := s.Work.ReferenceDuration(s.TotalGPUs()); got != 24*time.Hour {
			t.Errorf("384 GPU-hours on 2 x 8 GPUs = %v, want 24h", got)
		}
	})
}

func TestValidateWorkBuiltInCode(t *testing.T) {
	// Specs built in Go (quote, simulate) skip the parser; Validate must
	// still refuse nonsense work.
	tests := []struct {
		name string
		work Work
		want string
	}{
		{"NaN gpu-hours", Work{GPUHours: math.NaN(), ReferenceGPU: "V100"}, "must be positive"},
		{"infinite gpu-hours", Work{GPUHours: math.Inf(1), ReferenceGPU: "V100"}, "more than 100,000 hours"},
		{"negative duration", Work{Duration: Duration(-time.Hour), ReferenceGPU: "V100"}, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, yamlSpec(nil))
			s.Work = tt.work
			ve, ok := AsValidationError(s.Validate(vocab))
			if !ok {
				t.Fatalf("Validate accepted work %+v", tt.work)
			}
			checkFieldErrors(t, ve.Errors, []FieldError{{"work", tt.want}})
		})
	}
}
