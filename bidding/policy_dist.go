package bidding

import "time"

// runDist is a distribution of run lengths in seconds, pooled from
// RunHists by their buckets; each bucket is represented by its mean.
type runDist struct {
	n, sum [histBuckets]float64
}

// add records n runs of mean length mean seconds.
func (r *runDist) add(n, mean float64) {
	if n <= 0 {
		return
	}
	i := histBucket(time.Duration(mean * float64(time.Second)))
	r.n[i] += n
	r.sum[i] += n * mean
}

func (r *runDist) addHist(h *RunHist) {
	for i, c := range h.Count {
		r.n[i] += c
		r.sum[i] += h.Total[i]
	}
}

// each calls f with every non-empty bucket's count and mean length.
func (r *runDist) each(f func(n, mean float64)) {
	for i, n := range r.n {
		if n > 0 {
			f(n, r.sum[i]/n)
		}
	}
}

// total is the number of runs.
func (r *runDist) total() float64 {
	t := 0.0
	for _, n := range r.n {
		t += n
	}
	return t
}

// meanOf is the mean of f over the runs, 0 without runs.
func (r *runDist) meanOf(f func(length float64) float64) float64 {
	var n, s float64
	r.each(func(c, m float64) {
		n += c
		s += c * f(m)
	})
	if n == 0 {
		return 0
	}
	return s / n
}

// mean is the mean run length, 0 without runs.
func (r *runDist) mean() float64 { return r.meanOf(func(l float64) float64 { return l }) }

// tail is the share of runs longer than a.
func (r *runDist) tail(a float64) float64 {
	var n, t float64
	r.each(func(c, m float64) {
		n += c
		if m > a {
			t += c
		}
	})
	if n == 0 {
		return 0
	}
	return t / n
}
