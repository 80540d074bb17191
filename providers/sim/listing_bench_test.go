package sim

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/providers"
)

// BenchmarkLaunchWhileListing is a launch and its terminate on a cloud
// that keeps 60,000 ended instances from the last hour while another
// goroutine lists them without pause, as reconciliation does on an aged
// server: what the listing costs the calls waiting for the cloud's lock.
func BenchmarkLaunchWhileListing(b *testing.B) {
	const ended = 60_000
	clk := clock.NewFake(t0)
	c, err := New(context.Background(), Options{Catalog: testCatalog(b), Clock: clk, Seed: 42, Log: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.SetAvailable(awsSmallOD, ended); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	offer := offerOf(b, c, awsSmallOD)
	launch := func(k int) {
		key := fmt.Sprintf("k%d", k)
		insts, err := c.Launch(ctx, providers.LaunchRequest{IdempotencyKey: key, Offer: offer, Count: 1, JobID: "job-" + key, Attempt: 1})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Terminate(ctx, insts[0].ID); err != nil {
			b.Fatal(err)
		}
	}
	for k := range ended {
		launch(k)
	}
	stop := listAgain(func() bool {
		if _, err := c.InstancesSince(ctx, clk.Now().Add(-time.Hour)); err != nil {
			b.Error(err)
			return false
		}
		return true
	})
	lat := make([]time.Duration, 0, b.N)
	k := ended
	for b.Loop() {
		t := time.Now()
		launch(k)
		lat = append(lat, time.Since(t))
		k++
	}
	stop()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)*999/1000].Microseconds())/1000, "p99.9-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
