package idmap

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/job"
)

// TestKeyRoundTrips checks that every form of ID comes back from its Key
// as it went in, that lookups never intern, and that keys order as their
// IDs do.
func TestKeyRoundTrips(t *testing.T) {
	ids := []string{"j-0", "j-z", "j-zzzzzzzzzzzzzzzzzzzzzzzzz", "j-0000000000000000000000000",
		"j-00000000000000000000000000", "j-7zzzzzzzzzzzzzzzzzzzzzzzzz", "j-zzzzzzzzzzzzzzzzzzzzzzzzzz",
		"j-k0000000000000000000000001", "j-8000000000000000000000000k",
		job.IDForKey("team", "key"), job.NewID(time.Now()), job.NewID(time.Unix(0, 0)),
		"j-zzzzzzzzzzzzzzzzzzzzzzzzzzz", "job-1", "J-1", "j-", "", "j-ab%cd", "x",
		strings.Repeat("j", 64)}
	for _, id := range ids {
		k := KeyOf(id)
		if got := k.String(); got != id {
			t.Errorf("KeyOf(%q).String() = %q", id, got)
		}
		if Lookup(id) != k {
			t.Errorf("Lookup(%q) differs from KeyOf", id)
		}
		if k.IsZero() != (id == "") && !(id == "" && k[0] == tagInterned) {
			t.Errorf("KeyOf(%q).IsZero() = %v", id, k.IsZero())
		}
	}
	// Distinct IDs, distinct keys.
	seen := map[Key]string{}
	for _, id := range ids {
		if o, dup := seen[KeyOf(id)]; dup && o != id {
			t.Errorf("%q and %q have the same key", o, id)
		}
		seen[KeyOf(id)] = id
	}
	interned.Lock()
	n := len(interned.ids)
	interned.Unlock()
	if k := Lookup("j-never-seen-before!"); !k.IsZero() {
		t.Errorf("Lookup of an ID never keyed: %v, want the zero Key", k)
	}
	interned.Lock()
	defer interned.Unlock()
	if len(interned.ids) != n {
		t.Errorf("Lookup interned an ID")
	}
}

func TestKeysOrderAsTheirIDs(t *testing.T) {
	var ids []string
	for i := range 300 {
		ids = append(ids, job.NewID(time.UnixMilli(int64(i%7)*1e12)), job.IDForKey("t", fmt.Sprint(i)),
			fmt.Sprintf("j-%x", i), fmt.Sprintf("j-%d", i*37))
	}
	ids = append(ids, "job-2", "job-10", "j-zzzzzzzzzzzzzzzzzzzzzzzzzzz")
	keys := make([]Key, len(ids))
	for i, id := range ids {
		keys[i] = KeyOf(id)
	}
	slices.SortFunc(keys, Key.Compare)
	slices.Sort(ids)
	for i := range ids {
		if got := keys[i].String(); got != ids[i] {
			t.Fatalf("sorted keys differ from sorted IDs at %d: %q, want %q", i, got, ids[i])
		}
	}
}

// FuzzKey checks that any string comes back from its Key.
func FuzzKey(f *testing.F) {
	f.Add("j-01jd0000000000000000000000")
	f.Add("j-k")
	f.Add("j-zz")
	f.Fuzz(func(t *testing.T, id string) {
		k := Lookup(id)
		if !k.IsZero() && k.String() != id {
			t.Fatalf("Lookup(%q).String() = %q", id, k.String())
		}
		if _, ok := encode(id); ok && k.IsZero() {
			t.Fatalf("an encodable ID %q has no key", id)
		}
	})
}
