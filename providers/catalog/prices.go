package catalog

import "github.com/spotwise/spotwise/money"

// p builds a price row from decimal dollar strings as they appear in the
// source; an empty spot means the source gave no usable spot figure.
func p(region, onDemand, spot string) Price {
	pr := Price{Region: region, OnDemand: money.MustParse(onDemand)}
	if spot != "" {
		pr.Spot = money.MustParse(spot)
	}
	return pr
}

// gcpPrice builds a GCP price row. Google prices the machine (vCPU and
// memory) and the attached GPUs as separate SKUs, and so does the source
// feed; the instance price is their sum. Keeping both parts visible makes
// each figure traceable to its source row.
func gcpPrice(region, hostOnDemand, gpuOnDemand, hostSpot, gpuSpot string) Price {
	return Price{
		Region:   region,
		OnDemand: money.MustParse(hostOnDemand) + money.MustParse(gpuOnDemand),
		Spot:     money.MustParse(hostSpot) + money.MustParse(gpuSpot),
	}
}
