package job

// PendingReason is one reason a queued job has not been placed, aggregated
// over the offers it was rejected by: "1520 offers: GPU type not
// acceptable (want A100, H100)".
type PendingReason struct {
	// Code is stable for scripts: gpu-type, gpu-memory, gpu-count, vcpus,
	// memory, provider, region, purchase, max-price, capacity,
	// unavailable, deadline, no-offers; quota (the team's GPU or jobs
	// quota), budget (the team's hard monthly budget), max-cost (the
	// job's max_cost_usd).
	Code string `json:"code"`
	// Offers is how many offers were rejected for this reason.
	Offers int `json:"offers"`
	// Message explains it, with the closest example.
	Message string `json:"message"`
}
