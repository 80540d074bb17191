package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"

	yamlv2 "go.yaml.in/yaml/v2"
)

// Documents splits a YAML stream into its documents, each converted to JSON
// the way Parse reads a spec. Empty documents (what a leading or trailing
// "---" delimits) are left out. The stream is read by the same YAML parser
// that converts it, so a "---" inside a block scalar or a quoted string is
// text, not a separator.
//
// Each document is parsed once and its value converted to JSON directly,
// by the rules of sigs.k8s.io/yaml's YAMLToJSON (map keys that are
// numbers or booleans become their text; nothing else changes). Writing
// the document back out as YAML to hand it to YAMLToJSON, which parses it
// again, gives the same JSON (TestDocumentsConvertAsYAMLToJSONDoes) at
// three times the work: on a busy server that was half of everything a
// submission allocated.
func Documents(data []byte) ([][]byte, error) {
	return eachDocument(data, func(v any) ([]byte, error) {
		jv, err := jsonable(v)
		if err != nil {
			return nil, err
		}
		return json.Marshal(jv)
	})
}

// eachDocument converts each non-empty document of a YAML stream, as
// decoded, with convert.
func eachDocument(data []byte, convert func(v any) ([]byte, error)) ([][]byte, error) {
	dec := yamlv2.NewDecoder(bytes.NewReader(data))
	var docs [][]byte
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		j, err := convert(v)
		if err != nil {
			return nil, err
		}
		docs = append(docs, j)
	}
}

// jsonable converts a decoded YAML value to one encoding/json writes: the
// keys of YAML's maps, which may be numbers or booleans, to strings.
func jsonable(v any) (any, error) {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			key, err := jsonKey(k, e)
			if err != nil {
				return nil, err
			}
			if m[key], err = jsonable(e); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			var err error
			if a[i], err = jsonable(e); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return v, nil
}

// jsonKey is the text of a YAML map key, as YAML writes it.
func jsonKey(k, v any) (string, error) {
	switch k := k.(type) {
	case string:
		return k, nil
	case int:
		return strconv.Itoa(k), nil
	case int64:
		return strconv.FormatInt(k, 10), nil
	case float64:
		switch s := strconv.FormatFloat(k, 'g', -1, 32); s {
		case "+Inf":
			return ".inf", nil
		case "-Inf":
			return "-.inf", nil
		case "NaN":
			return ".nan", nil
		default:
			return s, nil
		}
	case bool:
		return strconv.FormatBool(k), nil
	}
	return "", fmt.Errorf("unsupported map key of type: %s, key: %+#v, value: %+#v", reflect.TypeOf(k), k, v)
}
