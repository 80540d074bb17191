package idmap

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

type ref struct {
	key  Key
	a, b int64
	c    uint32
}

func (r ref) MapKey() Key { return r.key }

// get is the value of id in m, if any.
func get(m *Table[ref], id string) (ref, bool) {
	if p := m.Get(Lookup(id)); p != nil {
		return *p, true
	}
	return ref{}, false
}

// check compares m with the Go map it should equal.
func check(t testing.TB, m *Table[ref], want map[string]ref) {
	t.Helper()
	if m.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", m.Len(), len(want))
	}
	for k, v := range want {
		if got, ok := get(m, k); !ok || got != v {
			t.Fatalf("Get(%q) = %v, %v; want %v, true", k, got, ok, v)
		}
	}
	seen := 0
	for v := range m.All() {
		k := v.key.String()
		if w, ok := want[k]; !ok || w != *v {
			t.Fatalf("All yields %q = %v; the table has %v, %v", k, *v, w, ok)
		}
		seen++
	}
	if seen != len(want) {
		t.Fatalf("All yields %d keys, want %d", seen, len(want))
	}
}

// TestMatchesAGoMap runs random inserts, updates and deletes on a Table
// and a Go map, with real hashes and with hashes that put every key in a
// few slots at the table's end (long runs that wrap around), and checks
// that both hold the same after every step that could break a probe run.
// The IDs are of every form a Key takes: short, 26 digits, interned.
func TestMatchesAGoMap(t *testing.T) {
	for _, tc := range []struct {
		name string
		hash func(Key) uint64
		keys int
	}{
		{"maphash", nil, 8_000},
		{"collisions wrapping round", func(k Key) uint64 { return 1020 + uint64(k[16]%9) }, 300},
		{"all in one slot", func(Key) uint64 { return 7 }, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			m := &Table[ref]{hash: tc.hash}
			want := map[string]ref{}
			key := func() string {
				n := rng.IntN(tc.keys)
				switch rng.IntN(3) {
				case 0:
					return fmt.Sprintf("j-%d", n)
				case 1:
					return fmt.Sprintf("j-%026d", n)
				}
				return fmt.Sprintf("job-%d%s", n, strings.Repeat("x", rng.IntN(3)))
			}
			for step := range 20 * tc.keys {
				k := key()
				switch rng.IntN(3) {
				case 0, 1:
					v := ref{key: KeyOf(k), a: int64(step), b: -int64(step), c: uint32(step)}
					m.Put(v)
					want[k] = v
				case 2:
					_, had := want[k]
					if got := m.Delete(Lookup(k)); got != had {
						t.Fatalf("step %d: Delete(%q) = %v, want %v", step, k, got, had)
					}
					delete(want, k)
				}
				w, in := want[k]
				if got, ok := get(m, k); ok != in || got != w {
					t.Fatalf("step %d: Get(%q) = %v, %v; want %v", step, k, got, ok, want[k])
				}
				if step%(tc.keys/4) == 0 {
					check(t, m, want)
				}
			}
			check(t, m, want)
			// Freed values are reused: the chunks hold the most keys ever
			// in the table, not every key ever put.
			if int(m.used) > 5*tc.keys {
				t.Errorf("%d values handed out for at most %d keys at once", m.used, 5*tc.keys)
			}
		})
	}
}

func TestPutReplacesAndPointersStay(t *testing.T) {
	var m Table[ref]
	p := m.Put(ref{key: KeyOf("j-1"), a: 1})
	for i := range 5000 { // several chunks and growths
		m.Put(ref{key: KeyOf(fmt.Sprint("j-", i+2)), a: int64(i)})
	}
	if q := m.Put(ref{key: KeyOf("j-1"), a: 2}); q != p || p.a != 2 || m.Get(Lookup("j-1")) != p {
		t.Fatalf("Put of a key the table has: %p (a %d), want the value kept at %p", q, p.a, p)
	}
	if m.Len() != 5001 {
		t.Fatalf("Len = %d, want 5001", m.Len())
	}
	if m.Put(ref{a: 1}) != nil || m.Get(Key{}) != nil || m.Delete(Key{}) || m.Len() != 5001 {
		t.Fatal("the zero Key is stored or found")
	}
}

func TestCloneIsIndependent(t *testing.T) {
	var m Table[ref]
	want := map[string]ref{}
	for i := range 3000 {
		k := fmt.Sprint("j-", i)
		m.Put(ref{key: KeyOf(k), a: int64(i)})
		want[k] = ref{key: KeyOf(k), a: int64(i)}
	}
	c := m.Clone()
	for i := range 1500 {
		m.Delete(Lookup(fmt.Sprint("j-", i)))
		m.Put(ref{key: KeyOf(fmt.Sprint("j-new", i)), b: 1})
	}
	check(t, c, want)
	c.Put(ref{key: KeyOf("j-1"), c: 9})
	if v, ok := get(&m, "j-1"); ok {
		t.Fatalf("a change to the clone shows in the table: %v", v)
	}
}

func TestZeroTable(t *testing.T) {
	var m Table[ref]
	if m.Get(KeyOf("j-x")) != nil || m.Delete(KeyOf("j-x")) || m.Len() != 0 {
		t.Fatal("the zero Table is not empty")
	}
	for range m.All() {
		t.Fatal("the zero Table yields a value")
	}
	m.Clone().Put(ref{key: KeyOf("j-x")})
}

// FuzzOps runs a byte string as operations on a Table and a Go map.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 0, 3, 2, 3, 1, 1})
	f.Add([]byte("put delete put get"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		m := &Table[ref]{hash: func(k Key) uint64 { return uint64(k[16]%8) * 131 }}
		want := map[string]ref{}
		for i := 0; i+1 < len(ops); i += 2 {
			k := fmt.Sprintf("j-%c%d", 'a'+ops[i+1]%7, ops[i+1])
			if ops[i]%3 == 0 {
				_, had := want[k]
				if m.Delete(Lookup(k)) != had {
					t.Fatalf("Delete(%q) disagrees with a Go map", k)
				}
				delete(want, k)
				continue
			}
			v := ref{key: KeyOf(k), a: int64(i)}
			m.Put(v)
			want[k] = v
		}
		check(t, m, want)
	})
}

type pageRef struct {
	key        Key
	a, b, c    int64
	d, e, f, g uint32
	h, i       bool
	j          uint32
}

func (r pageRef) MapKey() Key { return r.key }

// BenchmarkMillion puts a million job IDs and reports the bytes the table
// holds for each, beside a Go map of the same values by their IDs.
func BenchmarkMillion(b *testing.B) {
	const n = 1_000_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("j-01jd%022d", i*7919)
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for b.Loop() {
		before := heap()
		var m Table[pageRef]
		for _, id := range ids {
			m.Put(pageRef{key: KeyOf(id), d: 1})
		}
		mid := heap()
		g := map[string]pageRef{}
		for _, id := range ids {
			g[strings.Clone(id)] = pageRef{d: 1}
		}
		after := heap()
		b.ReportMetric(float64(mid-before)/n, "B/entry")
		b.ReportMetric(float64(after-mid)/n, "gomap-B/entry")
		runtime.KeepAlive(&m)
		runtime.KeepAlive(g)
	}
}
