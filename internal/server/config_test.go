package server

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// configExample is the example operators copy; it must stay loadable.
var configExample = filepath.Join("..", "..", "deploy", "config.example.yaml")

// writeConfig writes a config file into a fresh temporary directory.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spotwise.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeEnv is a lookup over a map, standing in for os.LookupEnv.
func fakeEnv(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// problems splits a Validate or LoadEnv error into its lines, one per
// problem.
func problems(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// configKeys lists the dotted key of every leaf of Config, as a config
// file spells it ("nats.replicas").
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			keys = append(keys, configKeys(f.Type, prefix+name+".")...)
			continue
		}
		keys = append(keys, prefix+name)
	}
	return keys
}

// fileKeys lists the dotted key of every leaf set in a decoded YAML map.
func fileKeys(m map[string]any, prefix string) []string {
	var keys []string
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			keys = append(keys, fileKeys(sub, prefix+k+".")...)
			continue
		}
		keys = append(keys, prefix+k)
	}
	return keys
}

// sameEmpty treats nil and empty lists alike: "providers: []" in a file
// means the same as leaving the key out.
func sameEmpty(c Config) Config {
	if len(c.Sim.Providers) == 0 {
		c.Sim.Providers = nil
	}
	if len(c.Sim.Regions) == 0 {
		c.Sim.Regions = nil
	}
	if len(c.Sim.Traces) == 0 {
		c.Sim.Traces = nil
	}
	if len(c.Alerts.Webhooks) == 0 {
		c.Alerts.Webhooks = nil
	}
	if len(c.Auth.OIDC) == 0 {
		c.Auth.OIDC = nil
	}
	if len(c.Teams) == 0 {
		c.Teams = nil
	}
	if len(c.Reservations) == 0 {
		c.Reservations = nil
	}
	return c
}

func TestConfigExample(t *testing.T) {
	t.Run("loads and validates", func(t *testing.T) {
		c := Defaults()
		if err := c.LoadFile(configExample); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("the example does not validate:\n%v", err)
		}
	})
	t.Run("states the defaults", func(t *testing.T) {
		// Loaded over a zero Config, the example alone must give the
		// defaults: what it says is the default is the default.
		var c Config
		if err := c.LoadFile(configExample); err != nil {
			t.Fatal(err)
		}
		if got, want := sameEmpty(c), sameEmpty(Defaults()); !reflect.DeepEqual(got, want) {
			t.Errorf("the example differs from Defaults():\n got %+v\nwant %+v", got, want)
		}
	})
	t.Run("names every key", func(t *testing.T) {
		b, err := os.ReadFile(configExample)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		have := fileKeys(m, "")
		for _, key := range configKeys(reflect.TypeFor[Config](), "") {
			if !slices.Contains(have, key) {
				t.Errorf("%s is not in %s; document it with its default", key, configExample)
			}
		}
	})
}

func TestConfigFileUnknownKeyIsAnError(t *testing.T) {
	tests := []struct {
		name string
		body string
		key  string
	}{
		{name: "top level", body: "http_adr: 127.0.0.1:8080\n", key: "http_adr"},
		{name: "under nats", body: "nats:\n  replica: 3\n", key: "replica"},
		{name: "under scheduler", body: "scheduler:\n  worker: 8\n", key: "worker"},
		{name: "beside known keys", body: "log:\n  level: debug\n  colour: true\n", key: "colour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.body)
			c := Defaults()
			err := c.LoadFile(path)
			if err == nil {
				t.Fatalf("loading %q: no error, want one naming %s", tt.body, tt.key)
			}
			if !strings.Contains(err.Error(), `"`+tt.key+`"`) {
				t.Errorf("error %q does not name the key %q", err, tt.key)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestConfigPrecedence(t *testing.T) {
	const file = `http_addr: 0.0.0.0:9090
log:
  level: debug
nats:
  url: nats://file:4222
  replicas: 3
sim:
  speed: 60
`
	tests := []struct {
		name string
		file string // "" = no --config
		env  map[string]string
		want func(c *Config)
	}{
		{
			name: "defaults alone",
			want: func(*Config) {},
		},
		{
			name: "file over defaults",
			file: file,
			want: func(c *Config) {
				c.HTTPAddr, c.Log.Level, c.NATS.URL, c.NATS.Replicas, c.Sim.Speed = "0.0.0.0:9090", "debug", "nats://file:4222", 3, 60
			},
		},
		{
			name: "env over defaults",
			env:  map[string]string{"SPOTWISE_SIM_SPEED": "1", "SPOTWISE_RECONCILE_EVERY": "2s"},
			want: func(c *Config) {
				c.Sim.Speed, c.Scheduler.ReconcileInterval = 1, job.Duration(2*time.Second)
			},
		},
		{
			name: "simulated launch faults and interruption scale from env",
			env:  map[string]string{"SPOTWISE_SIM_FAULTS": "capacity=0.05, unknown=0.1,unknown_launched=0.25", "SPOTWISE_SIM_INTERRUPTION_SCALE": "300"},
			want: func(c *Config) {
				c.Sim.Faults = SimFaults{Capacity: 0.05, Unknown: 0.1, UnknownLaunched: 0.25}
				c.Sim.Interruptions.RateScale = 300
			},
		},
		{
			name: "env over file, file over defaults",
			file: file,
			env: map[string]string{
				"SPOTWISE_SIM_SPEED": "1", "SPOTWISE_NATS_URL": "nats://env-1:4222,nats://env-2:4222",
				"SPOTWISE_NATS_USER": "spotwise", "SPOTWISE_NATS_PASSWORD": "from-env",
			},
			want: func(c *Config) {
				c.HTTPAddr, c.Log.Level, c.NATS.Replicas = "0.0.0.0:9090", "debug", 3 // the file's
				c.Sim.Speed, c.NATS.URL = 1, "nats://env-1:4222,nats://env-2:4222"    // the environment's
				c.NATS.User, c.NATS.Password = "spotwise", "from-env"
			},
		},
		{
			name: "variables outside SPOTWISE_ are ignored",
			file: file,
			env:  map[string]string{"NATS_URL": "nats://other:4222", "SPOTWISE_SERVER": "10.0.0.1:8080"},
			want: func(c *Config) {
				c.HTTPAddr, c.Log.Level, c.NATS.URL, c.NATS.Replicas, c.Sim.Speed = "0.0.0.0:9090", "debug", "nats://file:4222", 3, 60
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Defaults()
			if tt.file != "" {
				if err := got.LoadFile(writeConfig(t, tt.file)); err != nil {
					t.Fatal(err)
				}
			}
			if err := got.LoadEnv(fakeEnv(tt.env)); err != nil {
				t.Fatal(err)
			}
			want := Defaults()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestConfigBadEnvValueNamesTheVariable(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // every one must appear in the error
		n    int      // problems reported
	}{
		{name: "speed not a number", env: map[string]string{"SPOTWISE_SIM_SPEED": "fast"}, want: []string{"SPOTWISE_SIM_SPEED", `"fast"`}, n: 1},
		{name: "replicas not a whole number", env: map[string]string{"SPOTWISE_NATS_REPLICAS": "three"}, want: []string{"SPOTWISE_NATS_REPLICAS", `"three"`}, n: 1},
		{name: "seed not a whole number", env: map[string]string{"SPOTWISE_SIM_SEED": "1.5"}, want: []string{"SPOTWISE_SIM_SEED", `"1.5"`}, n: 1},
		{name: "sim not a boolean", env: map[string]string{"SPOTWISE_SIM": "maybe"}, want: []string{"SPOTWISE_SIM", `"maybe"`}, n: 1},
		{name: "interval without a unit", env: map[string]string{"SPOTWISE_RECONCILE_EVERY": "15"}, want: []string{"SPOTWISE_RECONCILE_EVERY", `"15"`}, n: 1},
		{name: "faults with an unknown key", env: map[string]string{"SPOTWISE_SIM_FAULTS": "capacity=0.1,timeouts=0.2"}, want: []string{"SPOTWISE_SIM_FAULTS", `"timeouts=0.2"`}, n: 1},
		{
			name: "several at once",
			env:  map[string]string{"SPOTWISE_SIM_SPEED": "fast", "SPOTWISE_NATS_REPLICAS": "three", "SPOTWISE_HTTP_ADDR": ":8080"},
			want: []string{"SPOTWISE_SIM_SPEED", "SPOTWISE_NATS_REPLICAS"},
			n:    2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			err := c.LoadEnv(fakeEnv(tt.env))
			if err == nil {
				t.Fatalf("no error, want one naming %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
			if got := problems(err); len(got) != tt.n {
				t.Errorf("%d problems reported, want %d: %q", len(got), tt.n, got)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	examples := exampleProviders(t)
	dir := t.TempDir()
	cert := filepath.Join(dir, "client.crt")
	if err := os.WriteFile(cert, []byte("not checked until connecting"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "spotwise.creds")

	tests := []struct {
		name  string
		set   func(c *Config)
		field string // "" = valid
	}{
		{name: "defaults", set: func(*Config) {}},
		{name: "external cluster needs no data dir", set: func(c *Config) {
			c.DataDir, c.NATS.URL, c.NATS.Replicas = "", "nats://nats-1:4222,nats://nats-2:4222", 3
			c.Auth.OperatorTokenFile = "/etc/spotwise/operator.token"
		}},
		{name: "but then a place for the operator token", set: func(c *Config) {
			c.DataDir, c.NATS.URL = "", "nats://nats-1:4222"
		}, field: "auth.operator_token_file"},
		{name: "an identity for the embedded server", set: func(c *Config) { c.NATS.IdentityDir = dir }, field: "nats.identity_dir"},
		{name: "bounds are allowed", set: func(c *Config) {
			c.NATS.Replicas, c.Scheduler.Workers, c.Sim.Speed = 5, 1024, 100_000
			c.Scheduler.ReconcileInterval = job.Duration(100 * time.Millisecond)
		}},
		{name: "http_addr without port", set: func(c *Config) { c.HTTPAddr = "localhost" }, field: "http_addr"},
		{name: "nats.url without scheme", set: func(c *Config) { c.NATS.URL = "nats-1:4222" }, field: "nats.url"},
		{name: "nats.listen without port", set: func(c *Config) { c.NATS.Listen = "127.0.0.1" }, field: "nats.listen"},
		{name: "replicas 0", set: func(c *Config) { c.NATS.Replicas = 0 }, field: "nats.replicas"},
		{name: "replicas 6", set: func(c *Config) { c.NATS.Replicas = 6 }, field: "nats.replicas"},
		{name: "cert without key", set: func(c *Config) { c.NATS.TLSCertFile = cert }, field: "nats.tls_cert_file"},
		{name: "missing creds file", set: func(c *Config) { c.NATS.CredsFile = missing }, field: "nats.creds_file"},
		{name: "embedded without data dir", set: func(c *Config) { c.DataDir = "" }, field: "data_dir"},
		{name: "log level", set: func(c *Config) { c.Log.Level = "verbose" }, field: "log.level"},
		{name: "log format", set: func(c *Config) { c.Log.Format = "text" }, field: "log.format"},
		{name: "sim disabled", set: func(c *Config) { c.Sim.Enabled = false }, field: "sim.enabled"},
		{name: "aws alone", set: func(c *Config) { c.Sim.Enabled, c.Providers.AWS = false, examples.AWS }},
		{name: "azure alone", set: func(c *Config) { c.Sim.Enabled, c.Providers.Azure = false, examples.Azure }},
		{name: "both clouds beside a real-time sim", set: func(c *Config) { c.Providers, c.Sim.Speed = examples, 1 }},
		{name: "real cloud beside a fast sim", set: func(c *Config) { c.Providers.AWS = examples.AWS }, field: "sim.speed"},
		{name: "sim cannot sell a real cloud", set: func(c *Config) {
			c.Providers.Azure, c.Sim.Speed, c.Sim.Providers = examples.Azure, 1, []string{"gcp", "azure"}
		}, field: "sim.providers"},
		{name: "aws problem is named under providers.aws", set: func(c *Config) {
			bad := *examples.AWS
			bad.Regions = slices.Clone(bad.Regions)
			bad.Regions[0].AMI = "ubuntu"
			c.Sim.Enabled, c.Providers.AWS = false, &bad
		}, field: "providers.aws.regions[0].ami"},
		{name: "azure problem is named under providers.azure", set: func(c *Config) {
			bad := *examples.Azure
			bad.SubscriptionID = "my-subscription"
			c.Sim.Enabled, c.Providers.Azure = false, &bad
		}, field: "providers.azure.subscription_id"},
		{name: "sim speed 0", set: func(c *Config) { c.Sim.Speed = 0 }, field: "sim.speed"},
		{name: "output kept a minute", set: func(c *Config) { c.Retention.LogsMaxAge = job.Duration(time.Minute) }, field: "retention.logs_max_age"},
		{name: "output kept in 1 KiB", set: func(c *Config) { c.Retention.LogsMaxBytes = 1 << 10 }, field: "retention.logs_max_bytes"},
		{name: "sim speed negative", set: func(c *Config) { c.Sim.Speed = -1 }, field: "sim.speed"},
		{name: "reconcile interval 10ms", set: func(c *Config) { c.Scheduler.ReconcileInterval = job.Duration(10 * time.Millisecond) }, field: "scheduler.reconcile_interval"},
		{name: "workers 0", set: func(c *Config) { c.Scheduler.Workers = 0 }, field: "scheduler.workers"},
		{name: "arbitrage saving 1", set: func(c *Config) { c.Scheduler.Arbitrage.MinSaving = 1 }, field: "scheduler.arbitrage.min_saving"},
		{name: "arbitrage saving 0", set: func(c *Config) { c.Scheduler.Arbitrage.MinSaving = 0 }, field: "scheduler.arbitrage.min_saving"},
		{name: "arbitrage stay negative", set: func(c *Config) { c.Scheduler.Arbitrage.MinStay = job.Duration(-time.Minute) }, field: "scheduler.arbitrage.min_stay"},
		{name: "arbitrage stay 0", set: func(c *Config) { c.Scheduler.Arbitrage.MinStay = 0 }, field: "scheduler.arbitrage.min_stay"},
		{name: "refresh not a cron schedule", set: func(c *Config) { c.Feeds.Refresh = "every minute" }, field: "feeds.refresh"},
		{name: "launch faults", set: func(c *Config) {
			c.Sim.Faults = SimFaults{Capacity: 0.1, Permanent: 0.02, Unknown: 0.1, UnknownLaunched: 1}
		}},
		{name: "a fault share above 1", set: func(c *Config) { c.Sim.Faults.Unknown = 1.5 }, field: "sim.faults.unknown"},
		{name: "fault shares adding up to more than 1", set: func(c *Config) { c.Sim.Faults.Capacity, c.Sim.Faults.Permanent = 0.6, 0.6 }, field: "sim.faults"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			tt.set(&c)
			err := c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused a valid configuration:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want a problem with %s", tt.field)
			}
			got := problems(err)
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.field+": ") {
				t.Errorf("got %q, want one problem starting with %q", got, tt.field+": ")
			}
		})
	}

	t.Run("missing file is named by its path", func(t *testing.T) {
		c := Defaults()
		c.NATS.CredsFile = missing
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("got %v, want the missing path %s", err, missing)
		}
	})

	t.Run("reports every problem at once", func(t *testing.T) {
		c := Defaults()
		c.HTTPAddr = "localhost"
		c.NATS.URL = "nats-1:4222"
		c.NATS.Replicas = 6
		c.Log.Level = "loud"
		c.Sim.Speed = 0
		c.Scheduler.Workers = 0
		want := []string{"http_addr", "nats.url", "nats.replicas", "log.level", "sim.speed", "scheduler.workers"}
		got := problems(c.Validate())
		if len(got) != len(want) {
			t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
		}
		for _, field := range want {
			if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, field+": ") }) {
				t.Errorf("no problem names %s:\n%s", field, strings.Join(got, "\n"))
			}
		}
	})
}

// exampleProviders reads the commented AWS and Azure examples of the
// example config: what operators copy must load and validate.
func exampleProviders(t *testing.T) ProvidersConfig {
	t.Helper()
	b, err := os.ReadFile(configExample)
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	in := false
	for line := range strings.Lines(string(b)) {
		switch trimmed := strings.TrimSpace(line); {
		case trimmed == "# AWS, for example:" || trimmed == "# Azure, for example:":
			in = true
		case in && strings.HasPrefix(trimmed, "#"):
			body = append(body, strings.TrimPrefix(strings.TrimPrefix(line, "  #"), " "))
		default:
			in = false
		}
	}
	var p ProvidersConfig
	c := Defaults()
	path := writeConfig(t, "providers:\n"+strings.Join(body, ""))
	if err := c.LoadFile(path); err != nil {
		t.Fatalf("the providers examples in %s do not load: %v\n%s", configExample, err, strings.Join(body, ""))
	}
	p = c.Providers
	if p.AWS == nil || p.Azure == nil {
		t.Fatalf("the example config lacks an AWS or Azure example")
	}
	for name, err := range map[string]error{"aws": p.AWS.Validate(), "azure": p.Azure.Validate()} {
		if err != nil {
			t.Errorf("the %s example does not validate:\n%v", name, err)
		}
	}
	return p
}

// The jobs stream keeps histories a day longer than retention keeps
// finished jobs (never under its default), and without an age limit when
// retention keeps them whatever their age.
func TestJobsStreamAgeFollowsRetention(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		finished job.Duration
		want     time.Duration
	}{
		{job.Duration(30 * day), 31 * day},
		{job.Duration(90 * day), 91 * day},
		{job.Duration(7 * day), events.DefaultJobsMaxAge},
		{0, -1},
	} {
		if got := jobsStreamAge(RetentionConfig{FinishedMaxAge: tc.finished}); got != tc.want {
			t.Errorf("finished_max_age %v: the jobs stream keeps %v, want %v", tc.finished, got, tc.want)
		}
	}
}
