package job

import (
	"bytes"
	"errors"
	"io"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

// Documents splits a YAML stream into its documents, each converted to JSON
// the way Parse reads a spec. Empty documents (what a leading or trailing
// "---" delimits) are left out. The stream is read by the same YAML parser
// that converts it, so a "---" inside a block scalar or a quoted string is
// text, not a separator.
func Documents(data []byte) ([][]byte, error) {
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
		// sigs.k8s.io/yaml converts one document; writing the decoded one
		// back out keeps its conversion rules (keys, numbers) for all.
		one, err := yamlv2.Marshal(v)
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(one)
		if err != nil {
			return nil, errors.New(strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
		}
		docs = append(docs, j)
	}
}
