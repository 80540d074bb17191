package job

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"strings"
	"time"
)

// crockford is Crockford's base32 alphabet in lower case: no i, l, o, u.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// NewID returns a new job ID: "j-" and 26 characters, time-ordered (48 bits
// of milliseconds) with 80 random bits, safe as a NATS subject token and a
// KV key.
func NewID(now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(now.UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return "j-" + encode(b)
}

// KeyPeriod is how long an idempotency key names one job: the job an
// IDForKeyIn of a period names, found again from the next period (see
// api.Service.Submit).
const KeyPeriod = 24 * time.Hour

// KeyPeriodOf is the period (of KeyPeriod, from the Unix epoch) t is in.
func KeyPeriodOf(t time.Time) int64 { return t.Unix() / int64(KeyPeriod/time.Second) }

// IDForKeyIn derives the ID of the job a client's idempotency key names
// when submitted in a period (KeyPeriodOf), so a retried submission finds
// the job the first one created, and a key used again days later names a
// new job rather than one whose ID (and so whose launches and charges) a
// job of the same key had before retention removed it.
func IDForKeyIn(team, key string, period int64) string {
	// Lengths first: no two (team, key, period) make the same input, nor
	// one of IDForKey's.
	in := "v2:" + strconv.Itoa(len(team)) + ":" + team + strconv.Itoa(len(key)) + ":" + key + strconv.FormatInt(period, 10)
	sum := sha256.Sum256([]byte(in))
	var b [16]byte
	copy(b[:], sum[:16])
	return "j-k" + encode(b)[:25]
}

// IDForKey is the ID an idempotency key named before keys had periods
// (IDForKeyIn): a retry finds a job stored then.
func IDForKey(team, key string) string {
	sum := sha256.Sum256([]byte(team + "\x00" + key))
	var b [16]byte
	copy(b[:], sum[:16])
	return "j-k" + encode(b)[:25]
}

func encode(b [16]byte) string {
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	var sb strings.Builder
	sb.Grow(26)
	// 128 bits as 26 base32 digits, most significant first.
	for i := 25; i >= 0; i-- {
		shift := uint(i * 5)
		var v uint64
		switch {
		case shift >= 64:
			v = hi >> (shift - 64)
		case shift == 0:
			v = lo
		default:
			v = lo>>shift | hi<<(64-shift)
		}
		sb.WriteByte(crockford[v&31])
	}
	return sb.String()
}

// ValidID reports whether s looks like a job ID: it guards subjects and
// keys built from user input.
func ValidID(s string) bool {
	if len(s) < 3 || len(s) > 64 || !strings.HasPrefix(s, "j-") {
		return false
	}
	for _, c := range s[2:] {
		if !strings.ContainsRune(crockford, c) {
			return false
		}
	}
	return true
}
