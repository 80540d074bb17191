package events

import (
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spotwise/spotwise/job"
)

// storedForm is what decoding r's JSON would give, without encoding and
// decoding it: a copy of r whose status has its times as JSON carries them
// (no monotonic reading; in UTC as written, any other zone as parsed back)
// and no empty list where the field is left out when empty. The spec is
// taken as it is: a record written back by Modify carries the spec it was
// read with, itself decoded. ok is false when the status holds what the
// copy cannot stand for (a map, an interface, text that is not UTF-8):
// the version is then decoded when it is needed. In race builds (the
// tests) every stored form is checked against a real decoding.
func storedForm(r *job.Record) (_ *job.Record, ok bool) {
	c := r.Clone()
	if !normalize(reflect.ValueOf(&c.Status).Elem()) {
		return nil, false
	}
	return c, true
}

var timeType = reflect.TypeFor[time.Time]()

// normalize puts v in the form decoding its JSON gives, in place; false if
// it cannot tell that form.
func normalize(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == timeType {
			t, ok := storedTime(v.Interface().(time.Time))
			v.Set(reflect.ValueOf(t))
			return ok
		}
		ty := v.Type()
		for i := range ty.NumField() {
			f := ty.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			fv := v.Field(i)
			if (fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.Len() == 0 && omitsEmpty(f) {
				fv.SetZero()
				continue
			}
			if !normalize(fv) {
				return false
			}
		}
		return true
	case reflect.Pointer:
		return v.IsNil() || normalize(v.Elem())
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if !normalize(v.Index(i)) {
				return false
			}
		}
		return true
	case reflect.String:
		return utf8.ValidString(v.String())
	case reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return false
	}
	return true // numbers and booleans come back as they went
}

// omitsEmpty reports whether a field's JSON tag leaves it out when empty.
func omitsEmpty(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == "omitempty" {
			return true
		}
	}
	return false
}

// storedTime is t as decoding its JSON gives it.
func storedTime(t time.Time) (time.Time, bool) {
	switch {
	case t.IsZero():
		return time.Time{}, true
	case t.Location() == time.UTC:
		return t.Round(0), true
	}
	b, err := t.MarshalJSON()
	if err != nil {
		return t, false
	}
	var back time.Time
	if back.UnmarshalJSON(b) != nil {
		return t, false
	}
	return back, true
}

// checkStoredForm panics if c is not what decoding b gives: the tests'
// guard that storedForm stays right as the record grows fields.
func checkStoredForm(c *job.Record, b []byte) {
	d, err := DecodeRecord(b)
	if err != nil {
		panic(fmt.Sprintf("stored form of job %s: %v", c.ID, err))
	}
	if !reflect.DeepEqual(c, d) {
		panic(fmt.Sprintf("stored form of job %s differs from its decoding:\n stored form %#v\n decoded     %#v", c.ID, c.Status, d.Status))
	}
}
