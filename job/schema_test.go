package job

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/jsonschema/v6"
	"github.com/pb33f/jsonschema/v6/kind"
)

// compiledSchema compiles Schema with a real JSON Schema validator.
func compiledSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("the spec's schema does not compile: %v", err)
	}
	return sch
}

// schemaCheck validates a spec (YAML or JSON) against the schema, reading
// it as Parse does; it returns the paths the refusal names, in Parse's
// notation ("resources.nodes", "command[0]"), or nil when it is valid.
func schemaCheck(t *testing.T, sch *jsonschema.Schema, data []byte) []string {
	t.Helper()
	raw, fe := specJSON(data)
	if fe != nil {
		t.Fatalf("not a spec document: %v", fe)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	err = sch.Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		t.Fatalf("validating: %v", err)
	}
	var named []string
	var visit func(*jsonschema.ValidationError)
	visit = func(e *jsonschema.ValidationError) {
		at := fieldPath(e.InstanceLocation)
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				named = append(named, join(at, m))
			}
		case *kind.AdditionalProperties:
			for _, p := range k.Properties {
				named = append(named, join(at, p))
			}
		case *kind.PropertyNames:
			named = append(named, join(at, k.Property))
		default:
			if len(e.Causes) == 0 {
				named = append(named, at)
			}
		}
		for _, c := range e.Causes {
			visit(c)
		}
	}
	visit(ve)
	if len(named) == 0 {
		named = []string{""}
	}
	return named
}

// fieldPath writes a JSON Schema instance location as Parse names fields.
func fieldPath(loc []string) string {
	var b strings.Builder
	for _, seg := range loc {
		if seg != "" && strings.Trim(seg, "0123456789") == "" {
			b.WriteString("[" + seg + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// under reports whether field is path or lies under it.
func under(field, path string) bool {
	return field == path || path != "" && (strings.HasPrefix(field, path+".") || strings.HasPrefix(field, path+"["))
}

func TestExamplesValidateAgainstTheSchemaAndParse(t *testing.T) {
	sch := compiledSchema(t)
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if named := schemaCheck(t, sch, data); named != nil {
				t.Errorf("the schema refuses it, at %v", named)
			}
			if _, err := Parse(data, vocab); err != nil {
				t.Errorf("Parse refuses it: %v", err)
			}
		})
	}
}

// The README's annotated spec, which shows every field, passes both.
func TestREADMESpecValidatesAgainstTheSchemaAndParses(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## A job spec")
	_, block, ok := strings.Cut(section, "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no YAML block under \"## A job spec\"")
	}
	if named := schemaCheck(t, compiledSchema(t), []byte(block)); named != nil {
		t.Errorf("the schema refuses the README's spec, at %v", named)
	}
	if _, err := Parse([]byte(block), vocab); err != nil {
		t.Errorf("Parse refuses the README's spec: %v", err)
	}
}

// Specs both read: the other forms of each field.
func TestSchemaTakesWhatParseTakes(t *testing.T) {
	sch := compiledSchema(t)
	for name, over := range map[string]map[string]string{
		"image, no command":         {"command": "-", "image": "ghcr.io/x/y:1"},
		"work mapping, duration":    {"work": "{duration: 90m, reference_gpu: A100}"},
		"work mapping, gpu-hours":   {"work": "{gpu_hours: 384, reference_gpu: V100}"},
		"work short gpu-hours":      {"work": "384 GPU-Hours on V100"},
		"work in days":              {"work": "1.5d on T4"},
		"deadline as a time":        {"deadline": "'2030-12-01T18:00:00+01:00'"},
		"deadline as a duration":    {"deadline": "2d"},
		"deadline empty":            {"deadline": `""`},
		"words in any case":         {"purchase": "Spot", "workload": "Fine-Tuning", "precision": "BF16", "on_deadline_miss": "RUN"},
		"price as text":             {"max_price_per_hour": `"$3.06"`},
		"price as a number":         {"max_price_per_hour": "12.5"},
		"cost cap":                  {"max_cost_usd": `"$250.00"`},
		"empty team":                {"team": `""`},
		"labels, env, secret_env":   {"labels": "{tier: gold}", "env": "{A_B: '1'}", "secret_env": "{TOKEN: x}"},
		"placement":                 {"placement": "{geographies: [eu], regions: ['eu-*'], deny_providers: [azure]}"},
		"checkpoint":                {"checkpoint": "{uri: 's3://b/p', interval: 30m, duration: 2m, size_gb: 4.5, signal: SIGUSR1, move_on_rebalance: true, skip_short_notice: true}"},
		"checkpoint command":        {"checkpoint": "{command: [kill, '-USR1', '1'], disabled: false}"},
		"resources in full":         {"resources": "{accelerators: [A100-80GB], min_gpu_memory_gb: 80, gpus_per_node: 8, nodes: 2, min_vcpus_per_node: 32, min_memory_gib_per_node: 256}"},
		"priority and retries":      {"priority": "1000", "max_retries": "3", "api_version": "spotwise/v1"},
		"on_deadline_miss, no date": {"on_deadline_miss": "run"},
		"data":                      {"data": "{provider: aws, region: us-east-1, size_gb: 512.5}"},
	} {
		t.Run(name, func(t *testing.T) {
			data := yamlSpec(over)
			if named := schemaCheck(t, sch, data); named != nil {
				t.Errorf("the schema refuses\n%s\nat %v", data, named)
			}
			mustParse(t, data)
		})
	}
}

// Specs both refuse, each naming the same field.
func TestSchemaRefusesWhatParseRefuses(t *testing.T) {
	sch := compiledSchema(t)
	for _, c := range []struct {
		field string
		over  map[string]string
	}{
		{"name", map[string]string{"name": "-"}},
		{"name", map[string]string{"name": "'-starts-with-a-dash'"}},
		{"team", map[string]string{"team": "'a team'"}},
		{"nmae", map[string]string{"nmae": "x"}},
		{"api_version", map[string]string{"api_version": "spotwise/v2"}},
		{"priority", map[string]string{"priority": "1001"}},
		{"priority", map[string]string{"priority": "high"}},
		{"command", map[string]string{"command": "-"}},
		{"command", map[string]string{"command": "[]"}},
		{"command", map[string]string{"command": "python train.py"}},
		{"workload", map[string]string{"workload": "gaming"}},
		{"precision", map[string]string{"precision": "fp64"}},
		{"purchase", map[string]string{"purchase": "reserved"}},
		{"on_deadline_miss", map[string]string{"on_deadline_miss": "later"}},
		{"labels.bad key", map[string]string{"labels": "{'bad key': x}"}},
		{"env.1X", map[string]string{"env": "{'1X': y}"}},
		{"env.A", map[string]string{"env": "{A: [1]}"}},
		{"resources", map[string]string{"resources": "-"}},
		{"resources.gpus_per_node", map[string]string{"resources": "{nodes: 2}"}},
		{"resources.gpus_per_node", map[string]string{"resources": "{gpus_per_node: 17}"}},
		{"resources.gpus_per_node", map[string]string{"resources": "{gpus_per_node: two}"}},
		{"resources.nodes", map[string]string{"resources": "{gpus_per_node: 1, nodes: 0}"}},
		{"resources.nodes", map[string]string{"resources": "{gpus_per_node: 1, nodes: 513}"}},
		{"resources.min_gpu_memory_gb", map[string]string{"resources": "{gpus_per_node: 1, min_gpu_memory_gb: -1}"}},
		{"resources.gpu", map[string]string{"resources": "{gpus_per_node: 1, gpu: A100}"}},
		{"resources.accelerators", map[string]string{"resources": "{gpus_per_node: 1, accelerators: A100}"}},
		{"work", map[string]string{"work": "-"}},
		{"work", map[string]string{"work": "lots on V100"}},
		{"work", map[string]string{"work": "48"}},
		{"work.reference_gpu", map[string]string{"work": "{duration: 2h}"}},
		{"work", map[string]string{"work": "{reference_gpu: V100}"}},
		{"work.hours", map[string]string{"work": "{hours: 2, reference_gpu: V100}"}},
		{"deadline", map[string]string{"deadline": "tomorrow"}},
		{"deadline", map[string]string{"deadline": "0s"}},
		{"deadline", map[string]string{"deadline": "36"}},
		{"max_price_per_hour", map[string]string{"max_price_per_hour": "-1"}},
		{"max_price_per_hour", map[string]string{"max_price_per_hour": "1000.01"}},
		{"max_price_per_hour", map[string]string{"max_price_per_hour": `"cheap"`}},
		{"max_price_per_hour", map[string]string{"max_price_per_hour": `"3.1234567"`}},
		{"max_cost_usd", map[string]string{"max_cost_usd": "-1"}},
		{"max_cost_usd", map[string]string{"max_cost_usd": "10000000.01"}},
		{"placement.regions", map[string]string{"placement": "{regions: eu-west-1}"}},
		{"placement.zones", map[string]string{"placement": "{zones: [a]}"}},
		{"checkpoint.uri", map[string]string{"checkpoint": "{uri: 'gs://b/p'}"}},
		{"checkpoint.interval", map[string]string{"checkpoint": "{interval: 30}"}},
		{"checkpoint.duration", map[string]string{"checkpoint": "{duration: soon}"}},
		{"checkpoint.size_gb", map[string]string{"checkpoint": "{size_gb: 100001}"}},
		{"checkpoint.signal", map[string]string{"checkpoint": "{signal: usr1}"}},
		{"checkpoint.disabled", map[string]string{"checkpoint": "{disabled: 'yes'}"}},
		{"max_retries", map[string]string{"max_retries": "101"}},
		{"data.size_gb", map[string]string{"data": "{provider: aws, region: us-east-1, size_gb: -1}"}},
		{"data.size_gb", map[string]string{"data": "{provider: aws, region: us-east-1}"}},
		{"data.provider", map[string]string{"data": "{region: us-east-1, size_gb: 5}"}},
		{"data.region", map[string]string{"data": "{provider: aws, size_gb: 5}"}},
		{"data.bucket", map[string]string{"data": "{provider: aws, region: us-east-1, size_gb: 5, bucket: b}"}},
	} {
		t.Run(c.field+" "+strings.Join(slices.Sorted(mapValues(c.over)), " "), func(t *testing.T) {
			data := yamlSpec(c.over)
			named := schemaCheck(t, sch, data)
			if named == nil {
				t.Fatalf("the schema takes\n%s", data)
			}
			if !slices.ContainsFunc(named, func(p string) bool { return under(c.field, p) }) {
				t.Errorf("the schema refuses\n%s\nat %q, not at %q", data, named, c.field)
			}
			if !slices.ContainsFunc(validationErrors(t, data), func(fe FieldError) bool { return under(fe.Field, c.field) }) {
				t.Errorf("Parse does not name %q for\n%s", c.field, data)
			}
		})
	}
}

func mapValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k, v := range m {
			if !yield(k + "=" + v) {
				return
			}
		}
	}
}

// Every field Parse reads is in the schema, and the schema has no field
// Parse would refuse as unknown: the Go types are walked here on their
// own, not through the schema's generator.
func TestSchemaHasEveryFieldOfTheSpec(t *testing.T) {
	var fields []string
	var walk func(reflect.Type, string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeFor[Spec]().PkgPath() || t == reflect.TypeFor[Deadline]() {
			return
		}
		for name, i := range jsonFields(t) {
			fields = append(fields, join(path, name))
			walk(t.Field(i).Type, join(path, name))
		}
	}
	walk(reflect.TypeFor[Spec](), "")

	var inSchema []string
	var props func(s map[string]any, path string)
	props = func(s map[string]any, path string) {
		alts, _ := s["anyOf"].([]any)
		for _, alt := range alts {
			if m, ok := alt.(map[string]any); ok && m["type"] == "object" {
				props(m, path)
			}
		}
		p, _ := s["properties"].(map[string]any)
		for name, sub := range p {
			inSchema = append(inSchema, join(path, name))
			props(sub.(map[string]any), join(path, name))
		}
		if s["type"] == "object" && p != nil && s["additionalProperties"] != false {
			t.Errorf("%q takes unknown fields; Parse refuses them", path)
		}
	}
	var root map[string]any
	if err := json.Unmarshal(Schema(), &root); err != nil {
		t.Fatal(err)
	}
	props(root, "")
	slices.Sort(fields)
	slices.Sort(inSchema)
	if !slices.Equal(fields, inSchema) {
		t.Errorf("the spec's fields:\n%v\nthe schema's:\n%v", fields, inSchema)
	}
}

func TestSchemaIsStable(t *testing.T) {
	if a, b := Schema(), Schema(); !bytes.Equal(a, b) {
		t.Error("Schema differs between calls")
	}
}
