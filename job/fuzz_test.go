package job

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse holds Parse to its contract on any input: it does not panic,
// and it returns either a valid spec that survives being stored (as JSON)
// and read again, or a *ValidationError whose every problem says something.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 2m ./job/
func FuzzParse(f *testing.F) {
	examples, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(examples) == 0 {
		f.Fatalf("no example specs in ../examples (%v)", err)
	}
	var specs []string
	for _, name := range examples {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		specs = append(specs, string(data))
		if s, err := Parse(data, vocab); err == nil {
			f.Add(mustJSON(f, s))
		}
	}
	for _, s := range specs {
		f.Add([]byte(s))
	}
	base := string(yamlSpec(nil))
	for _, seed := range []string{
		// Several documents, and markers that are not separators.
		specs[0] + "---\n" + specs[1],
		"---\n" + base + "---\n",
		"---\n---\n" + base + "...\n",
		strings.Replace(base, "name: bert", "name: |\n  a\n  ---\n  b", 1),
		strings.Replace(base, "name: bert", `name: "---"`, 1),
		"--- {a: 1}\n--- [b]\n",
		// Huge, tiny and odd numbers.
		strings.Replace(base, "gpus_per_node: 8", "gpus_per_node: 99999999999999999999999", 1),
		strings.Replace(base, "6h on V100", "1e308 gpu-hours on V100", 1),
		strings.Replace(base, "6h on V100", "{gpu_hours: .nan, reference_gpu: V100}", 1),
		strings.Replace(base, "6h on V100", "{gpu_hours: 1e-300, reference_gpu: V100}", 1),
		strings.Replace(base, "6h on V100", "9223372036h on V100", 1),
		base + "priority: -9223372036854775809\n",
		base + "max_price_per_hour: 1e400\n",
		base + "deadline: 0001-01-01T00:00:00Z\n",
		base + "deadline: 9999-12-31T23:59:59.999999999Z\n",
		base + "deadline: 2562047h\n",
		base + "checkpoint: {interval: 1000000000000h, size_gb: .inf}\n",
		// Input data: declared, odd sizes, half declared.
		base + "data: {provider: aws, region: us-east-1, size_gb: 500}\n",
		base + "data: {provider: gcp, region: europe-west4, size_gb: .nan}\n",
		base + "data: {region: us-east-1, size_gb: 1e400}\n",
		// Thousands of problems.
		base + "env: {" + strings.Repeat("A: 1, ", 2000) + "}\ncommand: [" + strings.Repeat("[], ", 2000) + "]\n",
		// YAML that does not map to JSON plainly.
		base + "labels: {1: a, true: b, 1.5: c, ~: d}\n",
		base + "env: &e {A: b}\nlabels: *e\n",
		"a: &a [*a]\n",
		"? [a, b]\n: c\n",
		"!!binary aGVsbG8=\n",
		// JSON, and garbage.
		`{"name": "bert", "command": ["x"], "resources": {"gpus_per_node": 1}, "work": "1h on V100"}`,
		`{"name": "bert",}`,
		`null`, `[]`, `"x"`, `0`, "", "\x00", "\xff\xfe", "{", "[", ":", "- - -", "%YAML 1.1\n---\na: 1\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, vocab)
		if err != nil {
			ve, ok := AsValidationError(err)
			if !ok {
				t.Fatalf("error is %T (%v), want *ValidationError", err, err)
			}
			if len(ve.Errors) == 0 {
				t.Fatal("ValidationError lists no problems")
			}
			for _, fe := range ve.Errors {
				if fe.Message == "" {
					t.Fatalf("problem with %q has no message: %v", fe.Field, err)
				}
			}
			return
		}
		stored, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("valid spec cannot be stored: %v", err)
		}
		again, err := Parse(stored, vocab)
		if err != nil {
			t.Fatalf("stored spec %s is refused: %v", stored, err)
		}
		if again.Hash() != s.Hash() {
			t.Fatalf("spec changed through JSON:\n before %s\n after  %s", stored, mustJSON(t, again))
		}
	})
}
