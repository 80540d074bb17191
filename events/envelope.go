package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nuid"
)

// Version is the envelope version this package writes and reads.
const Version = 1

// Envelope wraps every event: version, unique ID (also the JetStream
// de-duplication ID), type, time, source and the typed data.
type Envelope struct {
	Version int             `json:"v"`
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Time    time.Time       `json:"time"`
	Source  string          `json:"source"`
	Data    json.RawMessage `json:"data"`
}

// DecodeError says why a message could not be read as an event. Consumers
// drop such messages (they would fail again) and count them.
type DecodeError struct{ Err error }

func (e *DecodeError) Error() string { return "garbled event: " + e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// IsDecodeError reports whether err is a *DecodeError.
func IsDecodeError(err error) bool {
	var de *DecodeError
	return errors.As(err, &de)
}

// Encode wraps p in an envelope. An empty id gets a fresh unique one.
func Encode(p Payload, id, source string, now time.Time) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", p.EventType(), err)
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", p.EventType(), err)
	}
	if id == "" {
		id = nuid.Next()
	}
	return json.Marshal(Envelope{Version: Version, ID: id, Type: p.EventType(), Time: now.UTC(), Source: source, Data: data})
}

// Decode reads an envelope and its payload, refusing unknown versions and
// types, payloads that do not match their type, and payloads that fail
// validation. Every refusal is a *DecodeError.
func Decode(b []byte) (Envelope, Payload, error) {
	var env Envelope
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return env, nil, &DecodeError{fmt.Errorf("envelope: %w", err)}
	}
	// One message is one envelope: bytes after it (a second envelope
	// glued on, a torn write) make the message garbled, not ignorable.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return env, nil, &DecodeError{fmt.Errorf("envelope: data after the envelope's closing brace at offset %d", dec.InputOffset())}
	}
	if env.Version != Version {
		return env, nil, &DecodeError{fmt.Errorf("envelope version %d, want %d", env.Version, Version)}
	}
	if env.ID == "" || env.Time.IsZero() {
		return env, nil, &DecodeError{errors.New("envelope: id and time are required")}
	}
	if y := env.Time.UTC().Year(); y < 0 || y > 9999 {
		// An offset can carry a time written as year 0 or 9999 out of
		// the range RFC 3339 (and so Encode) can write.
		return env, nil, &DecodeError{fmt.Errorf("envelope: time %s is out of range in UTC", env.Time.Format(time.RFC3339))}
	}
	mk, ok := registry[env.Type]
	if !ok {
		return env, nil, &DecodeError{fmt.Errorf("unknown event type %q", env.Type)}
	}
	p := mk()
	if len(env.Data) == 0 || string(env.Data) == "null" {
		return env, nil, &DecodeError{fmt.Errorf("%s: data is required", env.Type)}
	}
	if err := json.Unmarshal(env.Data, p); err != nil {
		return env, nil, &DecodeError{fmt.Errorf("%s data: %w", env.Type, err)}
	}
	if err := p.Validate(); err != nil {
		return env, nil, &DecodeError{fmt.Errorf("%s: %w", env.Type, err)}
	}
	return env, p, nil
}
