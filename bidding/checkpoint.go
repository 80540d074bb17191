package bidding

import (
	"math"
	"time"
)

// Bounds on the periodic checkpoint interval.
const (
	MinCheckpointInterval = 10 * time.Minute
	MaxCheckpointInterval = 12 * time.Hour
)

// CheckpointInterval is the Young/Daly optimum time between periodic
// checkpoints, sqrt(2 x checkpoint time x mean time between interruptions),
// within [MinCheckpointInterval, MaxCheckpointInterval]. An interruption
// rate of zero (capacity that is not taken back) gives the maximum.
func CheckpointInterval(checkpoint time.Duration, interruptionsPerHour float64) time.Duration {
	if checkpoint <= 0 || interruptionsPerHour <= 0 || math.IsNaN(interruptionsPerHour) {
		return MaxCheckpointInterval
	}
	mtbi := time.Hour.Seconds() / interruptionsPerHour
	iv := time.Duration(math.Sqrt(2*checkpoint.Seconds()*mtbi) * float64(time.Second))
	return min(max(iv, MinCheckpointInterval), MaxCheckpointInterval)
}
