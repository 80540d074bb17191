package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Work is how much computing a job needs, measured on a reference GPU so
// that it converts to a runtime on any other GPU through the throughput
// table. Exactly one of Duration and GPUHours is set.
//
// In YAML it is either a mapping or a short sentence:
//
//	work: 48h on V100            # 48 h of wall time on V100s, with this job's shape
//	work: 384 gpu-hours on V100  # 384 V100 GPU-hours in total
type Work struct {
	// Duration is the wall time the job takes on ReferenceGPU with its own
	// shape (nodes x gpus_per_node GPUs of that type).
	Duration Duration `json:"duration,omitempty"`
	// GPUHours is the total GPU-hours the job takes on ReferenceGPU.
	GPUHours float64 `json:"gpu_hours,omitempty"`
	// ReferenceGPU is the GPU type the figure was measured on.
	ReferenceGPU string `json:"reference_gpu,omitempty"`
}

// IsZero reports whether no work is given.
func (w Work) IsZero() bool { return w.Duration == 0 && w.GPUHours == 0 && w.ReferenceGPU == "" }

// ReferenceDuration is the wall time on ReferenceGPU for a job using gpus
// GPUs in all.
func (w Work) ReferenceDuration(gpus int) time.Duration {
	if w.Duration > 0 {
		return w.Duration.D()
	}
	if gpus <= 0 {
		gpus = 1
	}
	// Saturate rather than overflow: an absurd figure must read as absurdly
	// long, not wrap around to a negative or tiny duration.
	switch d := w.GPUHours / float64(gpus) * float64(time.Hour); {
	case d >= math.MaxInt64:
		return math.MaxInt64
	case !(d > 0):
		return 0
	default:
		return time.Duration(d)
	}
}

// String writes the work in its short form.
func (w Work) String() string {
	if w.Duration > 0 {
		return fmt.Sprintf("%s on %s", w.Duration.D(), w.ReferenceGPU)
	}
	return fmt.Sprintf("%s gpu-hours on %s", strconv.FormatFloat(w.GPUHours, 'f', -1, 64), w.ReferenceGPU)
}

type workFields Work

// UnmarshalJSON accepts the mapping or the short sentence.
func (w *Work) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return w.parseShort(s)
	case len(b) > 0 && b[0] != '{' && string(b) != "null":
		return errors.New(`must be text such as "48h on V100" or "384 gpu-hours on V100", or a mapping`)
	}
	var f workFields
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return err
	}
	*w = Work(f)
	return nil
}

func (w *Work) parseShort(s string) error {
	amount, gpu, ok := strings.Cut(strings.TrimSpace(s), " on ")
	if !ok {
		return fmt.Errorf("%q: write work as \"48h on V100\" or \"384 gpu-hours on V100\"", s)
	}
	amount, gpu = strings.TrimSpace(amount), strings.TrimSpace(gpu)
	if gpu == "" {
		return fmt.Errorf("%q: name the reference GPU after \"on\"", s)
	}
	lower := strings.ToLower(amount)
	for _, unit := range []string{"gpu-hours", "gpu-hour", "gpu hours", "gpuh"} {
		if num, found := strings.CutSuffix(lower, unit); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%q: %q is not a number of GPU-hours", s, strings.TrimSpace(num))
			}
			*w = Work{GPUHours: v, ReferenceGPU: gpu}
			return nil
		}
	}
	d, err := ParseDuration(amount)
	if err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	*w = Work{Duration: Duration(d), ReferenceGPU: gpu}
	return nil
}
