// Package server assembles a spotwise server from its parts: the bus
// (embedded or external NATS), the clouds, the scheduler, the job API and
// the HTTP listener. cmd/spotwise and the end-to-end tests both start
// servers through it.
package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/spotwise/spotwise/alerts"
	"github.com/spotwise/spotwise/auth"
	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers/aws"
	"github.com/spotwise/spotwise/providers/azure"
	"github.com/spotwise/spotwise/providers/sim"
	"github.com/spotwise/spotwise/scheduler"
)

func simInterruptions(i sim.Interruptions) SimInterruptions {
	return SimInterruptions{RateScale: i.RateScale, StormsPerDay: i.StormsPerDay, RebalanceShare: i.RebalanceShare,
		MaintenancePerHour: i.MaintenancePerHour, FailuresPerHour: i.FailuresPerHour}
}

func (s SimInterruptions) model() sim.Interruptions {
	return sim.Interruptions{RateScale: s.RateScale, StormsPerDay: s.StormsPerDay, RebalanceShare: s.RebalanceShare,
		MaintenancePerHour: s.MaintenancePerHour, FailuresPerHour: s.FailuresPerHour}
}

// Config is the server's configuration: defaults, then the YAML file, then
// SPOTWISE_* environment variables, then flags.
type Config struct {
	// NodeName identifies this server among several on one NATS cluster
	// (for the scheduler lease); empty derives one.
	NodeName    string            `json:"node_name"`
	DataDir     string            `json:"data_dir"`
	HTTPAddr    string            `json:"http_addr"`
	Log         LogConfig         `json:"log"`
	NATS        NATSConfig        `json:"nats"`
	Sim         SimConfig         `json:"sim"`
	Scheduler   SchedulerConfig   `json:"scheduler"`
	Feeds       FeedsConfig       `json:"feeds"`
	Checkpoints CheckpointsConfig `json:"checkpoints"`
	Retention   RetentionConfig   `json:"retention"`
	PageCopy    PageCopyConfig    `json:"page_copy"`
	Alerts      alerts.Config     `json:"alerts"`
	// HTTPTLS serves the API over TLS (both files, PEM).
	HTTPTLS TLSFiles `json:"http_tls"`
	// Auth is who may call the API (always on: see AuthConfig).
	Auth AuthConfig `json:"auth"`
	// Providers are the real clouds; each one set sells its capacity in
	// place of the simulated cloud's copy of that provider.
	Providers ProvidersConfig `json:"providers"`
	// Teams are the teams' budgets and quotas, by team name (teams.go).
	Teams map[string]TeamConfig `json:"teams"`
	// Reservations are reserved capacity and capacity blocks the platform
	// holds (reservations.go): used first, their idle hours sunk cost.
	Reservations []ReservationConfig `json:"reservations"`
}

// TLSFiles are a certificate and its key, PEM files.
type TLSFiles struct {
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
}

// AuthConfig says whose credentials the API takes. Authentication is
// always on: API tokens (spotwise token create) work with nothing set;
// OIDC issuers add people signing in with the organisation's identity
// provider.
type AuthConfig struct {
	OIDC []auth.OIDCIssuer `json:"oidc"`
	// OperatorTokenFile is where the first start writes an operator
	// token; default <data_dir>/operator.token.
	OperatorTokenFile string `json:"operator_token_file"`
}

// ProvidersConfig configures the real clouds (nil: not used). Their
// credentials never appear here: AWS takes the SDK's standard chain,
// Azure azidentity's default chain.
type ProvidersConfig struct {
	AWS   *aws.Config   `json:"aws"`
	Azure *azure.Config `json:"azure"`
}

// real lists the names of the real clouds configured.
func (p ProvidersConfig) real() []string {
	var names []string
	if p.AWS != nil {
		names = append(names, aws.ProviderName)
	}
	if p.Azure != nil {
		names = append(names, azure.Name)
	}
	return names
}

// CheckpointsConfig says where checkpoints are kept by default (a job's
// checkpoint.uri overrides it).
type CheckpointsConfig struct {
	// URI is file:///path, s3://bucket/prefix or
	// azblob://account/container/prefix; empty keeps them under the data
	// directory. Cloud credentials come from the standard chains.
	URI string `json:"uri"`
	// Endpoint replaces the S3 or Blob endpoint (MinIO, Azurite).
	Endpoint string `json:"endpoint"`
	Region   string `json:"region"`
}

// FeedsConfig configures the price and capacity feeds.
type FeedsConfig struct {
	// Refresh is a cron schedule ("@every 1m", "*/5 * * * *") on which
	// every provider's full offer book is republished, on top of change
	// events.
	Refresh string `json:"refresh"`
}

// LogConfig selects the log level and format.
type LogConfig struct {
	Level  string `json:"level"`  // debug, info, warn, error
	Format string `json:"format"` // console or json
}

// NATSConfig selects the embedded server or an external one.
type NATSConfig struct {
	// URL of an external server or cluster; empty runs the embedded one.
	URL string `json:"url"`
	// Listen is the embedded server's client address ("" = in-process
	// only).
	Listen      string `json:"listen"`
	CredsFile   string `json:"creds_file"`
	NKeyFile    string `json:"nkey_file"`
	User        string `json:"user"`
	Password    string `json:"password"`
	Token       string `json:"token"`
	TLSCAFile   string `json:"tls_ca_file"`
	TLSCertFile string `json:"tls_cert_file"`
	TLSKeyFile  string `json:"tls_key_file"`
	// Replicas of every stream and bucket (3 or 5 on a cluster).
	Replicas int `json:"replicas"`
	// IdentityDir is the NATS identity of an external server or cluster
	// (`spotwise nats init`): with it the server connects as the service
	// user and issues each agent its own credential. The embedded server
	// keeps its identity in <data_dir>/nats.
	IdentityDir string `json:"identity_dir"`
}

// SimConfig configures the simulated cloud.
type SimConfig struct {
	Enabled bool `json:"enabled"`
	// Speed is how much faster than real time the simulated world runs.
	Speed         float64      `json:"speed"`
	Seed          int64        `json:"seed"`
	Providers     []string     `json:"providers"`
	Regions       []string     `json:"regions"`
	PriceInterval job.Duration `json:"price_interval"`
	// Interruptions is the seeded interruption model.
	Interruptions SimInterruptions `json:"interruptions"`
	// Faults are launch errors the simulated cloud injects (chaos runs).
	Faults SimFaults `json:"faults"`
	// Traces are availability traces (files or folders in the
	// ../shared/traces JSON format) that drive spot availability in the
	// zones they name instead of the model.
	Traces []string `json:"traces"`
	// RunCommands lists the commands (first word) the simulated cloud
	// really runs, through the real agent; other workloads are simulated.
	RunCommands []string `json:"run_commands"`
	// Agent is how those commands' agents run: inprocess, or subprocess
	// (`spotwise agent`, the code path of a real instance; needs the
	// embedded NATS server to listen, or an external one).
	Agent string `json:"agent"`
}

// SimInterruptions tunes how the simulated cloud takes capacity back.
type SimInterruptions struct {
	// RateScale multiplies the per-offer spot interruption rates (1:
	// realistic, a few per thousand instance-hours; 0: none).
	RateScale          float64 `json:"rate_scale"`
	StormsPerDay       float64 `json:"storms_per_day"`
	RebalanceShare     float64 `json:"rebalance_share"`
	MaintenancePerHour float64 `json:"maintenance_per_hour"`
	FailuresPerHour    float64 `json:"failures_per_hour"`
}

// SimFaults are the shares of launch calls the simulated cloud fails on
// purpose, seeded by sim.seed: refused for capacity, refused for good, or
// answered with a time-out (of which UnknownLaunched launched anyway).
type SimFaults struct {
	Capacity        float64 `json:"capacity"`
	Permanent       float64 `json:"permanent"`
	Unknown         float64 `json:"unknown"`
	UnknownLaunched float64 `json:"unknown_launched"`
}

func (f SimFaults) model() *sim.Faults {
	return &sim.Faults{Capacity: f.Capacity, Permanent: f.Permanent, Unknown: f.Unknown, UnknownLaunched: f.UnknownLaunched}
}

// parseSimFaults reads "capacity=0.05,permanent=0.01,unknown=0.05" (any
// of the four keys, unknown_launched too) over f.
func parseSimFaults(f *SimFaults, v string) error {
	fields := map[string]*float64{"capacity": &f.Capacity, "permanent": &f.Permanent, "unknown": &f.Unknown, "unknown_launched": &f.UnknownLaunched}
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		k, val, ok := strings.Cut(part, "=")
		p := fields[strings.TrimSpace(k)]
		if !ok || p == nil {
			return fmt.Errorf("%q is not key=share (keys: capacity, permanent, unknown, unknown_launched)", part)
		}
		if err := setFloat(p, strings.TrimSpace(val)); err != nil {
			return err
		}
	}
	return nil
}

// SchedulerConfig tunes the scheduler.
type SchedulerConfig struct {
	ReconcileInterval job.Duration    `json:"reconcile_interval"`
	UnavailableFor    job.Duration    `json:"unavailable_for"`
	Workers           int             `json:"workers"`
	Arbitrage         ArbitrageConfig `json:"arbitrage"`
}

// RetentionConfig is how long finished jobs stay in the store (their
// records, histories and output): the active scheduler's server removes,
// every interval, those that finished longer than finished_max_age ago
// (scheduler time) and the oldest beyond finished_max_jobs. 0 is no
// limit; live jobs always stay. Jobs' output is also kept at most
// logs_max_age (wall time) and logs_max_bytes in all, the oldest going
// first.
type RetentionConfig struct {
	FinishedMaxAge  job.Duration `json:"finished_max_age"`
	FinishedMaxJobs int          `json:"finished_max_jobs"`
	Interval        job.Duration `json:"interval"`
	LogsMaxAge      job.Duration `json:"logs_max_age"`
	LogsMaxBytes    int64        `json:"logs_max_bytes"`
}

// PageCopyConfig is the API's local copy of job pages (api/pages.go):
// where its file is made (data_dir when empty, the system's temporary
// directory when that is too) and how large it may grow before it stops
// and pages are read from the store again (0: no copy). The ledger's view
// writes the charges it holds to a file in the same directory, up to
// LedgerMaxBytes (0: the charges stay in memory; past the bound, those
// that follow do).
type PageCopyConfig struct {
	Dir            string `json:"dir"`
	MaxBytes       int64  `json:"max_bytes"`
	LedgerMaxBytes int64  `json:"ledger_max_bytes"`
}

// ArbitrageConfig tunes the moves of running jobs to clearly cheaper
// capacity.
type ArbitrageConfig struct {
	Enabled bool `json:"enabled"`
	// MinSaving is the least share of the expected cost of finishing where
	// a job runs that a move, its own cost included, must save.
	MinSaving float64 `json:"min_saving"`
	// MinStay is how long a job runs on capacity before it is moved for
	// price (scheduler time).
	MinStay job.Duration `json:"min_stay"`
}

// Defaults is the configuration with nothing set: embedded NATS under
// ./data, the simulated cloud at 120x, HTTP on 127.0.0.1:8080.
func Defaults() Config {
	return Config{
		DataDir:  "data",
		HTTPAddr: "127.0.0.1:8080",
		Log:      LogConfig{Level: "info", Format: "console"},
		NATS:     NATSConfig{Listen: "127.0.0.1:4222", Replicas: 1},
		Sim: SimConfig{Enabled: true, Speed: 120, Seed: 1, PriceInterval: job.Duration(10 * time.Minute),
			Interruptions: simInterruptions(sim.DefaultInterruptions()), Faults: SimFaults{UnknownLaunched: 0.5},
			RunCommands: []string{"spotwise"}, Agent: "inprocess"},
		PageCopy: PageCopyConfig{MaxBytes: 8 << 30, LedgerMaxBytes: 4 << 30},
		Retention: RetentionConfig{FinishedMaxAge: job.Duration(30 * 24 * time.Hour), FinishedMaxJobs: 1_000_000,
			Interval: job.Duration(10 * time.Minute), LogsMaxAge: job.Duration(events.DefaultLogsMaxAge), LogsMaxBytes: events.DefaultLogsMaxBytes},
		Scheduler: SchedulerConfig{
			ReconcileInterval: job.Duration(15 * time.Second),
			UnavailableFor:    job.Duration(3 * time.Minute),
			Workers:           32,
			Arbitrage: ArbitrageConfig{Enabled: true, MinSaving: scheduler.DefaultArbitrageSaving,
				MinStay: job.Duration(scheduler.DefaultArbitrageMinStay)},
		},
		Feeds: FeedsConfig{Refresh: "@every 1m"},
		Alerts: alerts.Config{DedupeWindow: 5 * time.Minute, RateLimit: alerts.RateLimit{Count: 30, Per: time.Minute, Burst: 10},
			QueueSize: 256, Retry: alerts.Retry{MaxAttempts: 6, Initial: time.Second, Max: time.Minute}},
	}
}

// LoadFile reads a YAML or JSON config file over c. Unknown keys are
// errors, so a typo does not silently fall back to a default.
func (c *Config) LoadFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// envVars maps environment variables to setters.
var envVars = map[string]func(c *Config, v string) error{
	"SPOTWISE_DATA_DIR":          func(c *Config, v string) error { c.DataDir = v; return nil },
	"SPOTWISE_HTTP_ADDR":         func(c *Config, v string) error { c.HTTPAddr = v; return nil },
	"SPOTWISE_LOG_LEVEL":         func(c *Config, v string) error { c.Log.Level = v; return nil },
	"SPOTWISE_LOG_FORMAT":        func(c *Config, v string) error { c.Log.Format = v; return nil },
	"SPOTWISE_NATS_URL":          func(c *Config, v string) error { c.NATS.URL = v; return nil },
	"SPOTWISE_NATS_LISTEN":       func(c *Config, v string) error { c.NATS.Listen = v; return nil },
	"SPOTWISE_NATS_CREDS":        func(c *Config, v string) error { c.NATS.CredsFile = v; return nil },
	"SPOTWISE_NATS_NKEY":         func(c *Config, v string) error { c.NATS.NKeyFile = v; return nil },
	"SPOTWISE_NATS_USER":         func(c *Config, v string) error { c.NATS.User = v; return nil },
	"SPOTWISE_NATS_PASSWORD":     func(c *Config, v string) error { c.NATS.Password = v; return nil },
	"SPOTWISE_NATS_TOKEN":        func(c *Config, v string) error { c.NATS.Token = v; return nil },
	"SPOTWISE_NATS_TLS_CA":       func(c *Config, v string) error { c.NATS.TLSCAFile = v; return nil },
	"SPOTWISE_NATS_TLS_CERT":     func(c *Config, v string) error { c.NATS.TLSCertFile = v; return nil },
	"SPOTWISE_NATS_TLS_KEY":      func(c *Config, v string) error { c.NATS.TLSKeyFile = v; return nil },
	"SPOTWISE_NATS_REPLICAS":     func(c *Config, v string) error { return setInt(&c.NATS.Replicas, v) },
	"SPOTWISE_NATS_IDENTITY_DIR": func(c *Config, v string) error { c.NATS.IdentityDir = v; return nil },
	"SPOTWISE_SIM_SPEED":         func(c *Config, v string) error { return setFloat(&c.Sim.Speed, v) },
	"SPOTWISE_SIM_SEED":          func(c *Config, v string) error { return setInt64(&c.Sim.Seed, v) },
	"SPOTWISE_SIM":               func(c *Config, v string) error { return setBool(&c.Sim.Enabled, v) },
	"SPOTWISE_SIM_INTERRUPTION_SCALE": func(c *Config, v string) error {
		return setFloat(&c.Sim.Interruptions.RateScale, v)
	},
	"SPOTWISE_SIM_FAULTS":            func(c *Config, v string) error { return parseSimFaults(&c.Sim.Faults, v) },
	"SPOTWISE_PAGE_COPY_MAX_BYTES":   func(c *Config, v string) error { return setInt64(&c.PageCopy.MaxBytes, v) },
	"SPOTWISE_LEDGER_COPY_MAX_BYTES": func(c *Config, v string) error { return setInt64(&c.PageCopy.LedgerMaxBytes, v) },
	"SPOTWISE_RECONCILE_EVERY":       func(c *Config, v string) error { return setDuration(&c.Scheduler.ReconcileInterval, v) },
	"SPOTWISE_ARBITRAGE":             func(c *Config, v string) error { return setBool(&c.Scheduler.Arbitrage.Enabled, v) },
}

// LoadEnv applies SPOTWISE_* variables found by lookup (os.LookupEnv).
func (c *Config) LoadEnv(lookup func(string) (string, bool)) error {
	var errs []error
	for name, set := range envVars {
		if v, ok := lookup(name); ok {
			if err := set(c, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func setInt(p *int, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	*p = n
	return nil
}

func setInt64(p *int64, v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	*p = n
	return nil
}

func setFloat(p *float64, v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("%q is not a number", v)
	}
	*p = f
	return nil
}

func setBool(p *bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	*p = b
	return nil
}

func setDuration(p *job.Duration, v string) error {
	d, err := job.ParseDuration(v)
	if err != nil {
		return err
	}
	*p = job.Duration(d)
	return nil
}

// problemLines splits a provider's validation error into its problems,
// one per line ("field: problem").
func problemLines(err error) []string {
	if err == nil {
		return nil
	}
	var lines []string
	for l := range strings.SplitSeq(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// Validate checks the configuration and names every problem.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.NATS.URL == "" && c.DataDir == "" {
		bad("data_dir", "is required for the embedded NATS server")
	}
	if c.NATS.URL != "" && c.DataDir == "" && c.Auth.OperatorTokenFile == "" {
		bad("auth.operator_token_file", "is required when data_dir is empty: it is where the first start writes the operator token")
	}
	if c.NATS.URL == "" && c.NATS.IdentityDir != "" {
		bad("nats.identity_dir", "is for an external NATS (nats.url): the embedded server keeps its own identity in <data_dir>/nats")
	}
	if c.Retention.FinishedMaxAge < 0 || c.Retention.FinishedMaxJobs < 0 {
		bad("retention", "finished_max_age and finished_max_jobs are 0 (no limit) or more")
	}
	if c.Retention.Interval.D() < time.Second {
		bad("retention.interval", "%s is under a second", c.Retention.Interval.D())
	}
	if c.Retention.LogsMaxAge.D() < time.Hour {
		bad("retention.logs_max_age", "%s is under an hour", c.Retention.LogsMaxAge.D())
	}
	if c.PageCopy.MaxBytes < 0 {
		bad("page_copy.max_bytes", "%d is under 0", c.PageCopy.MaxBytes)
	}
	if c.PageCopy.LedgerMaxBytes < 0 {
		bad("page_copy.ledger_max_bytes", "%d is under 0", c.PageCopy.LedgerMaxBytes)
	}
	if c.Retention.LogsMaxBytes < 1<<20 {
		bad("retention.logs_max_bytes", "%d is under 1 MiB", c.Retention.LogsMaxBytes)
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		bad("http_addr", "%q is not host:port", c.HTTPAddr)
	}
	if (c.HTTPTLS.CertFile == "") != (c.HTTPTLS.KeyFile == "") {
		bad("http_tls", "give both cert_file and key_file (--tls-cert and --tls-key)")
	}
	for _, f := range []struct{ field, path string }{{"http_tls.cert_file", c.HTTPTLS.CertFile}, {"http_tls.key_file", c.HTTPTLS.KeyFile}} {
		if f.path != "" {
			if _, err := os.Stat(f.path); err != nil {
				bad(f.field, "%v", err)
			}
		}
	}
	for i, o := range c.Auth.OIDC {
		if err := o.Validate(); err != nil {
			bad(fmt.Sprintf("auth.oidc[%d]", i), "%v", err)
		}
	}
	if c.NATS.Listen != "" {
		if _, _, err := net.SplitHostPort(c.NATS.Listen); err != nil {
			bad("nats.listen", "%q is not host:port", c.NATS.Listen)
		}
	}
	if c.NATS.URL != "" && !strings.Contains(c.NATS.URL, "://") {
		bad("nats.url", "%q needs a scheme, such as nats://host:4222", c.NATS.URL)
	}
	if c.NATS.Replicas < 1 || c.NATS.Replicas > 5 {
		bad("nats.replicas", "must be between 1 and 5")
	}
	if (c.NATS.TLSCertFile == "") != (c.NATS.TLSKeyFile == "") {
		bad("nats.tls_cert_file", "give both a certificate and a key file")
	}
	for _, f := range []struct{ field, path string }{{"nats.creds_file", c.NATS.CredsFile}, {"nats.nkey_file", c.NATS.NKeyFile}, {"nats.tls_ca_file", c.NATS.TLSCAFile}, {"nats.tls_cert_file", c.NATS.TLSCertFile}, {"nats.tls_key_file", c.NATS.TLSKeyFile}} {
		if f.path != "" {
			if _, err := os.Stat(f.path); err != nil {
				bad(f.field, "%v", err)
			}
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error")
	}
	switch c.Log.Format {
	case "console", "json":
	default:
		bad("log.format", "must be console or json")
	}
	real := c.Providers.real()
	switch {
	case !c.Sim.Enabled && len(real) == 0:
		bad("sim.enabled", "no cloud: keep the simulated cloud or configure providers.aws or providers.azure")
	case c.Sim.Enabled && len(real) > 0 && c.Sim.Speed != 1:
		bad("sim.speed", "must be 1 while a real cloud (%s) is configured: they share one clock; or set sim.enabled: false", strings.Join(real, ", "))
	}
	for _, p := range c.Sim.Providers {
		if slices.Contains(real, p) {
			bad("sim.providers", "%s is configured as a real cloud (providers.%s); the simulated cloud cannot sell it too", p, p)
		}
	}
	if c.Providers.AWS != nil {
		for _, line := range problemLines(c.Providers.AWS.Validate()) {
			errs = append(errs, errors.New("providers.aws."+line))
		}
	}
	if c.Providers.Azure != nil {
		for _, line := range problemLines(c.Providers.Azure.Validate()) {
			errs = append(errs, errors.New("providers."+line))
		}
	}
	if c.Sim.Speed <= 0 || c.Sim.Speed > 100_000 {
		bad("sim.speed", "must be above 0 and at most 100000")
	}
	if c.Scheduler.ReconcileInterval.D() < 100*time.Millisecond {
		bad("scheduler.reconcile_interval", "must be at least 100ms")
	}
	in := c.Sim.Interruptions
	for _, f := range []struct {
		name string
		v    float64
	}{{"rate_scale", in.RateScale}, {"storms_per_day", in.StormsPerDay}, {"maintenance_per_hour", in.MaintenancePerHour}, {"failures_per_hour", in.FailuresPerHour}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			bad("sim.interruptions."+f.name, "must be a number >= 0")
		}
	}
	if in.RebalanceShare < 0 || in.RebalanceShare > 1 {
		bad("sim.interruptions.rebalance_share", "must be between 0 and 1")
	}
	fs, sharesOK := c.Sim.Faults, true
	for _, f := range []struct {
		name string
		v    float64
	}{{"capacity", fs.Capacity}, {"permanent", fs.Permanent}, {"unknown", fs.Unknown}, {"unknown_launched", fs.UnknownLaunched}} {
		if !(f.v >= 0 && f.v <= 1) {
			bad("sim.faults."+f.name, "must be between 0 and 1")
			sharesOK = false
		}
	}
	if sum := fs.Capacity + fs.Permanent + fs.Unknown; sharesOK && sum > 1 {
		bad("sim.faults", "capacity, permanent and unknown add up to %g, more than 1", sum)
	}
	for i, p := range c.Sim.Traces {
		if _, err := os.Stat(p); err != nil {
			bad(fmt.Sprintf("sim.traces[%d]", i), "%v", err)
		}
	}
	if c.Sim.Agent != "inprocess" && c.Sim.Agent != "subprocess" {
		bad("sim.agent", "must be inprocess or subprocess")
	}
	if c.Checkpoints.URI != "" {
		scheme, _, ok := strings.Cut(c.Checkpoints.URI, "://")
		if !ok || (scheme != "file" && scheme != "s3" && scheme != "azblob") {
			bad("checkpoints.uri", "must start with file://, s3:// or azblob://")
		}
	}
	if err := c.Alerts.Validate(); err != nil {
		bad("alerts", "%v", err)
	}
	if _, err := cron.ParseStandard(c.Feeds.Refresh); err != nil {
		bad("feeds.refresh", "%q is not a cron schedule: %v", c.Feeds.Refresh, err)
	}
	if c.Scheduler.Workers < 1 || c.Scheduler.Workers > 1024 {
		bad("scheduler.workers", "must be between 1 and 1024")
	}
	if a := c.Scheduler.Arbitrage; !(a.MinSaving > 0 && a.MinSaving < 1) {
		bad("scheduler.arbitrage.min_saving", "must be above 0 and below 1 (0.2 = a move must save 20%%)")
	}
	if c.Scheduler.Arbitrage.MinStay.D() <= 0 {
		bad("scheduler.arbitrage.min_stay", "must be above 0 (such as 1h)")
	}
	validateTeams(c.Teams, bad)
	if _, err := c.reservations(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
