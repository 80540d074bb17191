//go:build !race

package events

// checkStoredForms is off outside race builds (see storedform_race.go).
const checkStoredForms = false
