package bidding

import (
	"time"

	"github.com/spotwise/spotwise/money"
)

// Storage list prices per GB-month: object storage (S3 Standard, Azure Blob
// hot, GCS Standard in their main US regions, within a few tenths of a cent
// of each other), where checkpoints go; and block storage (the seeds'
// $0.12/GB-month, EBS gp2-like), for datasets kept on a volume beside the
// instance. Data transfer is Transfer's business.
var (
	ObjectStoragePerGBMonth = money.ObjectStoragePerGBMonth
	BlockStoragePerGBMonth  = money.MustParse("0.12")
)

// StorageCost is what keeping gb gigabytes for d costs at perGBMonth, a
// month being HoursPerMonth hours: exact on whole megabytes (rounded up)
// and nanoseconds, rounded once (money.StorageCost).
func StorageCost(perGBMonth money.Micros, gb float64, d time.Duration) money.Micros {
	return money.StorageCost(perGBMonth, gb, d)
}
