package scheduler

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/spotwise/spotwise/providers"
)

// The book's offer index is kept across updates that change only
// available counts (a launch, a feed reporting it) and rebuilt when a
// price or an offer changes; whichever it does, a cycle sees the index a
// fresh build of the same offers would give, in the same cheapest-first
// order.
func TestBookIndexFollowsTheOffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all := benchBook(300, rng)
	byRegion := map[string][]providers.Offer{}
	var regions []string
	for _, o := range all {
		if byRegion[o.Region] == nil {
			regions = append(regions, o.Region)
		}
		byRegion[o.Region] = append(byRegion[o.Region], o)
	}
	b := newBook()
	for _, r := range regions {
		b.replace("aws", r, byRegion[r])
	}
	now := time.Unix(0, 0)
	check := func(step string, wantReused bool, prev *offerIndex) *offerIndex {
		t.Helper()
		bv := b.snapshot(now)
		fresh := indexOffers(bv.offers)
		if !reflect.DeepEqual(bv.index.ids, fresh.ids) || !reflect.DeepEqual(bv.index.keys, fresh.keys) || !reflect.DeepEqual(bv.index.order, fresh.order) {
			t.Fatalf("%s: the book's index differs from a fresh one", step)
		}
		if &bv.index.offers[0] != &bv.offers[0] {
			t.Fatalf("%s: the index is of other offers than the snapshot's", step)
		}
		want := compileBase(fresh, bv.rates, nil)
		want.ix = bv.base.ix
		if !reflect.DeepEqual(bv.base, want) {
			t.Fatalf("%s: the book's compiled base differs from a fresh one", step)
		}
		if reused := prev != nil && &bv.index.order[0] == &prev.order[0]; reused != wantReused {
			t.Fatalf("%s: index reused %v, want %v", step, reused, wantReused)
		}
		return bv.index
	}
	ix := check("first look", false, nil)

	// A launch takes capacity: same index, new counts, and the offers are
	// not copied for it (a launch a cycle would otherwise copy the book).
	o := byRegion[regions[2]][1]
	before := b.snapshot(now).offers
	b.take(o, 2, "")
	ix = check("after a take", true, ix)
	if got, _ := b.lookup(o.Provider, o.Region, o.ID()); got.Available != o.Available-2 {
		t.Fatalf("available after take: %d, want %d", got.Available, o.Available-2)
	}
	bv := b.snapshot(now)
	if &bv.offers[0] != &before[0] {
		t.Error("a take copied the book's offers")
	}
	co := compileOffers(bv.offers, bv.base, bv.unavailable, bv.taken, now)
	for _, c := range co.all {
		if c.id == o.ID() && c.available != o.Available-2 {
			t.Fatalf("compiled after take: %d available, want %d", c.available, o.Available-2)
		}
	}

	// The feed then reports the launch: a count under what it said
	// before, over what the take assumed. That is no news for waiting jobs.
	v0 := b.snapshot(now).version
	fed := append([]providers.Offer(nil), byRegion[regions[2]]...)
	fed[1].Available--
	b.replace("aws", regions[2], fed)
	if got, _ := b.lookup(o.Provider, o.Region, o.ID()); got.Available != o.Available-1 {
		t.Fatalf("available after the feed: %d, want %d", got.Available, o.Available-1)
	}
	if b.snapshot(now).version != v0 {
		t.Fatal("the feed catching up on a take had waiting jobs looked at again")
	}
	ix = check("after the feed caught up", true, ix)

	// The feed reports counts: same index. A lower count (what a launch
	// there reports) cannot let a waiting job fit, so the version, which
	// has waiting jobs looked at again, stays; a higher one moves it.
	version := func() uint64 { return b.snapshot(now).version }
	v := version()
	up := append([]providers.Offer(nil), byRegion[regions[0]]...)
	up[0].Available--
	up[1].Price++
	if !b.replace("aws", regions[0], up) {
		t.Fatal("a changed count is a change")
	}
	ix = check("after a count went down", false, ix) // the price moved too
	if version() != v {
		t.Fatal("a lower count and a higher price had waiting jobs looked at again")
	}
	up = append([]providers.Offer(nil), up...)
	up[0].Available += 3
	b.replace("aws", regions[0], up)
	ix = check("after a count went up", true, ix)
	if version() == v {
		t.Fatal("a higher count did not have waiting jobs looked at again")
	}

	// A price moves: rebuilt, and the order follows the new price.
	up = append([]providers.Offer(nil), up...)
	up[3].Price = 1
	v = version()
	b.replace("aws", regions[0], up)
	ix = check("after a price changed", false, ix)
	if version() == v {
		t.Fatal("a lower price did not have waiting jobs looked at again")
	}
	first := ix.offers[ix.order[0]]
	if first.Price != 1 && first.GPU == up[3].GPU {
		t.Fatalf("the cheapest offer of %s is %s at %s", first.GPU, first.ID(), first.Price)
	}

	// An offer goes away: rebuilt.
	b.replace("aws", regions[1], byRegion[regions[1]][1:])
	ix = check("after an offer went", false, ix)

	// A launch refused for capacity marks a zone: the same index and base,
	// and offers blocked by the mark until it lapses.
	marked := byRegion[regions[4]][0]
	b.markUnavailable(providers.ScopeKey(providers.ScopeZone, marked), now.Add(time.Minute))
	ix = check("after a mark", true, ix)
	blocked := func() int {
		bv := b.snapshot(now)
		co := compileOffers(bv.offers, bv.base, bv.unavailable, bv.taken, now)
		n := 0
		for _, o := range co.all {
			if o.blocked {
				n++
				if o.offer.Zone != marked.Zone {
					t.Fatalf("%s blocked by a mark on zone %s", o.id, marked.Zone)
				}
			}
		}
		return n
	}
	if n := blocked(); n == 0 {
		t.Fatal("no offer blocked by the zone's mark")
	}
	now = now.Add(time.Minute)
	check("after the mark lapsed", true, ix)
	if n := blocked(); n != 0 {
		t.Fatalf("%d offers still blocked after the mark lapsed", n)
	}
}

// A feed update counted before the scheduler's launches reached the
// provider does not hand their capacity out again: what launches under way
// took stays taken until each is back, and then the feed's count is the
// book's.
func TestBookKeepsWhatLaunchesUnderWayTook(t *testing.T) {
	o := providers.Offer{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g5.xlarge", GPU: "A10G", GPUs: 1,
		Purchase: providers.OnDemand, Price: 1_000_000, Available: 10}
	b := newBook()
	b.replace(o.Provider, o.Region, []providers.Offer{o})
	avail := func() int {
		got, _ := b.lookup(o.Provider, o.Region, o.ID())
		return got.Available
	}
	feed := func(n int) {
		f := o
		f.Available = n
		b.replace(o.Provider, o.Region, []providers.Offer{f})
	}
	b.take(o, 3, "j-1-a1")
	b.take(o, 2, "j-2-a1")
	for _, step := range []struct {
		name string
		do   func()
		want int
	}{
		{"two launches taken", func() {}, 5},
		{"the feed's count from before they reached the provider", func() { feed(10) }, 5},
		{"one bought; the feed counts it", func() { b.launched("j-1-a1", true); feed(7) }, 5},
		{"a launch back twice changes nothing", func() { b.launched("j-1-a1", true); feed(7) }, 5},
		{"the other bought", func() { b.launched("j-2-a1", true) }, 5},
		{"and the feed counts both", func() { feed(5) }, 5},
		{"capacity freed elsewhere shows at once", func() { feed(9) }, 9},
		{"a placement that launched nothing gives its take back", func() { b.take(o, 4, "j-3-a1"); feed(9); b.launched("j-3-a1", false) }, 9},
		{"a refused launch gives back no more than the feed says", func() { b.take(o, 4, "j-4-a1"); feed(6); b.launched("j-4-a1", false) }, 6},
	} {
		step.do()
		if got := avail(); got != step.want {
			t.Fatalf("%s: %d available, want %d", step.name, got, step.want)
		}
	}
	if len(b.launching) != 0 || len(b.launchingBy) != 0 {
		t.Fatalf("launches left under way: %v %v", b.launching, b.launchingBy)
	}
}

// Launches that took all of a zone's spot capacity leave the zone down for
// the deadline policy's watch until the feed says otherwise; a zone they
// took part of stays up.
func TestZonesLaunchesEmptiedAreDown(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	spot := func(zone string, n int) providers.Offer {
		return providers.Offer{Provider: "aws", Region: "us-east-1", Zone: zone, InstanceType: "g5.xlarge", GPU: "A10G", GPUs: 1,
			Purchase: providers.Spot, Price: 400_000, OnDemandPrice: 1_000_000, Available: n}
	}
	a, bz := spot("us-east-1a", 2), spot("us-east-1b", 3)
	b := newBook()
	b.replace("aws", "us-east-1", []providers.Offer{a, bz})
	up := func() map[string]bool {
		bv := b.snapshot(now)
		got := map[string]bool{}
		for z, in := range bv.base.zonesUp(nil, bv.offers, bv.unavailable, bv.taken, now) {
			if k := bv.base.zones[z]; k.Zone != "*" {
				got[k.Zone] = in
			}
		}
		co := compileOffers(bv.offers, bv.base, bv.unavailable, bv.taken, now)
		defer co.release()
		for _, c := range co.all {
			if c.offer.Available-c.available != bv.taken[c.id] {
				t.Errorf("%s: compiled %d available of %d, %d taken", c.id, c.available, c.offer.Available, bv.taken[c.id])
			}
		}
		return got
	}
	if got := up(); !got["us-east-1a"] || !got["us-east-1b"] {
		t.Fatalf("before any launch: %v, want both up", got)
	}
	b.take(a, 2, "k1")
	b.take(bz, 1, "k2")
	if got := up(); got["us-east-1a"] || !got["us-east-1b"] {
		t.Fatalf("after launches took all of 1a and part of 1b: %v, want 1a down, 1b up", got)
	}
}
