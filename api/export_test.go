package api

// SetMaxFollowers bounds how many outputs s streams at once (tests).
func SetMaxFollowers(s *Service, n int) { s.maxFollows = n }

// PagesReady says whether s's local copy of job pages has caught up.
func PagesReady(s *Service) bool { return s.pages.ready() }
