package api

// SetMaxFollowers bounds how many outputs s streams at once (tests).
func SetMaxFollowers(s *Service, n int) { s.maxFollows = n }
