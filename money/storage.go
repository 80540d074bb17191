package money

import (
	"math"
	"math/big"
	"time"
)

// HoursPerMonth is the month storage is priced by (730 hours, as the clouds
// bill GB-months).
const HoursPerMonth = 730

// ObjectStoragePerGBMonth is the list price of object storage (S3 Standard,
// Azure Blob hot, GCS Standard in their main US regions, within a few
// tenths of a cent of each other), where checkpoints are kept.
var ObjectStoragePerGBMonth = MustParse("0.023")

// StorageCost is what keeping gb gigabytes for d costs at perGBMonth: exact
// on whole megabytes (rounded up) and nanoseconds, rounded once (half up).
func StorageCost(perGBMonth Micros, gb float64, d time.Duration) Micros {
	if gb <= 0 || math.IsNaN(gb) || d <= 0 || perGBMonth == 0 {
		return 0
	}
	mb := int64(math.MaxInt64 / 1000)
	if gb < math.MaxInt64/1000 {
		mb = int64(math.Ceil(gb * 1000))
	}
	// price x MB/1000 x d/(730 h)
	num := new(big.Int).Mul(big.NewInt(int64(perGBMonth)), big.NewInt(mb))
	num.Mul(num, big.NewInt(int64(d)))
	neg := num.Sign() < 0
	num.Abs(num)
	den := new(big.Int).Mul(big.NewInt(1000*HoursPerMonth), big.NewInt(int64(time.Hour)))
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Lsh(r, 1).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return saturated(neg)
	}
	if neg {
		return Micros(-q.Int64())
	}
	return Micros(q.Int64())
}
