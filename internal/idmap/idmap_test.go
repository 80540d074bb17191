package idmap

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

type ref struct {
	a, b int64
	c    uint32
}

// check compares m with the Go map it should equal.
func check(t testing.TB, m *Map[ref], want map[string]ref) {
	t.Helper()
	if m.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", m.Len(), len(want))
	}
	for k, v := range want {
		if got, ok := m.Get(k); !ok || got != v {
			t.Fatalf("Get(%q) = %v, %v; want %v, true", k, got, ok, v)
		}
	}
	seen := 0
	for k, v := range m.All() {
		if w, ok := want[k]; !ok || w != v {
			t.Fatalf("All yields %q = %v; the map has %v, %v", k, v, w, ok)
		}
		seen++
	}
	if seen != len(want) {
		t.Fatalf("All yields %d keys, want %d", seen, len(want))
	}
}

// TestMatchesAGoMap runs random inserts, updates and deletes on a Map and
// a Go map, with real hashes and with hashes that put every key in a few
// slots at the table's end (long runs that wrap around), and checks that
// both hold the same after every step that could break a probe run.
func TestMatchesAGoMap(t *testing.T) {
	for _, tc := range []struct {
		name string
		hash func(string) uint64
		keys int
	}{
		{"maphash", nil, 20_000},
		{"collisions wrapping round", func(k string) uint64 { return uint64(1020 + len(k)%9) }, 600},
		{"all in one slot", func(string) uint64 { return 7 }, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			m := &Map[ref]{hash: tc.hash}
			want := map[string]ref{}
			key := func() string { return fmt.Sprintf("job-%d%s", rng.IntN(tc.keys), strings.Repeat("x", rng.IntN(3))) }
			for step := range 20 * tc.keys {
				k := key()
				switch rng.IntN(3) {
				case 0, 1:
					v := ref{a: int64(step), b: -int64(step), c: uint32(step)}
					m.Put(k, v)
					want[k] = v
				case 2:
					_, had := want[k]
					if got := m.Delete(k); got != had {
						t.Fatalf("step %d: Delete(%q) = %v, want %v", step, k, got, had)
					}
					delete(want, k)
				}
				w, in := want[k]
				if got, ok := m.Get(k); ok != in || got != w {
					t.Fatalf("step %d: Get(%q) = %v, %v; want %v", step, k, got, ok, want[k])
				}
				if step%(tc.keys/4) == 0 {
					check(t, m, want)
				}
			}
			check(t, m, want)
			// Freed items are reused: the chunks hold the most keys ever in
			// the map, not every key ever put.
			if int(m.used) > 3*tc.keys {
				t.Errorf("%d items handed out for at most %d keys at once", m.used, 3*tc.keys)
			}
		})
	}
}

func TestPutKeepsTheStoredKeyAndPutKeyReplacesIt(t *testing.T) {
	var m Map[int]
	first := strings.Clone("job-1")
	m.Put(first, 1)
	second := strings.Clone("job-1")
	m.Put(second, 2)
	stored := func() string {
		for k := range m.All() {
			return k
		}
		return ""
	}
	if v, _ := m.Get("job-1"); v != 2 || unsafe.StringData(stored()) != unsafe.StringData(first) {
		t.Fatalf("after Put of an equal key: value %d, the map keeps the new string: %v", v, unsafe.StringData(stored()) != unsafe.StringData(first))
	}
	m.PutKey(second, 3)
	if v, _ := m.Get("job-1"); v != 3 || unsafe.StringData(stored()) != unsafe.StringData(second) {
		t.Fatalf("after PutKey: value %d, the map kept the old string: %v", v, unsafe.StringData(stored()) == unsafe.StringData(first))
	}
	if m.Len() != 1 {
		t.Fatalf("Len = %d, want 1", m.Len())
	}
}

func TestCloneIsIndependent(t *testing.T) {
	var m Map[ref]
	want := map[string]ref{}
	for i := range 3000 {
		k := fmt.Sprint("job-", i)
		m.Put(k, ref{a: int64(i)})
		want[k] = ref{a: int64(i)}
	}
	c := m.Clone()
	for i := range 1500 {
		m.Delete(fmt.Sprint("job-", i))
		m.Put(fmt.Sprint("new-", i), ref{b: 1})
	}
	check(t, c, want)
	c.Put("job-1", ref{c: 9})
	if v, _ := m.Get("job-1"); v != (ref{}) {
		t.Fatalf("a change to the clone shows in the map: %v", v)
	}
}

func TestZeroMap(t *testing.T) {
	var m Map[int]
	if _, ok := m.Get("x"); ok || m.Delete("x") || m.Len() != 0 {
		t.Fatal("the zero Map is not empty")
	}
	for range m.All() {
		t.Fatal("the zero Map yields a key")
	}
	m.Clone().Put("x", 1)
}

// FuzzOps runs a byte string as operations on a Map and a Go map.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 0, 3, 2, 3, 1, 1})
	f.Add([]byte("put delete put get"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		m := &Map[ref]{hash: func(k string) uint64 { return uint64(k[0]) * 131 }}
		want := map[string]ref{}
		for i := 0; i+1 < len(ops); i += 2 {
			k := fmt.Sprintf("%c%d", 'a'+ops[i+1]%7, ops[i+1])
			if ops[i]%3 == 0 {
				_, had := want[k]
				if m.Delete(k) != had {
					t.Fatalf("Delete(%q) disagrees with a Go map", k)
				}
				delete(want, k)
				continue
			}
			m.Put(k, ref{a: int64(i)})
			want[k] = ref{a: int64(i)}
		}
		check(t, m, want)
	})
}

// BenchmarkMillion puts a million job IDs and reports the bytes the map
// holds for each, beside a Go map of the same values.
func BenchmarkMillion(b *testing.B) {
	type pageRef struct {
		a, b, c    int64
		d, e, f, g uint32
		h, i       bool
		j          uint32
	}
	const n = 1_000_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("01JD%022d", i*7919)
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for b.Loop() {
		before := heap()
		var m Map[pageRef]
		for _, id := range ids {
			m.Put(id, pageRef{d: 1})
		}
		mid := heap()
		g := map[string]pageRef{}
		for _, id := range ids {
			g[id] = pageRef{d: 1}
		}
		after := heap()
		b.ReportMetric(float64(mid-before)/n, "B/entry")
		b.ReportMetric(float64(after-mid)/n, "gomap-B/entry")
		runtime.KeepAlive(&m)
		runtime.KeepAlive(g)
	}
}
