package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spotwise/spotwise/money"
)

// APIVersion is the spec version this package reads.
const APIVersion = "spotwise/v1"

// Limits on a spec's size, so a hostile or mistaken spec cannot make the
// queue heavy.
const (
	MaxSpecBytes   = 256 << 10
	maxNameLen     = 128
	maxListLen     = 64
	maxMapEntries  = 128
	maxValueLen    = 4096
	MaxPriority    = 1000
	DefaultPrio    = 100
	maxGPUsPerNode = 16
	maxNodes       = 512
	// maxProblems bounds the problems one refusal lists: a command of
	// 60,000 numbers would otherwise be answered with megabytes.
	maxProblems = 100
)

// What becomes of a queued job that can no longer meet its deadline.
const (
	DeadlineMissExpire = "expire" // end it as expired, with an alert
	DeadlineMissRun    = "run"    // run it anyway
)

// Purchase policies: which purchase options a job accepts.
const (
	PurchaseSpot     = "spot"      // spot only
	PurchaseOnDemand = "on-demand" // on-demand or reserved only
	PurchaseAuto     = "auto"      // whatever finishes cheapest in time
)

// Spec is what a user submits: what to run, on what, how much work it is,
// by when, and under which price and placement rules.
type Spec struct {
	APIVersion string            `json:"api_version,omitempty"`
	Name       string            `json:"name"`
	Team       string            `json:"team,omitempty"`
	Priority   *int              `json:"priority,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`

	// Image, Command and Env are opaque to the scheduler; the agent on the
	// instance runs them.
	Image   string            `json:"image,omitempty"`
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// SecretEnv is environment the workload gets whose values the API
	// never returns and nothing logs (tokens, passwords). It is kept in
	// the job record in the server's store and handed to the instance at
	// launch: put there what the workload needs to fetch the real
	// secrets (a short-lived credential), not long-lived keys.
	SecretEnv map[string]string `json:"secret_env,omitempty"`

	// Workload (training, fine-tuning, inference) and Precision (fp16,
	// bf16, fp32, int8) select the throughput class used to convert Work
	// into a runtime on each GPU type.
	Workload  string `json:"workload,omitempty"`
	Precision string `json:"precision,omitempty"`

	Resources Resources `json:"resources"`
	Work      Work      `json:"work"`
	Deadline  Deadline  `json:"deadline,omitzero"`
	// DeadlineMiss (on_deadline_miss) says what becomes of a queued job
	// that can no longer finish by its deadline: expire (the default) ends
	// it as expired, with an alert; run runs it anyway. It is accepted
	// without a deadline, where it has no effect. Read it through
	// OnDeadlineMiss: Normalize stores the default as empty, so specs
	// written before the field existed keep their hash.
	DeadlineMiss string `json:"on_deadline_miss,omitempty"`

	// Purchase is spot, on-demand or auto (default).
	Purchase string `json:"purchase,omitempty"`
	// MaxPricePerHour caps the price of one instance (one node) per hour;
	// zero means no cap.
	MaxPricePerHour money.Micros `json:"max_price_per_hour,omitempty"`
	// MaxCost (max_cost_usd) caps what the whole job may cost: it is not
	// placed where it is expected to cost more, and once what it has cost
	// reaches the cap it checkpoints and ends as failed. Zero means no cap.
	MaxCost money.Micros `json:"max_cost_usd,omitempty"`

	Placement  PlacementRules `json:"placement,omitzero"`
	Checkpoint Checkpoint     `json:"checkpoint,omitzero"`
	// Data is where the job's input data lives, when it says so: an
	// attempt placed outside that region pays the data's egress.
	Data Data `json:"data,omitzero"`
	// MaxRetries is how many times a job whose command fails is run again.
	MaxRetries int `json:"max_retries,omitempty"`
}

// Resources is the shape of the machines a job needs.
type Resources struct {
	// Accelerators lists acceptable GPU types by name ("A100-80GB") or
	// family ("A100"); empty means any GPU that meets MinGPUMemoryGB.
	Accelerators   []string `json:"accelerators,omitempty"`
	MinGPUMemoryGB int      `json:"min_gpu_memory_gb,omitempty"`
	GPUsPerNode    int      `json:"gpus_per_node"`
	Nodes          int      `json:"nodes,omitempty"`
	MinVCPUs       int      `json:"min_vcpus_per_node,omitempty"`
	MinMemoryGiB   int      `json:"min_memory_gib_per_node,omitempty"`
}

// PlacementRules limit where a job may run. Allow lists are empty for "any";
// deny lists win over allow lists.
type PlacementRules struct {
	Providers     []string `json:"providers,omitempty"`
	DenyProviders []string `json:"deny_providers,omitempty"`
	// Regions are region names or glob patterns ("eu-*", "europe-*").
	Regions     []string `json:"regions,omitempty"`
	DenyRegions []string `json:"deny_regions,omitempty"`
	// Geographies are coarse areas ("eu", "us", "asia"); "EU only" is
	// geographies: [eu].
	Geographies []string `json:"geographies,omitempty"`
}

// Data is the job's input data set: the cloud and region it is stored in
// and its size. Every attempt placed in another region (or cloud) reads
// it from there and pays its egress once, at the published transfer rate
// (bidding.Transfer); the scheduler weighs that against cheaper capacity
// elsewhere. Empty: the job declares no data.
type Data struct {
	Provider string  `json:"provider,omitempty"`
	Region   string  `json:"region,omitempty"`
	SizeGB   float64 `json:"size_gb,omitempty"`
}

// Declared reports whether the spec says where its data lives.
func (d Data) Declared() bool { return d.Provider != "" && d.Region != "" && d.SizeGB > 0 }

// Checkpoint says how the job saves and resumes its state.
type Checkpoint struct {
	// URI is where checkpoints go (file://, s3://, azblob://); empty means
	// the server's default store.
	URI string `json:"uri,omitempty"`
	// Interval fixes the time between periodic checkpoints; zero lets
	// spotwise choose from the checkpoint cost and interruption rate.
	Interval Duration `json:"interval,omitempty"`
	// Duration is how long one checkpoint takes to write.
	Duration Duration `json:"duration,omitempty"`
	// SizeGB is the checkpoint's size, for transfer time and cost.
	SizeGB float64 `json:"size_gb,omitempty"`
	// Signal (default SIGTERM) or Command tells the workload to checkpoint.
	Signal  string   `json:"signal,omitempty"`
	Command []string `json:"command,omitempty"`
	// Disabled means the job cannot checkpoint: an interruption restarts it.
	Disabled bool `json:"disabled,omitempty"`
	// MoveOnRebalance moves the job as soon as its provider recommends
	// rebalancing (elevated interruption risk), before any notice comes.
	MoveOnRebalance bool `json:"move_on_rebalance,omitempty"`
	// SkipShortNotice leaves out offers whose interruption notice (30s on
	// Azure and GCP spot, 120s on AWS) is shorter than Duration, instead of
	// counting the work an interruption there would lose. It needs a job
	// that checkpoints.
	SkipShortNotice bool `json:"skip_short_notice,omitempty"`
}

// DefaultCheckpointDuration is how long a checkpoint is assumed to take
// when the spec does not say: a job with no checkpoint section is taken to
// checkpoint on SIGUSR1 within a minute. That fits AWS spot's 2-minute
// notice, not the 30 seconds of Azure and GCP spot, where an interruption
// loses the work since the last periodic checkpoint (say how long yours
// take, or set skip_short_notice, or disabled if it cannot checkpoint).
const DefaultCheckpointDuration = time.Minute

// Time is how long one checkpoint takes: Duration, or the default.
func (c Checkpoint) Time() time.Duration {
	if d := c.Duration.D(); d > 0 {
		return d
	}
	return DefaultCheckpointDuration
}

// Vocabulary is what a spec is checked against: the GPU types, providers,
// regions and geographies spotwise knows (the catalog).
type Vocabulary interface {
	KnownGPU(name string) bool
	KnownProvider(name string) bool
	KnownRegion(name string) bool
	KnownGeography(name string) bool
}

// Parse reads a spec from YAML or JSON, fills defaults and validates it
// against vocab. The error, if any, is a *ValidationError naming each bad
// field. A YAML stream of several documents is refused: one spec is one
// job.
func Parse(data []byte, vocab Vocabulary) (Spec, error) { return ParseFor(data, vocab, "") }

// ParseFor is Parse for a submitter whose spec names no team: it is
// team's ("" leaves the default team).
func ParseFor(data []byte, vocab Vocabulary, team string) (Spec, error) {
	raw, fe := specJSON(data)
	if fe != nil {
		return Spec{}, &ValidationError{Errors: []FieldError{*fe}}
	}
	var s Spec
	var d decoder
	d.decode(raw, reflect.ValueOf(&s).Elem(), "")
	errs := d.errs
	// Normalize reads nodes 0 as "not given"; a spec that says nodes: 0 is
	// a mistake and must be refused, not silently run on one node.
	if explicitZeroNodes(raw) {
		errs.add("resources.nodes", "must be between 1 and %d", maxNodes)
	}
	if s.Team == "" {
		s.Team = team
	}
	s.Normalize()
	// Validation sees what decoding left behind: a field that did not
	// decode is zero, and its "is required" would only repeat the problem.
	if ve, ok := AsValidationError(s.Validate(vocab)); ok {
		for _, fe := range ve.Errors {
			if !d.follows(fe.Field) {
				errs = append(errs, fe)
			}
		}
	}
	if err := errs.errAtMost(maxProblems); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// specJSON checks a spec's size and encoding and returns it as JSON, or the
// one problem that stops it from being read at all.
func specJSON(data []byte) (json.RawMessage, *FieldError) {
	if len(data) > MaxSpecBytes {
		return nil, &FieldError{Message: fmt.Sprintf("spec is %d bytes; the limit is %d", len(data), MaxSpecBytes)}
	}
	if !utf8.Valid(data) {
		return nil, &FieldError{Message: "spec is not UTF-8 text"}
	}
	raw := bytes.TrimSpace(data)
	if len(raw) == 0 {
		return nil, &FieldError{Message: "spec is empty"}
	}
	if raw[0] == '{' {
		if !json.Valid(raw) {
			return nil, &FieldError{Message: "spec is not valid JSON"}
		}
		return raw, nil
	}
	docs, err := Documents(raw)
	switch {
	case err != nil:
		return nil, &FieldError{Message: "spec is neither valid YAML nor JSON: " + err.Error()}
	case len(docs) == 0:
		return nil, &FieldError{Message: "spec is empty"}
	case len(docs) > 1:
		return nil, &FieldError{Message: fmt.Sprintf("spec has %d YAML documents; submit one job per document (spotwise submit splits a file for you)", len(docs))}
	}
	return docs[0], nil
}

// explicitZeroNodes reports whether a decoded spec's JSON says nodes: 0.
func explicitZeroNodes(raw []byte) bool {
	var p struct {
		Resources struct {
			Nodes *int `json:"nodes"`
		} `json:"resources"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return false
	}
	return p.Resources.Nodes != nil && *p.Resources.Nodes == 0
}

// Normalize fills defaults in place: API version, team, priority, nodes,
// workload, precision and purchase policy. The default on_deadline_miss
// (expire) it stores as empty instead, as specs that predate the field
// have it.
func (s *Spec) Normalize() {
	// Lower-case first: the precision default depends on the workload.
	s.Workload = strings.ToLower(s.Workload)
	s.Precision = strings.ToLower(s.Precision)
	s.Purchase = strings.ToLower(s.Purchase)
	s.DeadlineMiss = strings.ToLower(s.DeadlineMiss)
	if s.DeadlineMiss == DeadlineMissExpire {
		s.DeadlineMiss = ""
	}
	if s.APIVersion == "" {
		s.APIVersion = APIVersion
	}
	if s.Team == "" {
		s.Team = "default"
	}
	if s.Priority == nil {
		p := DefaultPrio
		s.Priority = &p
	}
	if s.Resources.Nodes == 0 {
		s.Resources.Nodes = 1
	}
	if s.Workload == "" {
		s.Workload = "training"
	}
	if s.Precision == "" {
		if s.Workload == "inference" || s.Workload == "batch-inference" {
			s.Precision = "int8"
		} else {
			s.Precision = "fp16"
		}
	}
	if s.Purchase == "" {
		s.Purchase = PurchaseAuto
	}
}

// Prio is the job's priority (higher runs first).
func (s *Spec) Prio() int {
	if s.Priority == nil {
		return DefaultPrio
	}
	return *s.Priority
}

// OnDeadlineMiss is what becomes of the job when, still queued, it can no
// longer finish by its deadline: DeadlineMissExpire or DeadlineMissRun.
func (s *Spec) OnDeadlineMiss() string {
	if s.DeadlineMiss == "" {
		return DeadlineMissExpire
	}
	return s.DeadlineMiss
}

// TotalGPUs is nodes x GPUs per node.
func (s *Spec) TotalGPUs() int { return max(1, s.Resources.Nodes) * max(1, s.Resources.GPUsPerNode) }

// Class returns the throughput class for the job's workload and precision.
func (s *Spec) Class() string {
	switch {
	case s.Workload == "inference" || s.Workload == "batch-inference":
		return "inference"
	case s.Precision == "fp32" || s.Precision == "tf32":
		return "train-fp32"
	}
	return "train-mixed"
}

// Hash is a digest of the normalized spec; two submissions with the same
// idempotency key must carry the same spec.
func (s *Spec) Hash() string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
