package job

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
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
