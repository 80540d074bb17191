package job

import (
	"slices"
	"strings"
	"testing"

	"github.com/spotwise/spotwise/providers/catalog"
)

// vocab is the real catalog: specs are checked against what spotwise knows.
var vocab = catalog.Default()

// baseSpec holds the top-level fields of a minimal valid spec, as YAML
// values.
func baseSpec() map[string]string {
	return map[string]string{
		"name":      "bert",
		"command":   `["python", "train.py"]`,
		"resources": "{accelerators: [V100, A100], gpus_per_node: 8}",
		"work":      "6h on V100",
	}
}

// yamlSpec writes the base spec with top-level fields replaced by over
// (YAML values); a value of "-" removes the field.
func yamlSpec(over map[string]string) []byte {
	fields := baseSpec()
	for k, v := range over {
		if v == "-" {
			delete(fields, k)
			continue
		}
		fields[k] = v
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + ": " + fields[k] + "\n")
	}
	return []byte(b.String())
}

// mustParse parses a spec that must be valid.
func mustParse(t *testing.T, data []byte) Spec {
	t.Helper()
	s, err := Parse(data, vocab)
	if err != nil {
		t.Fatalf("Parse:\n%s\nerror: %v", data, err)
	}
	return s
}

// validationErrors parses data, which must be refused, and returns the
// field errors.
func validationErrors(t *testing.T, data []byte) []FieldError {
	t.Helper()
	_, err := Parse(data, vocab)
	if err == nil {
		t.Fatalf("Parse accepted:\n%s", data)
	}
	ve, ok := AsValidationError(err)
	if !ok {
		t.Fatalf("Parse error is %T (%v), want *ValidationError", err, err)
	}
	if len(ve.Errors) == 0 {
		t.Fatalf("ValidationError lists no errors: %v", err)
	}
	return ve.Errors
}

// checkFieldErrors asserts that got names exactly the fields of want, in
// order, each with a message containing want's message.
func checkFieldErrors(t *testing.T, got, want []FieldError) {
	t.Helper()
	fields := func(l []FieldError) []string {
		out := make([]string, len(l))
		for i, fe := range l {
			out[i] = fe.Field
		}
		return out
	}
	if !slices.Equal(fields(got), fields(want)) {
		t.Fatalf("errors name fields %q, want %q\n(errors: %v)", fields(got), fields(want), got)
	}
	for i := range want {
		if !strings.Contains(got[i].Message, want[i].Message) {
			t.Errorf("%s: message %q does not contain %q", got[i].Field, got[i].Message, want[i].Message)
		}
	}
}
