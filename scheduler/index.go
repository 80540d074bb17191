package scheduler

import (
	"cmp"
	"slices"
	"time"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/providers"
)

// offerIndex is what compiling an offer book needs that changes only with
// the book's offers (not with their available counts, the capacity marks or
// the clock): each offer's ID and scope keys, and the offers in the order
// placement walks them (by GPU type, cheapest first). The scheduler's book
// keeps one between price updates, so that a cycle does not rebuild every
// offer's names; a Snapshot without one gets one built for it.
type offerIndex struct {
	offers []providers.Offer // what it indexes (shared, read only)
	ids    []string
	keys   [][]string
	order  []int32            // into offers: by GPU name, price, ID
	byKey  map[string][]int32 // the offers each scope key covers
}

func indexOffers(offers []providers.Offer) *offerIndex {
	ix := &offerIndex{offers: offers, ids: make([]string, len(offers)), keys: make([][]string, len(offers)), order: make([]int32, len(offers)),
		byKey: map[string][]int32{}}
	for i := range offers {
		ix.ids[i] = offers[i].ID()
		ix.keys[i] = providers.ScopeKeys(offers[i])
		ix.order[i] = int32(i)
		for _, k := range ix.keys[i] {
			ix.byKey[k] = append(ix.byKey[k], int32(i))
		}
	}
	slices.SortFunc(ix.order, func(a, b int32) int {
		if c := cmp.Compare(offers[a].GPU, offers[b].GPU); c != 0 {
			return c
		}
		if c := cmp.Compare(offers[a].Price, offers[b].Price); c != 0 {
			return c
		}
		return cmp.Compare(ix.ids[a], ix.ids[b])
	})
	return ix
}

// of returns ix when it indexes offers, and a new index otherwise.
func (ix *offerIndex) of(offers []providers.Offer) *offerIndex {
	if ix != nil && len(ix.offers) == len(offers) && (len(offers) == 0 || &ix.offers[0] == &offers[0]) {
		return ix
	}
	return indexOffers(offers)
}

// withAvailable is ix over offers that differ from its own only in their
// available counts (same offers, same order).
func (ix *offerIndex) withAvailable(offers []providers.Offer) *offerIndex {
	if ix == nil || len(ix.offers) != len(offers) {
		return nil
	}
	c := *ix
	c.offers = offers
	return &c
}

// blocked says which offers a capacity mark in force at now covers (nil:
// none); marks are few, so this looks at the offers each one covers.
func (ix *offerIndex) blocked(unavailable map[string]time.Time, now time.Time) []bool {
	var out []bool
	for k, until := range unavailable {
		if !now.Before(until) {
			continue
		}
		for _, i := range ix.byKey[k] {
			if out == nil {
				out = make([]bool, len(ix.offers))
			}
			out[i] = true
		}
	}
	return out
}

// offerBase is the part of a compiled offer book that changes only with
// the index and the rates: each offer's GPU group, region and rate, the
// groups' members cheapest first, the regions with their geographies, and
// the spot zones. The book keeps one until one of those changes; a cycle
// then only lays the offers' counts and the capacity marks over it.
type offerBase struct {
	ix      *offerIndex
	gpuIdx  map[string]int
	groups  []baseGroup
	regions []regionKey
	geos    []string // geography of each region
	per     []baseOffer
	zones   []ZoneKey // of spot offers, and each GPU type's ZoneKey{Zone: "*"}
}

type baseGroup struct {
	name       string
	members    []int32 // offer positions, cheapest first
	minStartup time.Duration
}

type baseOffer struct {
	gpu, region   int32
	zone, anyZone int32 // into zones; -1: not spot
	rate          float64
}

func compileBase(ix *offerIndex, rates map[string]float64, geography func(provider, region string) string) *offerBase {
	offers := ix.offers
	b := &offerBase{ix: ix, gpuIdx: map[string]int{}, per: make([]baseOffer, len(offers))}
	regionIdx := map[regionKey]int32{}
	zoneIdx := map[ZoneKey]int32{}
	zone := func(k ZoneKey) int32 {
		z, ok := zoneIdx[k]
		if !ok {
			z = int32(len(b.zones))
			zoneIdx[k] = z
			b.zones = append(b.zones, k)
		}
		return z
	}
	// In the index's order, each group's members come cheapest first.
	for _, i := range ix.order {
		o := &offers[i]
		g, ok := b.gpuIdx[o.GPU]
		if !ok {
			g = len(b.groups)
			b.gpuIdx[o.GPU] = g
			b.groups = append(b.groups, baseGroup{name: o.GPU, minStartup: o.LaunchLatency})
		}
		grp := &b.groups[g]
		grp.members = append(grp.members, i)
		grp.minStartup = min(grp.minStartup, o.LaunchLatency)
		rk := regionKey{o.Provider, o.Region}
		r, ok := regionIdx[rk]
		if !ok {
			r = int32(len(b.regions))
			regionIdx[rk] = r
			b.regions = append(b.regions, rk)
			geo := ""
			if geography != nil {
				geo = geography(o.Provider, o.Region)
			}
			b.geos = append(b.geos, geo)
		}
		p := &b.per[i]
		p.gpu, p.region, p.zone, p.anyZone = int32(g), r, -1, -1
		if o.Purchase == providers.Spot {
			p.zone = zone(ZoneKey{o.Provider, o.Zone, o.GPU})
			p.anyZone = zone(ZoneKey{Zone: "*", GPU: o.GPU})
		}
		var has bool
		if p.rate, has = rates[ix.ids[i]]; !has {
			p.rate = bidding.PriorRate(o.Provider, o.Purchase)
		}
	}
	return b
}

// zonesUp says, for each of the base's zones (by index into b.zones),
// whether any of its spot offers has capacity now (a count other than
// zero, not marked); up's array is reused when it is large enough.
func (b *offerBase) zonesUp(up []bool, offers []providers.Offer, unavailable map[string]time.Time, taken map[string]int, now time.Time) []bool {
	blocked := b.ix.blocked(unavailable, now)
	up = resize(up, len(b.zones))
	clear(up)
	var gone map[int32]bool // offers launches took all of
	for id, n := range taken {
		for _, i := range b.ix.byKey[id] {
			if a := offers[i].Available; a > 0 && n >= a {
				if gone == nil {
					gone = map[int32]bool{}
				}
				gone[i] = true
			}
		}
	}
	for i := range offers {
		p := &b.per[i]
		if p.zone < 0 || (blocked != nil && blocked[i]) || gone[int32(i)] {
			continue
		}
		o := &offers[i]
		if o.Available != 0 && o.Capacity != providers.CapacityNone {
			up[p.zone], up[p.anyZone] = true, true
		}
	}
	return up
}
