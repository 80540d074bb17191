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

func (fe fieldErrors) err() error { return fe.errAtMost(len(fe)) }

// errAtMost is err listing the first n problems by field, then how many
// more there are.
func (fe fieldErrors) errAtMost(n int) error {
	if len(fe) == 0 {
		return nil
	}
	sort.SliceStable(fe, func(i, j int) bool { return fe[i].Field < fe[j].Field })
	if more := len(fe) - n; more > 0 {
		fe = append(fe[:n:n], FieldError{Message: fmt.Sprintf("and %d more problems", more)})
	}
	return &ValidationError{Errors: fe}
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	workType        = reflect.TypeFor[Work]()
)

// decoder decodes JSON into a value field by field so that every error
// names the field's path, unknown fields are refused, and all problems are
// reported together. It remembers what did not decode, so that validation,
// which sees the zero value left behind, does not report it a second time.
type decoder struct {
	errs fieldErrors
	// broken are paths that did not decode, with everything under them;
	// for a misspelt key, also the key it was probably meant to be.
	broken map[string]bool
	// partial are mappings some of whose fields did not decode: checks of
	// the mapping as a whole would judge what is left.
	partial map[string]bool
}

func (d *decoder) fail(path, format string, args ...any) {
	d.errs.add(path, format, args...)
	d.markBroken(path)
}

func (d *decoder) markBroken(path string) {
	if d.broken == nil {
		d.broken = map[string]bool{}
	}
	d.broken[path] = true
}

// follows reports whether a problem validation found in field follows from
// one already reported by decoding. It looks up the field and each path it
// lies under, so that it stays cheap for a spec with thousands of problems.
func (d *decoder) follows(field string) bool {
	if d.partial[field] || d.broken[""] {
		return true
	}
	for i := len(field); i > 0; i-- {
		if (i == len(field) || field[i] == '.' || field[i] == '[') && d.broken[field[:i]] {
			return true
		}
	}
	return false
}

func (d *decoder) decode(raw json.RawMessage, v reflect.Value, path string) {
	t := v.Type()
	// Work's mapping form is decoded like any struct, so a misspelt key in
	// it is named by its path with a suggestion; its short form goes through
	// Work.UnmarshalJSON.
	isWorkMapping := t == workType && bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{"))
	switch {
	case !isWorkMapping && reflect.PointerTo(t).Implements(unmarshalerType):
		d.whole(raw, v, path)
	case t.Kind() == reflect.Struct:
		d.fields(raw, v, path)
	case t.Kind() == reflect.Slice:
		d.slice(raw, v, path)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		d.mapping(raw, v, path)
	default:
		d.whole(raw, v, path)
	}
}

// whole decodes a value that has no fields of its own to name.
func (d *decoder) whole(raw json.RawMessage, v reflect.Value, path string) {
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		d.fail(path, "%s", describeJSONError(err, v.Type()))
	}
}

func (d *decoder) fields(raw json.RawMessage, v reflect.Value, path string) {
	if string(raw) == "null" {
		return
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		d.fail(path, "must be a mapping of fields")
		return
	}
	before := len(d.errs)
	index := jsonFields(v.Type())
	for _, k := range sortedKeys(fields) {
		fp := join(path, k)
		i, ok := index[k]
		if !ok {
			meant := suggest(k, index)
			if meant == "" {
				d.fail(fp, "unknown field")
				continue
			}
			d.fail(fp, "unknown field (did you mean %q?)", meant)
			d.markBroken(join(path, meant))
			continue
		}
		d.decode(fields[k], v.Field(i), fp)
	}
	if len(d.errs) > before {
		if d.partial == nil {
			d.partial = map[string]bool{}
		}
		d.partial[path] = true
	}
}

// slice decodes a list item by item, so each bad item is named.
func (d *decoder) slice(raw json.RawMessage, v reflect.Value, path string) {
	if string(raw) == "null" {
		return
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		d.whole(raw, v, path) // for the message: "must be a list, not text"
		return
	}
	s := reflect.MakeSlice(v.Type(), len(items), len(items))
	for i, it := range items {
		d.decode(it, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

// mapping decodes a map entry by entry, so each bad value is named.
func (d *decoder) mapping(raw json.RawMessage, v reflect.Value, path string) {
	if string(raw) == "null" {
		return
	}
	var entries map[string]json.RawMessage
	if json.Unmarshal(raw, &entries) != nil {
		d.whole(raw, v, path) // for the message: "must be a mapping, not a list"
		return
	}
	t := v.Type()
	m := reflect.MakeMapWithSize(t, len(entries))
	for _, k := range sortedKeys(entries) {
		e := reflect.New(t.Elem()).Elem()
		d.decode(entries[k], e, path+"."+k)
		m.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), e)
	}
	v.Set(m)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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

// suggest proposes the known field closest to an unknown one, or "".
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
	return best
}

// editDistance counts the edits from a to b, a swap of two neighbouring
// letters being one: "nmae" is one from "name", not two.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
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
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
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
