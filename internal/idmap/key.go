package idmap

import (
	"bytes"
	"encoding/binary"
	"sync"
)

// Key is a job ID in 17 bytes and no pointer, where its string takes a
// 16-byte header and 28 bytes in a 32-byte slot of its own.
//
// An ID is "j-" and base-32 digits (job.NewID: 26 of them, the first at
// most '7'; job.IDForKey: 'k' and 25). Key's first byte says how the
// digits are kept, the other 16 are a 128-bit number, most significant
// byte first:
//   - up to 25 digits: their number, the byte their count (1-25);
//   - 26 digits: their low 128 bits, the byte 32 plus the first digit's
//     top two bits;
//   - anything else (more digits, other characters: tests, a foreign
//     store): the ID is kept in a table of this process (intern), the
//     number its place there, the byte interned. Such IDs never leave
//     that table, which is small in practice: every ID spotwise makes
//     has 26 digits.
//
// The zero Key is no ID.
type Key [17]byte

const (
	tagWide     = 32  // 26 digits; +0-3, the first digit's top bits
	tagInterned = 255 // kept in interned
	maxNarrow   = 25  // digits a number of 128 bits holds whole
)

// digits is Crockford's base-32 alphabet in lower case (job.NewID's).
const digits = "0123456789abcdefghjkmnpqrstvwxyz"

var digitOf = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := range len(digits) {
		t[digits[i]] = int8(i)
	}
	return t
}()

// interned holds the IDs Key cannot encode, in the order first seen.
var interned struct {
	sync.Mutex
	ids []string
	at  map[string]uint64
}

// KeyOf is id's Key. An ID of a form Key cannot encode is interned: kept
// for as long as the process runs.
func KeyOf(id string) Key {
	if k, ok := encode(id); ok {
		return k
	}
	interned.Lock()
	defer interned.Unlock()
	n, ok := interned.at[id]
	if !ok {
		if interned.at == nil {
			interned.at = map[string]uint64{}
		}
		n = uint64(len(interned.ids))
		interned.ids = append(interned.ids, id)
		interned.at[id] = n
	}
	return internedKey(n)
}

// Lookup is id's Key when one was ever made for it (KeyOf), without
// interning it otherwise: the zero Key, which no table holds. Lookups of
// IDs from a request use it, so that no request adds to the interned IDs.
func Lookup(id string) Key {
	if k, ok := encode(id); ok {
		return k
	}
	interned.Lock()
	defer interned.Unlock()
	if n, ok := interned.at[id]; ok {
		return internedKey(n)
	}
	return Key{}
}

func internedKey(n uint64) Key {
	var k Key
	k[0] = tagInterned
	binary.BigEndian.PutUint64(k[9:], n)
	return k
}

// encode is id's Key when its form has one.
func encode(id string) (Key, bool) {
	var k Key
	if len(id) < 3 || len(id) > 2+maxNarrow+1 || id[0] != 'j' || id[1] != '-' {
		return k, false
	}
	s := id[2:]
	var hi, lo uint64
	for i := range len(s) {
		d := digitOf[s[i]]
		if d < 0 {
			return k, false
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(d)
	}
	if len(s) <= maxNarrow {
		k[0] = byte(len(s))
	} else {
		// The 26th digit shifted the first's top two bits out of hi.
		k[0] = tagWide + byte(digitOf[s[0]]>>3)
	}
	binary.BigEndian.PutUint64(k[1:], hi)
	binary.BigEndian.PutUint64(k[9:], lo)
	return k, true
}

// IsZero reports whether k is no ID.
func (k Key) IsZero() bool { return k[0] == 0 }

// String is the ID k stands for ("" for the zero Key).
func (k Key) String() string {
	var buf [2 + maxNarrow + 1]byte
	return string(k.AppendTo(buf[:0]))
}

// AppendTo appends the ID k stands for to b.
func (k Key) AppendTo(b []byte) []byte {
	tag := k[0]
	switch {
	case tag == 0:
		return b
	case tag == tagInterned:
		n := binary.BigEndian.Uint64(k[9:])
		interned.Lock()
		defer interned.Unlock()
		return append(b, interned.ids[n]...)
	}
	hi, lo := binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[9:])
	n, top := int(tag), byte(0)
	if tag >= tagWide {
		n, top = maxNarrow+1, (tag-tagWide)<<3
	}
	b = append(b, 'j', '-')
	start := len(b)
	b = append(b, make([]byte, n)...)
	for i := n - 1; i >= 0; i-- {
		b[start+i] = digits[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	if n == maxNarrow+1 {
		b[start] = digits[digitOf[b[start]]|int8(top)]
	}
	return b
}

// Compare orders keys as their IDs' strings order.
func (k Key) Compare(o Key) int {
	if k[0] == o[0] && k[0] != tagInterned {
		// The same number of digits: the numbers order as the strings.
		return bytes.Compare(k[1:], o[1:])
	}
	var a, b [64]byte
	return bytes.Compare(k.AppendTo(a[:0]), o.AppendTo(b[:0]))
}
