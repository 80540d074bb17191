package api

import (
	"fmt"
	"github.com/spotwise/spotwise/internal/idmap"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestJobOrderKeepsEveryJobInOrder puts jobs in and takes them out of an
// order at random (in order of submission, out of it, the same job twice)
// and checks after each step that it lists exactly the jobs a plain
// sorted list does, oldest first and from any cursor newest first, with
// no chunk empty or over its size.
func TestJobOrderKeepsEveryJobInOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		steps    int
		inOrder  float64 // share of inserts that come newest
		removeAt float64 // share of steps that take a job out
	}{
		{"appends", 3000, 1, 0.1},
		{"random", 3000, 0, 0.3},
		{"mixed", 5000, 0.7, 0.45},
		{"drained", 2000, 0.5, 0.6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			var o jobOrder
			var want []*entry
			newest := int64(1_000)
			cmp := func(a, b *entry) int { return cmpKey(a.submitted, a.key, b.submitted, b.key) }
			for step := range tc.steps {
				switch {
				case len(want) > 0 && rng.Float64() < tc.removeAt:
					e := want[rng.IntN(len(want))]
					o.remove(e)
					want = slices.DeleteFunc(want, func(x *entry) bool { return x == e })
				case len(want) > 0 && rng.IntN(20) == 0:
					o.insert(want[rng.IntN(len(want))]) // already there: no change
				default:
					at := rng.Int64N(newest + 1)
					if rng.Float64() < tc.inOrder {
						newest += 1 + rng.Int64N(3)
						at = newest
					}
					e := &entry{key: idmap.KeyOf(fmt.Sprintf("j-%06d", rng.IntN(1_000_000))), submitted: at}
					if _, dup := slices.BinarySearchFunc(want, e, cmp); dup {
						continue
					}
					o.insert(e)
					want = append(want, e)
					slices.SortFunc(want, cmp)
				}
				if step%97 != 0 && step != tc.steps-1 {
					continue
				}
				got := slices.Collect(o.all())
				if o.Len() != len(want) || !slices.Equal(got, want) {
					t.Fatalf("step %d: order holds %d (Len %d), want %d in order", step, len(got), o.Len(), len(want))
				}
				for _, ch := range o.chunks {
					if len(ch) == 0 || len(ch) > orderChunk {
						t.Fatalf("step %d: a chunk of %d entries", step, len(ch))
					}
				}
				// From a cursor: the job itself (when listed), or a key
				// between jobs.
				for range 5 {
					at, id := rng.Int64N(newest+2), idmap.KeyOf("j-500000")
					if len(want) > 0 && rng.IntN(2) == 0 {
						c := want[rng.IntN(len(want))]
						at, id = c.submitted, c.key
					}
					i, _ := slices.BinarySearchFunc(want, &entry{submitted: at, key: id}, cmp)
					w := slices.Clone(want[:i])
					slices.Reverse(w)
					if g := slices.Collect(o.before(true, at, id)); !slices.Equal(g, w) {
						t.Fatalf("step %d: %d jobs before (%d, %s), want %d", step, len(g), at, id, len(w))
					}
				}
				all := slices.Clone(want)
				slices.Reverse(all)
				if g := slices.Collect(o.before(false, 0, idmap.Key{})); !slices.Equal(g, all) {
					t.Fatalf("step %d: newest first lists %d, want %d", step, len(g), len(all))
				}
			}
			packed := func(when string) {
				t.Helper()
				if got := slices.Collect(o.all()); o.Len() != len(want) || !slices.Equal(got, want) {
					t.Fatalf("after %s: %d (Len %d), want %d", when, len(got), o.Len(), len(want))
				}
				for i, ch := range o.chunks {
					if len(ch) == 0 || (len(ch) < orderChunk && i < len(o.chunks)-1) {
						t.Fatalf("after %s: chunk %d of %d holds %d entries", when, i, len(o.chunks), len(ch))
					}
				}
			}
			o.pack()
			packed("pack")
			o.deleteFunc(func(e *entry) bool { return e.submitted%2 == 0 })
			want = slices.DeleteFunc(want, func(e *entry) bool { return e.submitted%2 == 0 })
			packed("deleteFunc")
			// Still an order: inserts and removals go on working.
			for i := range 300 {
				e := &entry{key: idmap.KeyOf(fmt.Sprintf("j-%07d", i)), submitted: int64(i * 7)}
				if _, dup := slices.BinarySearchFunc(want, e, cmp); dup {
					continue
				}
				o.insert(e)
				want = append(want, e)
				slices.SortFunc(want, cmp)
			}
			if got := slices.Collect(o.all()); o.Len() != len(want) || !slices.Equal(got, want) {
				t.Fatalf("inserts after a pack: %d (Len %d), want %d", len(got), o.Len(), len(want))
			}
			o.deleteFunc(func(*entry) bool { return true })
			if o.Len() != 0 || len(o.chunks) != 0 {
				t.Fatalf("after deleting all: Len %d, %d chunks", o.Len(), len(o.chunks))
			}
		})
	}
}

// BenchmarkJobOrderChurnMillion is one change to a running job's
// record in an index listing a million jobs: what every lifecycle input
// costs the listing index.
func BenchmarkJobOrderChurnMillion(b *testing.B) {
	var o jobOrder
	for i := range 1_000_000 {
		o.insert(&entry{key: idmap.KeyOf(fmt.Sprintf("j-%08d", i)), submitted: int64(i)})
	}
	es := slices.Collect(o.all())
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for b.Loop() {
		e := es[rng.IntN(len(es))]
		o.remove(e)
		o.insert(e)
	}
}
