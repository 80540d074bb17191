package bidding

import (
	"math/big"
	"time"

	"github.com/spotwise/spotwise/money"
)

// Storage list prices per GB-month: object storage (S3 Standard, Azure Blob
// hot, GCS Standard in their main US regions, within a few tenths of a cent
// of each other), where checkpoints go; and block storage (the seeds'
// $0.12/GB-month, EBS gp2-like), for datasets kept on a volume beside the
// instance. Data transfer is Transfer's business.
var (
	ObjectStoragePerGBMonth = money.MustParse("0.023")
	BlockStoragePerGBMonth  = money.MustParse("0.12")
)

// StorageCost is what keeping gb gigabytes for d costs at perGBMonth, a
// month being HoursPerMonth hours: exact on whole megabytes (rounded up)
// and nanoseconds, rounded once.
func StorageCost(perGBMonth money.Micros, gb float64, d time.Duration) money.Micros {
	mb := megabytes(gb)
	if mb == 0 || d <= 0 || perGBMonth == 0 {
		return 0
	}
	// price x MB/1000 x d/(730 h)
	den := new(big.Int).Mul(big.NewInt(1000*HoursPerMonth), big.NewInt(int64(time.Hour)))
	return exactRatio(den, []int64{int64(perGBMonth), mb, int64(d)})
}
