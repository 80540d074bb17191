//go:build race

package events

// checkStoredForms is on in race builds, which are the tests': every
// version the store keeps in its stored form is checked against a real
// decoding of what was written.
const checkStoredForms = true
