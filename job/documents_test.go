package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

func TestDocuments(t *testing.T) {
	spec := string(yamlSpec(nil))
	tests := []struct {
		name string
		in   string
		want []string // the names of the specs found, in order
	}{
		{"one document", spec, []string{"bert"}},
		{"a leading marker", "---\n" + spec, []string{"bert"}},
		{"a trailing marker", spec + "---\n", []string{"bert"}},
		{"an end marker", spec + "...\n", []string{"bert"}},
		{"empty documents around one", "---\n---\n" + spec + "---\n# the end\n---\n", []string{"bert"}},
		{"a marker inside a block scalar", strings.Replace(spec, `command: ["python", "train.py"]`,
			"command:\n  - sh\n  - |\n    echo a\n    ---\n    echo b", 1), []string{"bert"}},
		{"a marker inside quotes", strings.Replace(spec, "name: bert", `name: "---"`, 1), []string{"---"}},
		{"a marker inside a quoted string over lines", strings.Replace(spec, "name: bert", "name: 'bert\n\n  --- x'", 1), []string{"bert\n--- x"}},
		{"three documents", spec + "---\n" + strings.Replace(spec, "bert", "gpt", 1) + "---\n" + strings.Replace(spec, "bert", "t5", 1),
			[]string{"bert", "gpt", "t5"}},
		{"flow documents on marker lines", "--- {name: a}\n--- {name: b}\n", []string{"a", "b"}},
		{"nothing", "", nil},
		{"only comments", "# nothing\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := Documents([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range docs {
				var s struct{ Name string }
				if err := json.Unmarshal(d, &s); err != nil {
					t.Fatalf("document is not JSON: %v\n%s", err, d)
				}
				names = append(names, s.Name)
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.want) {
				t.Errorf("documents name %q, want %q", names, tt.want)
			}
		})
	}
	t.Run("a broken document", func(t *testing.T) {
		// The line is counted in the whole stream, where the user looks.
		line := fmt.Sprintf("line %d:", strings.Count(spec, "\n")+2)
		_, err := Documents([]byte(spec + "---\nname: [x\n"))
		if err == nil || !strings.Contains(err.Error(), line) {
			t.Errorf("error = %v, want one naming %s", err, line)
		}
	})
}

func TestParseMultiDocument(t *testing.T) {
	t.Run("300 documents make no job", func(t *testing.T) {
		var b strings.Builder
		for i := range 300 {
			b.WriteString("---\n")
			b.Write(yamlSpec(map[string]string{"name": fmt.Sprintf("job-%d", i)}))
		}
		checkFieldErrors(t, validationErrors(t, []byte(b.String())), []FieldError{
			{"", "spec has 300 YAML documents; submit one job per document (spotwise submit splits a file for you)"},
		})
	})
	t.Run("each document parses as its own spec", func(t *testing.T) {
		docs, err := Documents([]byte("---\n" + string(yamlSpec(nil)) + "---\n" + string(yamlSpec(map[string]string{"priority": "7"}))))
		if err != nil || len(docs) != 2 {
			t.Fatalf("Documents = %d documents, %v", len(docs), err)
		}
		a, b, base := mustParse(t, docs[0]), mustParse(t, docs[1]), mustParse(t, yamlSpec(nil))
		if a.Hash() != base.Hash() || b.Prio() != 7 {
			t.Errorf("documents parse as %s and %s", mustJSON(t, a), mustJSON(t, b))
		}
	})
}

// documentsViaYAMLToJSON is how Documents converted each document before
// it converted the decoded value directly: written back out as YAML and
// handed to sigs.k8s.io/yaml. Documents must give the same JSON.
func documentsViaYAMLToJSON(data []byte) ([][]byte, error) {
	return eachDocument(data, func(v any) ([]byte, error) {
		one, err := yamlv2.Marshal(v)
		if err != nil {
			return nil, err
		}
		return yaml.YAMLToJSON(one)
	})
}

// sameDocuments fails t when Documents and the conversion through
// sigs.k8s.io/yaml disagree on in: other JSON, or one refusing what the
// other takes.
func sameDocuments(t testing.TB, in []byte) {
	got, err := Documents(in)
	want, werr := documentsViaYAMLToJSON(in)
	if (err == nil) != (werr == nil) {
		t.Fatalf("Documents(%q) error %v, through YAMLToJSON %v", in, err, werr)
	}
	if len(got) != len(want) {
		t.Fatalf("Documents(%q) = %d documents, through YAMLToJSON %d", in, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("Documents(%q) document %d:\n%s\nthrough YAMLToJSON:\n%s", in, i, got[i], want[i])
		}
	}
}

func TestDocumentsConvertAsYAMLToJSONDoes(t *testing.T) {
	examples, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example specs in ../examples (%v)", err)
	}
	for _, name := range examples {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(name), func(t *testing.T) { sameDocuments(t, data) })
	}
	for _, in := range []string{
		string(yamlSpec(nil)),
		"1: a\n2.5: b\ntrue: c\n-3: d\n0x10: e\n1e3: f\n.inf: g\n-.inf: h\n",
		"18446744073709551615: big\n9223372036854775808: bigger\n",
		"a: {1: [x, {2: y}], false: null}\n",
		"a: [1, 2.5, -3, 1e400, .nan]\n",
		"a: 2001-12-14t21:59:43.10-05:00\nb: 2002-12-14\n",
		"a: !!binary aGVsbG8=\nb: !!str 12\nc: '0o17'\nd: 0o17\ne: 017\n",
		"base: &b {x: 1}\nmerged: {<<: *b, y: 2}\n",
		"~: nothing\n",
		"[1, 2]: pair\n",
		"a: \"\\u00e9\\t\"\nb: |\n  line\n  ---\n",
		"--- {a: 1}\n--- [b]\n--- 3\n--- x\n",
	} {
		t.Run(in, func(t *testing.T) { sameDocuments(t, []byte(in)) })
	}
}

// FuzzDocuments holds Documents to the conversion it replaced.
//
//	go test -run '^$' -fuzz FuzzDocuments -fuzztime 2m ./job/
func FuzzDocuments(f *testing.F) {
	for _, s := range []string{string(yamlSpec(nil)), "1: a\ntrue: b\n1.5: c\n", "--- {a: 1}\n--- [b]\n", "a: [1, .inf]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > MaxSpecBytes {
			return
		}
		sameDocuments(t, in)
	})
}
