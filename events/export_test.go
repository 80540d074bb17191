package events

// SetBeforeSeal makes f run between SealJobHistory's read of a job's
// subject and its publication of the seal (nil: nothing).
func SetBeforeSeal(f func(jobID string)) { beforeSeal = f }

// DecodeHistorySeal is decodeHistorySeal with the events it gives.
func DecodeHistorySeal(data []byte, seq uint64) (job string, entries []HistoryEntry, err error) {
	m, err := decodeHistorySeal(data, seq)
	if err != nil {
		return "", nil, err
	}
	return m.Job, m.entries(m.Job), nil
}
