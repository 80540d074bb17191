package api

// ReadSSE parses an event stream, for the tests.
var ReadSSE = readSSE
