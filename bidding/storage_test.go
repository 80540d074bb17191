package bidding

import (
	"testing"
	"time"

	"github.com/spotwise/spotwise/money"
)

func TestStorageCost(t *testing.T) {
	month := HoursPerMonth * time.Hour
	tests := []struct {
		name  string
		price money.Micros
		gb    float64
		d     time.Duration
		want  string
	}{
		{"4 GB checkpoint in object storage for a month", ObjectStoragePerGBMonth, 4, month, "0.092"},
		{"100 GB dataset on a block volume for a month", BlockStoragePerGBMonth, 100, month, "12"},
		{"4 GB checkpoint for a 2 h job", ObjectStoragePerGBMonth, 4, 2 * time.Hour, "0.000252"}, // 0.023 x 4 x 2/730
		{"1 GB block for an hour", BlockStoragePerGBMonth, 1, time.Hour, "0.000164"},             // 0.12/730
		{"a year of a terabyte in object storage", ObjectStoragePerGBMonth, 1000, 12 * month, "276"},
		{"partial megabytes round up", money.MustParse("1"), 0.0001, month, "0.001"},
		{"nothing kept", ObjectStoragePerGBMonth, 0, month, "0"},
		{"no time", ObjectStoragePerGBMonth, 4, 0, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StorageCost(tt.price, tt.gb, tt.d); got != money.MustParse(tt.want) {
				t.Errorf("StorageCost = %s, want $%s", got.Decimal(), tt.want)
			}
		})
	}
}
