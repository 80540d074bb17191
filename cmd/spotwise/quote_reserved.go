package main

import (
	"fmt"
	"os"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/bidding"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// reservationsFile is the format of --reservations: reserved capacity a
// team already has, with how much of it is idle now.
type reservationsFile struct {
	Reservations []reservationEntry `json:"reservations"`
}

type reservationEntry struct {
	bidding.Commitment
	// Zone is where the reserved instances run (default: the region's
	// first zone with an on-demand offer of the type).
	Zone string `json:"zone,omitempty"`
	// Free is how many instances are idle now (default: all); Left how
	// much of the term remains (default: all of it).
	Free *int         `json:"free,omitempty"`
	Left job.Duration `json:"left,omitempty"`
}

type quoteReservation struct {
	bidding.Reservation
	offer providers.Offer
}

// loadReservations reads a reservations file and makes an offer of each,
// priced at zero: its idle hours are already paid for.
func loadReservations(path string, cat *catalog.Catalog, book []providers.Offer) (map[string]quoteReservation, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file reservationsFile
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]quoteReservation{}
	for i, e := range file.Reservations {
		where := fmt.Sprintf("%s: reservations[%d]", path, i)
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if _, ok := cat.InstanceType(e.Provider, e.InstanceType); !ok {
			return nil, fmt.Errorf("%s: %s %q is not in the catalog", where, e.Provider, e.InstanceType)
		}
		// The reserved offer is the on-demand offer of the same shape and
		// zone, bought differently.
		k := slices.IndexFunc(book, func(o providers.Offer) bool {
			return o.Provider == e.Provider && o.Region == e.Region && o.InstanceType == e.InstanceType &&
				o.Purchase == providers.OnDemand && (e.Zone == "" || o.Zone == e.Zone)
		})
		if k < 0 {
			return nil, fmt.Errorf("%s: no %s offer in %s %s", where, e.InstanceType, e.Region, e.Zone)
		}
		o := book[k]
		free := max(1, e.Instances)
		if e.Free != nil {
			if *e.Free < 0 || *e.Free > free {
				return nil, fmt.Errorf("%s: free %d: between 0 and the %d instances", where, *e.Free, free)
			}
			free = *e.Free
		}
		left := e.Left.D()
		if left == 0 {
			left = e.Term.Duration()
		}
		o.Purchase, o.Price, o.Available, o.Capacity = providers.Reserved, 0, free, providers.CapacityHigh
		if free == 0 {
			o.Capacity = providers.CapacityNone
		}
		out[o.ID()] = quoteReservation{
			Reservation: bidding.Reservation{Commitment: e.Commitment, Free: free, Left: left, Overflow: o.OnDemandPrice},
			offer:       o,
		}
	}
	return out, nil
}
