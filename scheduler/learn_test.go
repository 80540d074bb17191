package scheduler

import (
	"math"
	"testing"
)

func TestExperience(t *testing.T) {
	e := newExperience()
	base := throughputs{"V100": 1, "A100-40GB": 3}
	tp := learned{base: base, exp: e}
	if v, _ := tp.RelativeThroughput("A100-40GB", "train-mixed"); v != 3 {
		t.Fatalf("before any measurement: %v, want the table's 3", v)
	}
	for range 30 {
		e.observeSpeed("A100-40GB", "train-mixed", 1.5) // really 1.5x the table
	}
	if v, _ := tp.RelativeThroughput("A100-40GB", "train-mixed"); math.Abs(v-4.5) > 0.01 {
		t.Fatalf("after measurements: %v, want about 4.5", v)
	}
	if v, _ := tp.RelativeThroughput("A100-40GB", "inference"); v != 3 {
		t.Fatalf("another class is not affected: %v", v)
	}
	e.observeSpeed("V100", "train-mixed", 500) // a broken report
	if v, _ := tp.RelativeThroughput("V100", "train-mixed"); v != 1 {
		t.Fatalf("an absurd measurement moved the table: %v", v)
	}

	// Interruption rates: the prior until hours are seen, then the data.
	prior := 0.001
	if r := e.rate("offer", prior); r != prior {
		t.Fatalf("rate with nothing seen = %v", r)
	}
	e.observeRun("offer", 9000, false)
	for range 90 {
		e.observeRun("offer", 0, true)
	}
	if r := e.rate("offer", prior); math.Abs(r-(prior*1000+90)/10000) > 1e-12 {
		t.Fatalf("blended rate %v", r)
	}
}
