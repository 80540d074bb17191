package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/providers"
)

// Orphan is the overhead entry of an instance no job owns, from its launch
// to its end, each price segment at its price as its provider bills it.
// key is the launch it came from; its job, if its tags name one, is kept
// as a label, not billed.
func Orphan(in providers.Instance, key string, at time.Time) Entry {
	e := Entry{ID: "overhead/" + in.ID, Kind: Overhead, Category: OverheadOrphan,
		Start: in.LaunchedAt, End: in.EndedAt, PricePerHour: in.Price, Cost: in.Bill(in.EndedAt),
		Quantity: in.EndedAt.Sub(in.LaunchedAt).Hours(), Unit: "Hours",
		Provider: in.Provider, Region: in.Region, Zone: in.Zone, InstanceType: in.InstanceType, Purchase: string(in.Purchase),
		Instance: in.ID, Labels: map[string]string{"launch_key": key}, RecordedAt: at}
	if in.JobID != "" {
		e.Labels["job"] = in.JobID
	}
	return e
}

// AppendOverhead appends an item of overhead once: on its own subject,
// only if the subject is empty. It reports whether this call appended it
// (false: it was there already).
func AppendOverhead(ctx context.Context, bus *events.Bus, e Entry) (bool, error) {
	if err := e.Check(); err != nil {
		return false, err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return false, fmt.Errorf("encoding ledger entry %s: %w", e.ID, err)
	}
	_, err = bus.AppendLedger(ctx, events.LedgerOverheadSubject(e.ID), data, e.ID, 0)
	switch {
	case errors.Is(err, events.ErrLedgerMoved):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
