package api

import (
	"fmt"
	"github.com/spotwise/spotwise/internal/idmap"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
	"unique"

	"github.com/spotwise/spotwise/job"
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
			o := jobOrder{bits: &teamBits{}}
			// Teams: two large, one rare; the masks must never hide a
			// job of any of them.
			// States: mostly succeeded, cancelled rare.
			stateOf := func() uint8 {
				st := job.Succeeded
				switch r := rng.IntN(100); {
				case r < 2:
					st = job.Cancelled
				case r < 20:
					st = job.Running
				case r < 30:
					st = job.Failed
				}
				return uint8(slices.Index(job.States, st))
			}
			teamOf := func() string {
				switch r := rng.IntN(100); {
				case r < 2:
					return "rare"
				case r < 60:
					return "vision"
				}
				return "speech"
			}
			var want []*entry
			newest := int64(1_000)
			cmp := func(a, b *entry) int { return cmpKey(a.submitted, a.key, b.submitted, b.key) }
			for step := range tc.steps {
				switch {
				case len(want) > 0 && rng.Float64() < tc.removeAt:
					e := want[rng.IntN(len(want))]
					o.remove(e)
					want = slices.DeleteFunc(want, func(x *entry) bool { return x == e })
				case len(want) > 0 && rng.IntN(30) == 0:
					// A retention round: the oldest jobs, or jobs here and
					// there, some named twice, and one not listed.
					n := 1 + rng.IntN(min(len(want), 700))
					batch := slices.Clone(want[:n])
					if rng.IntN(2) == 0 {
						batch = batch[:0]
						for range n {
							batch = append(batch, want[rng.IntN(len(want))])
						}
					}
					batch = append(batch, &entry{key: idmap.KeyOf("j-none"), submitted: newest + 1}, batch[0])
					gone := map[*entry]bool{}
					for _, e := range batch {
						gone[e] = true
					}
					o.removeAll(batch, func(e *entry) bool { return gone[e] })
					want = slices.DeleteFunc(want, func(x *entry) bool { return gone[x] })
					for _, ch := range o.chunks {
						if len(ch) == 0 || len(ch) > orderChunk {
							t.Fatalf("step %d: a retention round left a chunk of %d entries", step, len(ch))
						}
					}
					if got := slices.Collect(o.all()); o.Len() != len(want) || !slices.Equal(got, want) {
						t.Fatalf("step %d: a retention round left %d (Len %d), want %d in order", step, len(got), o.Len(), len(want))
					}
				case len(want) > 0 && rng.IntN(20) == 0:
					o.insert(want[rng.IntN(len(want))]) // already there: no change
				case len(want) > 0 && rng.IntN(10) == 0:
					// A job's state changes where it is listed.
					e := want[rng.IntN(len(want))]
					e.state = stateOf()
					o.mark(e)
				default:
					at := rng.Int64N(newest + 1)
					if rng.Float64() < tc.inOrder {
						newest += 1 + rng.Int64N(3)
						at = newest
					}
					e := &entry{key: idmap.KeyOf(fmt.Sprintf("j-%06d", rng.IntN(1_000_000))), submitted: at, named: unique.Make(nameTeam{"train", teamOf()}), state: stateOf()}
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
					if g := slices.Collect(o.before(true, at, id, anyJob)); !slices.Equal(g, w) {
						t.Fatalf("step %d: %d jobs before (%d, %s), want %d", step, len(g), at, id, len(w))
					}
					j, found := slices.BinarySearchFunc(want, &entry{submitted: at, key: id}, cmp)
					if found {
						j++
					}
					if g := slices.Collect(o.after(true, at, id)); !slices.Equal(g, want[j:]) {
						t.Fatalf("step %d: %d jobs after (%d, %s), want %d", step, len(g), at, id, len(want)-j)
					}
				}
				all := slices.Clone(want)
				slices.Reverse(all)
				if g := slices.Collect(o.before(false, 0, idmap.Key{}, anyJob)); !slices.Equal(g, all) {
					t.Fatalf("step %d: newest first lists %d, want %d", step, len(g), len(all))
				}
				checkTeams(t, &o, want, fmt.Sprintf("step %d", step))
			}
			packed := func(when string) {
				t.Helper()
				checkTeams(t, &o, want, when)
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
				e := &entry{key: idmap.KeyOf(fmt.Sprintf("j-%07d", i)), submitted: int64(i * 7), named: unique.Make(nameTeam{"train", teamOf()}), state: stateOf()}
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

// checkTeams checks that each chunk's mask holds the bits of its jobs'
// teams and states, and that the order filtered by one team's or one
// state's mask still lists every job of that team or state, newest first.
func checkTeams(t *testing.T, o *jobOrder, want []*entry, when string) {
	t.Helper()
	if len(o.masks) != len(o.chunks) {
		t.Fatalf("%s: %d masks for %d chunks", when, len(o.masks), len(o.chunks))
	}
	for ci, ch := range o.chunks {
		for _, e := range ch {
			if b := o.bit(e); o.masks[ci].teams&b.teams == 0 || o.masks[ci].states&b.states == 0 {
				t.Fatalf("%s: chunk %d's mask %+v misses %+v (team %s)", when, ci, o.masks[ci], b, e.teamName())
			}
		}
	}
	for _, team := range []string{"rare", "vision", "speech"} {
		bit, ok := o.bits.lookup(team)
		if !ok {
			continue
		}
		var w, g []*entry
		for _, e := range slices.Backward(want) {
			if e.teamName() == team {
				w = append(w, e)
			}
		}
		for e := range o.before(false, 0, idmap.Key{}, chunkMask{bit, ^uint16(0)}) {
			if e.teamName() == team {
				g = append(g, e)
			}
		}
		if !slices.Equal(g, w) {
			t.Fatalf("%s: team %s's jobs through its mask: %d, want %d", when, team, len(g), len(w))
		}
	}
	for st := range job.States {
		var w, g []*entry
		for _, e := range slices.Backward(want) {
			if int(e.state) == st {
				w = append(w, e)
			}
		}
		for e := range o.before(false, 0, idmap.Key{}, chunkMask{^uint64(0), 1 << st}) {
			if int(e.state) == st {
				g = append(g, e)
			}
		}
		if !slices.Equal(g, w) {
			t.Fatalf("%s: %s jobs through the state's mask: %d, want %d", when, job.States[st], len(g), len(w))
		}
	}
}

// TestWalkLetsWritersInBetweenSlices walks an index of three slices' worth
// of jobs and, at the end of the first slice, has a writer wait for the
// index's lock: the walk must let it in before its second slice (a walk
// holding the lock throughout never would, and the test would time out),
// and then see the job the writer added ahead of it but not the one added
// behind it, every other job once, oldest first.
func TestWalkLetsWritersInBetweenSlices(t *testing.T) {
	var ix index
	mk := func(i int) *entry {
		return &entry{key: idmap.KeyOf(fmt.Sprintf("j-%07d", i)), submitted: int64(10 * i)}
	}
	var want []*entry
	for i := range 3 * walkSlice {
		e := mk(i)
		ix.order.insert(e)
		want = append(want, e)
	}
	behind, ahead := mk(5), &entry{key: idmap.KeyOf("j-x"), submitted: int64(10*2*walkSlice + 5)}
	wrote := make(chan struct{})
	var got []*entry
	ix.walk(false, 0, idmap.Key{}, func(e *entry) bool {
		switch len(got) {
		case walkSlice - 1:
			go func() {
				ix.mu.Lock()
				ix.order.insert(behind)
				ix.order.insert(ahead)
				ix.mu.Unlock()
				close(wrote)
			}()
			// Until the writer waits for the lock (a reader can no
			// longer take it beside the walk).
			for ix.mu.TryRLock() {
				ix.mu.RUnlock()
				runtime.Gosched()
			}
		case walkSlice:
			select {
			case <-wrote:
			case <-time.After(30 * time.Second):
				t.Fatal("the writer did not get the lock between the walk's slices")
			}
		}
		got = append(got, e)
		return true
	})
	want = slices.Insert(want, 2*walkSlice+1, ahead)
	if !slices.Equal(got, want) {
		t.Fatalf("walked %d entries, want %d (the one added ahead, not the one behind)", len(got), len(want))
	}
	// Stopping early stops the walk.
	n := 0
	ix.walk(true, want[10].submitted, want[10].key, func(e *entry) bool {
		if e != want[11+n] {
			t.Fatalf("walk from the 11th job: entry %d is not the next in order", n)
		}
		n++
		return n < walkSlice+3
	})
	if n != walkSlice+3 {
		t.Fatalf("walk stopped after %d entries, want %d", n, walkSlice+3)
	}
}

// A listing that reads many jobs to fill its page (a search that matches
// few) lets writers in between slices of its read: the lock is free there,
// and a job added ahead of where it reads is listed, one behind is not.
func TestListReadsInSlices(t *testing.T) {
	ix := newIndex()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	mk := func(i int, name string) *entry {
		return &entry{key: idmap.KeyOf(fmt.Sprintf("j-%07d", i)), submitted: int64(10 * i), finished: now.UnixNano(),
			named: unique.Make(nameTeam{name: name, team: "vision"})}
	}
	old := mk(1, "needle-old")
	ix.order.insert(old)
	for i := 2; i < 3*walkSlice; i++ {
		ix.order.insert(mk(i, "train"))
	}
	// Newest first: after the first slice the listing has passed the
	// newest walkSlice jobs.
	behind, ahead := mk(3*walkSlice-10, "needle-behind"), mk(5, "needle-ahead")
	behind.submitted++
	ahead.submitted++
	calls := 0
	ix.betweenSlices = func() {
		calls++
		if !ix.mu.TryLock() {
			t.Error("the index is locked between a listing's slices")
			return
		}
		if calls == 1 {
			ix.order.insert(behind)
			ix.order.insert(ahead)
		}
		ix.mu.Unlock()
	}
	l, ok := ix.list(Query{Search: "needle"}, now)
	var got []string
	for _, j := range l.Jobs {
		got = append(got, j.Name)
	}
	if !ok || !slices.Equal(got, []string{"needle-ahead", "needle-old"}) || calls < 2 {
		t.Fatalf("listed %v after %d slices, want [needle-ahead needle-old] after 3", got, calls+1)
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

// BenchmarkArchiveRoundMillion is one archiver round over an index of a
// million finished jobs none of which is due (the usual round once the
// archive has caught up): it walks them all, walkSlice at a time, so the
// longest the index's lock is held is about this over
// 1,000,000/walkSlice.
func BenchmarkArchiveRoundMillion(b *testing.B) {
	var ix index
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1_000_000 {
		ix.order.insert(&entry{key: idmap.KeyOf(fmt.Sprintf("j-%08d", i)), submitted: int64(i), finished: now.UnixNano()})
	}
	b.ResetTimer()
	for b.Loop() {
		var from archiveCursor
		if ids := ix.archivable(&from, now.Add(-time.Hour), 10_000); len(ids) != 0 {
			b.Fatalf("%d due", len(ids))
		}
	}
}

// BenchmarkListRareMillion lists the first page of one small team's jobs,
// and of the jobs in a rare state (each a job in 10,000), in an index of
// a million finished jobs of 20 teams: what a team member's list, or a
// list of the cancelled jobs, costs on a large store; and a search that
// matches nothing, which reads every job.
func BenchmarkListRareMillion(b *testing.B) {
	ix := newIndex()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	succeeded, cancelled := uint8(slices.Index(job.States, job.Succeeded)), uint8(slices.Index(job.States, job.Cancelled))
	for i := range 1_000_000 {
		team, state := fmt.Sprintf("team-%d", i%20), succeeded
		switch i % 10_000 {
		case 0:
			team = "small"
		case 5_000:
			state = cancelled
		}
		ix.order.insert(&entry{key: idmap.KeyOf(fmt.Sprintf("j-%08d", i)), submitted: int64(i), finished: now.UnixNano(),
			named: unique.Make(nameTeam{name: "train", team: team}), state: state})
	}
	for _, bc := range []struct {
		name string
		q    Query
		want int
	}{
		{"small-team", Query{Team: "small"}, 100},
		{"cancelled", Query{States: []job.State{job.Cancelled}}, 100},
		// A search no name or ID matches reads every job (in slices).
		{"search-none", Query{Search: "nothing"}, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if l, _ := ix.list(bc.q, now); len(l.Jobs) != bc.want {
					b.Fatalf("%d jobs, want %d", len(l.Jobs), bc.want)
				}
			}
		})
	}
}

// BenchmarkRetentionRoundMillion takes the oldest 10,000 of a million
// finished jobs out of the listing order, as a retention round at its
// limit does (under the index's write lock), while as many new jobs come
// in between rounds.
func BenchmarkRetentionRoundMillion(b *testing.B) {
	var o jobOrder
	const total, batch = 1_000_000, 10_000
	var oldest []*entry
	for i := range total {
		e := &entry{key: idmap.KeyOf(fmt.Sprintf("j-%08d", i)), submitted: int64(i)}
		o.insert(e)
		if i < batch {
			oldest = append(oldest, e)
		}
	}
	next := total
	for b.Loop() {
		for _, e := range oldest {
			e.deleted = true
		}
		o.removeAll(oldest, func(e *entry) bool { return e.deleted })
		b.StopTimer()
		if o.Len() != total-batch {
			b.Fatalf("%d jobs left, want %d", o.Len(), total-batch)
		}
		// The next round's oldest, and as many new jobs.
		oldest = oldest[:0]
		for e := range o.all() {
			if len(oldest) == batch {
				break
			}
			oldest = append(oldest, e)
		}
		for range batch {
			o.insert(&entry{key: idmap.KeyOf(fmt.Sprintf("j-%08d", next)), submitted: int64(next)})
			next++
		}
		b.StartTimer()
	}
}

// Retention rounds take jobs out of an order whose chunks inserts left
// part-full (a store's start brings records in the order they were last
// written): what is left is every other job, in order, in chunks neither
// empty nor over orderChunk, each with the bits of its jobs, and chunks
// that fit together are merged.
func TestRetentionRoundsKeepTheOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	o := jobOrder{bits: &teamBits{}}
	cmp := func(a, b *entry) int { return cmpKey(a.submitted, a.key, b.submitted, b.key) }
	var want []*entry
	for _, i := range rng.Perm(20_000) {
		team := "vision"
		if i%97 == 0 {
			team = "rare"
		}
		e := &entry{key: idmap.KeyOf(fmt.Sprintf("j-%06d", i)), submitted: int64(i), named: unique.Make(nameTeam{"train", team})}
		o.insert(e)
		want = append(want, e)
	}
	slices.SortFunc(want, cmp)
	before := len(o.chunks)
	for round := range 30 {
		var batch []*entry
		if round%2 == 0 {
			batch = slices.Clone(want[:min(len(want), 700)])
		} else {
			for range 400 {
				batch = append(batch, want[rng.IntN(len(want))])
			}
		}
		gone := map[*entry]bool{}
		for _, e := range batch {
			gone[e] = true
		}
		o.removeAll(batch, func(e *entry) bool { return gone[e] })
		want = slices.DeleteFunc(want, func(e *entry) bool { return gone[e] })
		when := fmt.Sprintf("round %d", round)
		if got := slices.Collect(o.all()); o.Len() != len(want) || !slices.Equal(got, want) {
			t.Fatalf("%s: %d listed (Len %d), want %d in order", when, len(got), o.Len(), len(want))
		}
		for i, ch := range o.chunks {
			if len(ch) == 0 || len(ch) > orderChunk {
				t.Fatalf("%s: chunk %d holds %d entries", when, i, len(ch))
			}
			if i > 0 && len(o.chunks[i-1])+len(ch) <= orderChunk/2 {
				t.Fatalf("%s: chunks %d and %d hold %d and %d entries, not merged", when, i-1, i, len(o.chunks[i-1]), len(ch))
			}
		}
		checkTeams(t, &o, want, when)
	}
	if len(o.chunks) >= before {
		t.Fatalf("%d chunks after taking out %d of 20,000 jobs, %d before", len(o.chunks), 20_000-len(want), before)
	}
}
