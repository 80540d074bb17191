package job

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spotwise/spotwise/money"
)

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	signalRE = regexp.MustCompile(`^SIG[A-Z0-9]+$`)
)

var (
	workloads  = []string{"training", "fine-tuning", "inference", "batch-inference"}
	precisions = []string{"fp32", "tf32", "fp16", "bf16", "fp8", "int8"}
	purchases  = []string{PurchaseSpot, PurchaseOnDemand, PurchaseAuto}
	misses     = []string{DeadlineMissExpire, DeadlineMissRun}
)

// maxPrice is a sanity cap: no GPU instance costs $1,000 an hour.
var maxPrice = money.USD(1000, 0)

// maxJobCost is a sanity cap on max_cost_usd: ten million dollars is a
// typo, not a budget for one job.
var maxJobCost = money.USD(10_000_000, 0)

// Validate checks every field of a normalized spec and returns a
// *ValidationError listing all problems, or nil.
func (s *Spec) Validate(vocab Vocabulary) error {
	var e fieldErrors
	if s.APIVersion != APIVersion {
		e.add("api_version", "must be %q", APIVersion)
	}
	checkName(&e, "name", s.Name, true)
	checkName(&e, "team", s.Team, true)
	if p := s.Prio(); p < 0 || p > MaxPriority {
		e.add("priority", "must be between 0 and %d", MaxPriority)
	}
	checkMap(&e, "labels", s.Labels, nameRE)
	checkMap(&e, "env", s.Env, envKeyRE)
	checkMap(&e, "secret_env", s.SecretEnv, envKeyRE)
	for k := range s.SecretEnv {
		if _, both := s.Env[k]; both {
			e.add("secret_env."+k, "is also in env: give a variable in one of them")
		}
	}
	if s.Image == "" && len(s.Command) == 0 {
		e.add("command", "give a command, an image, or both")
	}
	checkText(&e, "image", s.Image)
	checkList(&e, "command", s.Command)
	if !slices.Contains(workloads, s.Workload) {
		e.add("workload", "must be one of %s", strings.Join(workloads, ", "))
	}
	if !slices.Contains(precisions, s.Precision) {
		e.add("precision", "must be one of %s", strings.Join(precisions, ", "))
	}
	s.validateResources(&e, vocab)
	s.validateWork(&e, vocab)
	if !s.Deadline.At.IsZero() && s.Deadline.At.Year() < 2000 {
		e.add("deadline", "is in the distant past")
	}
	if s.Deadline.Within < 0 {
		e.add("deadline", "must be positive")
	}
	if !slices.Contains(misses, s.OnDeadlineMiss()) {
		e.add("on_deadline_miss", "must be %s", strings.Join(misses, " or "))
	}
	if !slices.Contains(purchases, s.Purchase) {
		e.add("purchase", "must be one of %s", strings.Join(purchases, ", "))
	}
	if s.MaxPricePerHour < 0 {
		e.add("max_price_per_hour", "must not be negative")
	} else if s.MaxPricePerHour > maxPrice {
		e.add("max_price_per_hour", "%s per hour is above the %s sanity limit", s.MaxPricePerHour, maxPrice)
	}
	if s.MaxCost < 0 {
		e.add("max_cost_usd", "must not be negative")
	} else if s.MaxCost > maxJobCost {
		e.add("max_cost_usd", "%s is above the %s sanity limit", s.MaxCost, maxJobCost)
	}
	s.validatePlacement(&e, vocab)
	s.validateCheckpoint(&e)
	s.validateData(&e, vocab)
	if s.MaxRetries < 0 || s.MaxRetries > 100 {
		e.add("max_retries", "must be between 0 and 100")
	}
	return e.err()
}

func (s *Spec) validateResources(e *fieldErrors, vocab Vocabulary) {
	r := s.Resources
	if len(r.Accelerators) > maxListLen {
		e.add("resources.accelerators", "has more than %d entries", maxListLen)
	}
	for i, a := range r.Accelerators {
		if vocab != nil && !vocab.KnownGPU(a) {
			e.add(fmt.Sprintf("resources.accelerators[%d]", i), "unknown GPU type %q", a)
		}
	}
	if r.MinGPUMemoryGB < 0 || r.MinGPUMemoryGB > 1024 {
		e.add("resources.min_gpu_memory_gb", "must be between 0 and 1024")
	}
	if r.GPUsPerNode < 1 || r.GPUsPerNode > maxGPUsPerNode {
		e.add("resources.gpus_per_node", "must be between 1 and %d", maxGPUsPerNode)
	}
	if r.Nodes < 1 || r.Nodes > maxNodes {
		e.add("resources.nodes", "must be between 1 and %d", maxNodes)
	}
	if r.MinVCPUs < 0 || r.MinVCPUs > 1024 {
		e.add("resources.min_vcpus_per_node", "must be between 0 and 1024")
	}
	if r.MinMemoryGiB < 0 || r.MinMemoryGiB > 65536 {
		e.add("resources.min_memory_gib_per_node", "must be between 0 and 65536")
	}
}

func (s *Spec) validateWork(e *fieldErrors, vocab Vocabulary) {
	w := s.Work
	switch {
	case w.IsZero():
		e.add("work", "is required: how long the job takes on a reference GPU, such as \"48h on V100\"")
		return
	case w.Duration != 0 && w.GPUHours != 0:
		e.add("work", "give duration or gpu_hours, not both")
	case w.Duration < 0 || !(w.GPUHours >= 0): // catches NaN too
		e.add("work", "must be positive")
	case w.Duration == 0 && w.GPUHours == 0:
		e.add("work", "give duration or gpu_hours")
	}
	if d := w.ReferenceDuration(s.TotalGPUs()); d > 100_000*time.Hour {
		e.add("work", "is more than 100,000 hours on the reference GPU")
	} else if (w.Duration > 0 || w.GPUHours > 0) && d < time.Second {
		e.add("work", "is less than a second on the reference GPU")
	}
	switch {
	case w.ReferenceGPU == "":
		e.add("work.reference_gpu", "is required: the GPU the work was measured on")
	case vocab != nil && !vocab.KnownGPU(w.ReferenceGPU):
		e.add("work.reference_gpu", "unknown GPU type %q", w.ReferenceGPU)
	}
}

func (s *Spec) validatePlacement(e *fieldErrors, vocab Vocabulary) {
	p := s.Placement
	for field, list := range map[string][]string{"placement.providers": p.Providers, "placement.deny_providers": p.DenyProviders} {
		if len(list) > maxListLen {
			e.add(field, "has more than %d entries", maxListLen)
		}
		for i, name := range list {
			if vocab != nil && !vocab.KnownProvider(name) {
				e.add(fmt.Sprintf("%s[%d]", field, i), "unknown provider %q", name)
			}
		}
	}
	for field, list := range map[string][]string{"placement.regions": p.Regions, "placement.deny_regions": p.DenyRegions} {
		if len(list) > maxListLen {
			e.add(field, "has more than %d entries", maxListLen)
		}
		for i, pat := range list {
			f := fmt.Sprintf("%s[%d]", field, i)
			if _, err := path.Match(pat, ""); err != nil {
				e.add(f, "%q is not a valid pattern", pat)
			} else if !strings.ContainsAny(pat, "*?[") && vocab != nil && !vocab.KnownRegion(pat) {
				e.add(f, "unknown region %q", pat)
			}
		}
	}
	if len(p.Geographies) > maxListLen {
		e.add("placement.geographies", "has more than %d entries", maxListLen)
	}
	for i, g := range p.Geographies {
		if vocab != nil && !vocab.KnownGeography(g) {
			e.add(fmt.Sprintf("placement.geographies[%d]", i), "unknown geography %q", g)
		}
	}
	if len(p.Providers) > 0 && len(p.DenyProviders) > 0 {
		left := slices.DeleteFunc(slices.Clone(p.Providers), func(x string) bool { return slices.Contains(p.DenyProviders, x) })
		if len(left) == 0 {
			e.add("placement.deny_providers", "denies every allowed provider")
		}
	}
}

func (s *Spec) validateCheckpoint(e *fieldErrors) {
	c := s.Checkpoint
	if c.URI != "" {
		scheme, _, ok := strings.Cut(c.URI, "://")
		if !ok || !slices.Contains([]string{"file", "s3", "azblob"}, scheme) {
			e.add("checkpoint.uri", "must start with file://, s3:// or azblob://")
		}
	}
	if c.Interval < 0 || (c.Interval > 0 && c.Interval.D() < time.Minute) {
		e.add("checkpoint.interval", "must be at least 1m")
	}
	if c.Duration < 0 || c.Duration.D() > 24*time.Hour {
		e.add("checkpoint.duration", "must be between 0 and 24h")
	}
	if c.SizeGB < 0 || c.SizeGB > 100_000 {
		e.add("checkpoint.size_gb", "must be between 0 and 100000")
	}
	if c.Signal != "" && !signalRE.MatchString(c.Signal) {
		e.add("checkpoint.signal", "must be a signal name such as SIGUSR1")
	}
	checkList(e, "checkpoint.command", c.Command)
	if c.SkipShortNotice && c.Disabled {
		e.add("checkpoint.skip_short_notice", "cannot go with checkpoint.disabled: true; a job that does not checkpoint has nothing to fit in the notice window")
	}
}

// maxDataGB is a sanity cap on data.size_gb: ten petabytes.
const maxDataGB = 10_000_000

func (s *Spec) validateData(e *fieldErrors, vocab Vocabulary) {
	d := s.Data
	if d == (Data{}) {
		return
	}
	switch {
	case d.Provider == "" && d.Region != "":
		e.add("data.provider", "is required with data.region: the cloud the data is stored in")
	case d.Provider == "":
		e.add("data.provider", "is required: the cloud the data is stored in")
	case vocab != nil && !vocab.KnownProvider(d.Provider):
		e.add("data.provider", "unknown provider %q", d.Provider)
	}
	switch {
	case d.Region == "":
		e.add("data.region", "is required: the region the data is stored in")
	case vocab != nil && !vocab.KnownRegion(d.Region):
		e.add("data.region", "unknown region %q", d.Region)
	}
	switch {
	case !(d.SizeGB >= 0) || d.SizeGB > maxDataGB: // catches NaN too
		e.add("data.size_gb", "must be between 0 and %d", maxDataGB)
	case d.SizeGB == 0:
		e.add("data.size_gb", "is required: the data's size in GB, which an attempt in another region pays egress for")
	}
}

func checkName(e *fieldErrors, field, v string, required bool) {
	switch {
	case v == "" && required:
		e.add(field, "is required")
	case v == "":
	case len(v) > maxNameLen:
		e.add(field, "is longer than %d characters", maxNameLen)
	case !nameRE.MatchString(v):
		e.add(field, "%q may hold only letters, digits, '.', '_' and '-', and must start with a letter or digit", v)
	}
}

func checkText(e *fieldErrors, field, v string) {
	if len(v) > maxValueLen {
		e.add(field, "is longer than %d characters", maxValueLen)
	}
	if strings.ContainsRune(v, 0) {
		e.add(field, "contains a NUL character")
	}
}

func checkList(e *fieldErrors, field string, l []string) {
	if len(l) > maxListLen {
		e.add(field, "has more than %d entries", maxListLen)
	}
	for i, v := range l {
		checkText(e, fmt.Sprintf("%s[%d]", field, i), v)
	}
}

func checkMap(e *fieldErrors, field string, m map[string]string, keyRE *regexp.Regexp) {
	if len(m) > maxMapEntries {
		e.add(field, "has more than %d entries", maxMapEntries)
	}
	for k, v := range m {
		if len(k) > maxNameLen || !keyRE.MatchString(k) {
			e.add(field+"."+k, "is not a valid key")
		}
		checkText(e, field+"."+k, v)
	}
}
