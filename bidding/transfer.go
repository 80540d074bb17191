package bidding

import (
	"math"
	"time"

	"github.com/spotwise/spotwise/money"
)

// Data transfer list prices per GB, the common published figures of the
// big three clouds (AWS, Azure and GCP are within a cent of each other):
// between regions of one cloud, and out of a cloud to another.
var (
	InterRegionPerGB = money.MustParse("0.02")
	EgressPerGB      = money.MustParse("0.09")
)

// Sustained throughput assumed for moving a checkpoint: between regions of
// one cloud, and across clouds over the internet (bytes per second).
const (
	interRegionBytesPerSec = 250e6
	crossCloudBytesPerSec  = 100e6
)

// Transfer is what moving gb gigabytes of checkpoint from one provider
// region to another costs and how long it takes; nothing within a region.
func Transfer(fromProvider, fromRegion, toProvider, toRegion string, gb float64) (time.Duration, money.Micros) {
	if gb <= 0 || math.IsNaN(gb) || (fromProvider == toProvider && fromRegion == toRegion) || fromProvider == "" {
		return 0, 0
	}
	price, rate := InterRegionPerGB, interRegionBytesPerSec
	if fromProvider != toProvider {
		price, rate = EgressPerGB, crossCloudBytesPerSec
	}
	// Per-GB prices are applied to whole megabytes, exactly.
	mb := int64(math.Ceil(gb * 1000))
	cost := price.Scale(mb, 1000)
	d := time.Duration(gb * 1e9 / rate * float64(time.Second))
	return d, cost
}
