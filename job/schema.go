package job

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/spotwise/spotwise/money"
)

// SchemaID names the job spec's JSON Schema.
const SchemaID = "urn:spotwise:job-spec:v1"

// Schema returns the JSON Schema (draft 2020-12) of a job spec as Parse
// reads it, for editors (yaml-language-server, VS Code) and for the API
// document. It is built from Spec itself, field by field, so a field added
// to the spec is in the schema; the rules on top of the types (ranges,
// patterns, words) are specRules below, written from the same constants
// Validate uses. What needs the server's catalog (GPU, provider, region
// and geography names) the schema leaves to the server.
func Schema() []byte {
	b, err := json.MarshalIndent(schemaTree(), "", "  ")
	if err != nil {
		panic(err) // maps of strings, numbers and bools
	}
	return append(b, '\n')
}

func schemaTree() map[string]any {
	g := schemaGen{rules: specRules(), used: map[string]bool{}}
	s := g.of(reflect.TypeFor[Spec](), "")
	for path := range g.rules {
		if !g.used[path] {
			panic(fmt.Sprintf("job: a schema rule names %q, which is no field of the spec", path))
		}
	}
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = SchemaID
	s["title"] = "spotwise job spec (" + APIVersion + ")"
	return s
}

// schemaGen walks a Go type the way the spec decoder does: a struct's
// fields by their JSON names, unknown fields refused, lists item by item,
// mappings entry by entry. rules add keywords by field path: "resources.nodes",
// "command[]" (every item), "env.*" (every value).
type schemaGen struct {
	rules map[string]map[string]any
	used  map[string]bool
}

func (g schemaGen) of(t reflect.Type, path string) map[string]any {
	s := g.base(t, path)
	if r, ok := g.rules[path]; ok {
		g.used[path] = true
		for k, v := range r {
			s[k] = v
		}
	}
	return s
}

func (g schemaGen) base(t reflect.Type, path string) map[string]any {
	switch t {
	case reflect.TypeFor[Duration]():
		return map[string]any{"type": "string", "pattern": "^\\s*(?:" + durationRE + ")\\s*$",
			"description": `a duration with its unit: "90m", "2h30m", "1.5h", "3d"`}
	case reflect.TypeFor[Deadline]():
		return map[string]any{"type": "string", "anyOf": []any{
			map[string]any{"const": ""},
			map[string]any{"pattern": `^\s*\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})\s*$`},
			map[string]any{"pattern": "^\\s*(?:" + durationRE + ")\\s*$", "not": map[string]any{"pattern": zeroDurationRE}},
		}}
	case reflect.TypeFor[money.Micros]():
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "number"},
			map[string]any{"type": "string", "pattern": `^\s*\$?(?:[0-9][0-9_]*(?:\.[0-9]{0,6})?|\.[0-9]{1,6})\s*$`},
		}}
	case workType:
		// The mapping, or the short form: "48h on V100", "384 gpu-hours on V100".
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "pattern": "^\\s*(?:(?:" + durationRE + ")|(?:" + decimalRE + ")\\s*" + anyCase("gpu-hours", "gpu-hour", "gpu hours", "gpuh") + ")\\s* on .*\\S.*$"},
			g.workMapping(t, path),
		}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.base(t.Elem(), path)
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.of(t.Elem(), path+"[]")}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.of(t.Elem(), path+".*")}
	case reflect.Struct:
		return g.object(t, path)
	}
	panic(fmt.Sprintf("job: no JSON Schema for %s (field %q)", t, path))
}

func (g schemaGen) object(t reflect.Type, path string) map[string]any {
	props := map[string]any{}
	for name, i := range jsonFields(t) {
		props[name] = g.of(t.Field(i).Type, join(path, name))
	}
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

// workMapping is work's mapping form: a reference GPU and one of the two
// amounts (Validate refuses both).
func (g schemaGen) workMapping(t reflect.Type, path string) map[string]any {
	s := g.object(t, path)
	s["required"] = []string{"reference_gpu"}
	s["anyOf"] = []any{map[string]any{"required": []string{"duration"}}, map[string]any{"required": []string{"gpu_hours"}}}
	return s
}

// Patterns the spec's text fields follow, written for both Go's regexp
// and ECMA 262 (what editors run).
const (
	decimalRE  = `[0-9]+(?:\.[0-9]*)?|\.[0-9]+`
	durationRE = `(?:(?:` + decimalRE + `)(?:ns|us|µs|μs|ms|s|m|h))+|0|(?:` + decimalRE + `)d`
	// zeroDurationRE is a duration of nothing ("0s", "0h0m"), which a
	// deadline may not be.
	zeroDurationRE = `^\s*(?:0|(?:(?:0+(?:\.0*)?|\.0+)(?:ns|us|µs|μs|ms|s|m|h|d))+)\s*$`
	noNUL          = `^[^\x00]*$`
)

// anyCase is a pattern matching any of words whatever their case:
// "[sS][pP][oO][tT]". ECMA 262 has no inline (?i).
func anyCase(words ...string) string {
	alts := make([]string, len(words))
	for i, w := range words {
		var b strings.Builder
		for _, r := range w {
			lo, up := strings.ToLower(string(r)), strings.ToUpper(string(r))
			switch {
			case lo != up:
				b.WriteString("[" + lo + up + "]")
			case strings.ContainsRune(`\.+*?()|[]{}^$`, r):
				b.WriteString(`\` + string(r))
			default:
				b.WriteRune(r)
			}
		}
		alts[i] = b.String()
	}
	return "(?:" + strings.Join(alts, "|") + ")"
}

// oneWordOf is a field Normalize lower-cases: any case is read, the
// lower-case words are offered.
func oneWordOf(desc string, words []string) map[string]any {
	return map[string]any{"type": "string", "description": desc, "anyOf": []any{
		map[string]any{"enum": words},
		map[string]any{"pattern": "^" + anyCase(words...) + "$"},
	}}
}

func text(desc string) map[string]any {
	return map[string]any{"description": desc, "maxLength": maxValueLen, "pattern": noNUL}
}

func list(desc string) map[string]any {
	return map[string]any{"description": desc, "maxItems": maxListLen}
}

func between(desc string, lo, hi int) map[string]any {
	return map[string]any{"description": desc, "minimum": lo, "maximum": hi}
}

func textMap(desc string, keyPattern string) map[string]any {
	return map[string]any{"description": desc, "maxProperties": maxMapEntries,
		"propertyNames": map[string]any{"pattern": keyPattern, "maxLength": maxNameLen}}
}

// specRules are what Validate checks beyond the types, by field path.
func specRules() map[string]map[string]any {
	name := map[string]any{"pattern": nameRE.String(), "maxLength": maxNameLen}
	withDesc := func(m map[string]any, desc string) map[string]any {
		out := map[string]any{"description": desc}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	missEnum := []string{DeadlineMissExpire, DeadlineMissRun}
	return map[string]map[string]any{
		"": {
			"description": "A GPU job: what to run, on what, how much work it is, by when, and under which price and placement rules.",
			"required":    []string{"name", "resources", "work"},
			// Validate: "give a command, an image, or both".
			"anyOf": []any{
				map[string]any{"required": []string{"command"}, "properties": map[string]any{"command": map[string]any{"minItems": 1}}},
				map[string]any{"required": []string{"image"}, "properties": map[string]any{"image": map[string]any{"minLength": 1}}},
			},
		},
		"api_version":                       {"const": APIVersion, "description": "the spec's version; default " + APIVersion},
		"name":                              withDesc(name, "the job's name: letters, digits, '.', '_' and '-'"),
		"team":                              {"pattern": "^(?:" + strings.TrimSuffix(strings.TrimPrefix(nameRE.String(), "^"), "$") + ")?$", "maxLength": maxNameLen, "description": "the team the job belongs to (default: the submitter's, else \"default\")"},
		"priority":                          between(fmt.Sprintf("higher runs first (default %d)", DefaultPrio), 0, MaxPriority),
		"labels":                            textMap("free-form labels", nameRE.String()),
		"labels.*":                          text("a label's value"),
		"image":                             text("the container image the agent runs"),
		"command":                           list("the command the agent runs (in the image, if one is given)"),
		"command[]":                         text("one argument"),
		"env":                               textMap("environment for the workload", envKeyRE.String()),
		"env.*":                             text("a variable's value"),
		"secret_env":                        textMap("environment the API never shows and nothing logs; a name may not also be in env", envKeyRE.String()),
		"secret_env.*":                      text("a secret variable's value"),
		"workload":                          oneWordOf("the kind of work, for the throughput class (default training)", workloads),
		"precision":                         oneWordOf("numeric precision (default fp16; int8 for inference)", precisions),
		"resources":                         {"description": "the machines the job needs", "required": []string{"gpus_per_node"}},
		"resources.accelerators":            list(`acceptable GPU types by name ("A100-80GB") or family ("A100"); empty: any GPU with min_gpu_memory_gb`),
		"resources.min_gpu_memory_gb":       between("least memory per GPU, in GB", 0, 1024),
		"resources.gpus_per_node":           between("GPUs on each node", 1, maxGPUsPerNode),
		"resources.nodes":                   between("nodes (default 1)", 1, maxNodes),
		"resources.min_vcpus_per_node":      between("least vCPUs per node", 0, 1024),
		"resources.min_memory_gib_per_node": between("least memory per node, in GiB", 0, 65536),
		"work":                              {"description": `how much computing the job needs, measured on a reference GPU: "48h on V100" (wall time with this job's shape), "384 gpu-hours on V100", or the mapping`},
		// The mapping form: a reference GPU and one of the two amounts.
		"work.duration":                {"description": "wall time on reference_gpu with this job's shape"},
		"work.gpu_hours":               {"description": "total GPU-hours on reference_gpu", "minimum": 0},
		"work.reference_gpu":           {"description": "the GPU type the work was measured on", "minLength": 1},
		"deadline":                     {"description": `when the job must be done: an RFC 3339 time ("2026-12-01T18:00:00Z") or a duration from submission ("36h", "2d")`},
		"on_deadline_miss":             oneWordOf("what becomes of a queued job that can no longer finish by its deadline: expire (default) or run anyway", missEnum),
		"purchase":                     oneWordOf("spot, on-demand (or reserved), or auto: whatever finishes cheapest in time (default)", purchases),
		"max_price_per_hour":           {"description": "the most one node may cost per hour, in dollars (3.06 or \"$3.06\"); 0: no cap", "minimum": 0, "maximum": maxPrice},
		"max_cost_usd":                 {"description": "the most the whole job may cost, in dollars (250 or \"$250.00\"): it is not placed where it is expected to cost more, and once its cost reaches it, it checkpoints and ends as failed; 0: no cap", "minimum": 0, "maximum": maxJobCost},
		"placement":                    {"description": "where the job may run; deny lists win over allow lists"},
		"placement.providers":          list("providers allowed (empty: any)"),
		"placement.deny_providers":     list("providers refused"),
		"placement.regions":            list(`regions allowed, by name or glob ("eu-*")`),
		"placement.deny_regions":       list("regions refused, by name or glob"),
		"placement.geographies":        list(`coarse areas allowed ("eu", "us", "asia")`),
		"checkpoint":                   {"description": "how the job saves and resumes its state"},
		"checkpoint.uri":               {"description": "where checkpoints go; empty: the server's store", "pattern": "^(?:file|s3|azblob)://"},
		"checkpoint.interval":          {"description": "time between periodic checkpoints, at least 1m; empty: spotwise chooses"},
		"checkpoint.duration":          {"description": "how long one checkpoint takes to write (at most 24h; default 1m)"},
		"checkpoint.size_gb":           between("the checkpoint's size, in GB", 0, 100_000),
		"checkpoint.signal":            {"description": "the signal that asks the workload to checkpoint (default SIGTERM)", "pattern": signalRE.String()},
		"checkpoint.command":           list("a command that asks the workload to checkpoint, instead of a signal"),
		"checkpoint.command[]":         text("one argument"),
		"checkpoint.disabled":          {"description": "the job cannot checkpoint: an interruption restarts it"},
		"checkpoint.move_on_rebalance": {"description": "move as soon as the provider recommends rebalancing, before any notice"},
		"checkpoint.skip_short_notice": {"description": "leave out offers whose notice is shorter than a checkpoint takes (not with disabled)"},
		"data":                         {"description": "where the job's input data lives: an attempt placed in another region or cloud pays its egress once", "required": []string{"provider", "region", "size_gb"}},
		"data.provider":                {"description": "the cloud the data is stored in (aws, azure, gcp)", "minLength": 1},
		"data.region":                  {"description": "the region the data is stored in", "minLength": 1},
		"data.size_gb":                 {"description": "the data's size in GB", "exclusiveMinimum": 0, "maximum": maxDataGB},
		"max_retries":                  between("how many times a job whose command fails is run again", 0, 100),
	}
}
