package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// FieldError is one problem with one field of a spec, named by its path
// ("resources.gpus_per_node", "command[0]").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// ValidationError lists every problem found in a spec, so a user fixes them
// all in one round.
type ValidationError struct {
	Errors []FieldError `json:"errors"`
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Error()
	}
	return "invalid job spec: " + strings.Join(parts, "; ")
}

// AsValidationError returns the *ValidationError in err's chain, if any.
func AsValidationError(err error) (*ValidationError, bool) {
	var ve *ValidationError
	ok := errors.As(err, &ve)
	return ve, ok
}

type fieldErrors []FieldError

func (fe *fieldErrors) add(field, format string, args ...any) {
	*fe = append(*fe, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (fe fieldErrors) err() error {
	if len(fe) == 0 {
		return nil
	}
	sort.SliceStable(fe, func(i, j int) bool { return fe[i].Field < fe[j].Field })
	return &ValidationError{Errors: fe}
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	workType        = reflect.TypeFor[Work]()
)

// decodeStrict decodes JSON into v field by field so that every error names
// the field's path, unknown fields are refused, and all problems are
// reported together.
func decodeStrict(raw json.RawMessage, v reflect.Value, path string, errs *fieldErrors) {
	t := v.Type()
	// Work's mapping form is decoded like any struct, so a misspelt key in
	// it is named by its path with a suggestion; its short form goes through
	// Work.UnmarshalJSON.
	isWorkMapping := t == workType && bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{"))
	if !isWorkMapping && (reflect.PointerTo(t).Implements(unmarshalerType) || t.Kind() != reflect.Struct) {
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct {
			decodeSlice(raw, v, path, errs)
			return
		}
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			errs.add(path, "%s", describeJSONError(err, t))
		}
		return
	}
	if string(raw) == "null" {
		return
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		errs.add(path, "must be a mapping of fields")
		return
	}
	index := jsonFields(t)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fp := k
		if path != "" {
			fp = path + "." + k
		}
		i, ok := index[k]
		if !ok {
			errs.add(fp, "unknown field%s", suggest(k, index))
			continue
		}
		decodeStrict(fields[k], v.Field(i), fp, errs)
	}
}

func decodeSlice(raw json.RawMessage, v reflect.Value, path string, errs *fieldErrors) {
	if string(raw) == "null" {
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		errs.add(path, "must be a list")
		return
	}
	s := reflect.MakeSlice(v.Type(), len(items), len(items))
	for i, it := range items {
		decodeStrict(it, s.Index(i), fmt.Sprintf("%s[%d]", path, i), errs)
	}
	v.Set(s)
}

func jsonFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = i
	}
	return m
}

// suggest proposes the known field closest to an unknown one.
func suggest(k string, index map[string]int) string {
	best, bestD := "", 4
	for name := range index {
		if d := editDistance(k, name); d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
		if strings.HasPrefix(name, k) || strings.HasPrefix(k, name) {
			if bestD > 1 {
				best, bestD = name, 1
			}
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// describeJSONError turns encoding/json's messages, which speak of Go
// types, into what a spec author needs to read.
func describeJSONError(err error, t reflect.Type) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Type != nil {
			t = te.Type
		}
		return "must be " + kindWord(t) + ", not " + jsonWord(te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "is not valid JSON"
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	msg = strings.TrimPrefix(msg, "money: ")
	return msg
}

func kindWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "text"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Pointer:
		return kindWord(t.Elem())
	}
	return t.String()
}

func jsonWord(v string) string {
	switch v {
	case "string":
		return "text"
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "bool":
		return "true/false"
	case "number":
		return "a number"
	}
	if strings.HasPrefix(v, "number ") {
		return v
	}
	return v
}
