package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws"
	"github.com/spotwise/spotwise/providers/aws/awsfake"
)

// loadReservations loads a config file of the given reservations list
// (YAML) over the defaults.
func loadReservations(t *testing.T, list string) (Config, error) {
	t.Helper()
	c := Defaults()
	if err := c.LoadFile(writeConfig(t, "reservations:\n"+list)); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// The example's commented reservation loads and validates, unquoted
// times and price included, the price exact.
func TestReservationConfigExample(t *testing.T) {
	b, err := os.ReadFile(configExample)
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	in := false
	for line := range strings.Lines(string(b)) {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "#   - id:"):
			in = true
		case !strings.HasPrefix(trimmed, "#"):
			in = false
		}
		if in {
			body = append(body, "  "+strings.TrimPrefix(trimmed, "# ")+"\n")
		}
	}
	c, err := loadReservations(t, strings.Join(body, ""))
	if err != nil {
		t.Fatalf("the reservations example does not load:\n%v\n%s", err, strings.Join(body, ""))
	}
	rs, err := c.reservations()
	if err != nil || len(rs) != 1 {
		t.Fatalf("reservations = %+v, %v", rs, err)
	}
	r := rs[0]
	if r.ID != "cb-train-1" || !r.CapacityBlock || r.Count != 2 || r.Price != money.MustParse("31.464") ||
		r.End.Sub(r.Start) != 7*24*time.Hour || r.Zone != "us-east-1a" {
		t.Fatalf("example reservation = %+v", r)
	}
}

func TestReservationConfigErrorsNameTheField(t *testing.T) {
	const ok = "  - {id: r1, provider: aws, region: us-east-1, instance_type: g4dn.xlarge, count: 2, start: 2026-12-01T00:00:00Z, term: 1y, price_per_hour: 0.316}\n"
	if c, err := loadReservations(t, ok); err != nil {
		t.Fatalf("a valid reservation is refused: %v", err)
	} else if rs, _ := c.reservations(); rs[0].Price != money.MustParse("0.316") || rs[0].End.Sub(rs[0].Start) != 8760*time.Hour {
		t.Fatalf("parsed %+v, want 0.316/h for 8760 h", rs[0])
	}
	edit := func(from, to string) string { return strings.Replace(ok, from, to, 1) }
	for _, tt := range []struct {
		name, list, field string
	}{
		{"no id", edit("id: r1, ", ""), "reservations[0].id"},
		{"id twice", ok + ok, "reservations[1].id"},
		{"unknown kind", edit("id: r1,", "id: r1, kind: block,"), "reservations[0].kind"},
		{"count 0", edit("count: 2", "count: 0"), "reservations[0].count"},
		{"no start", edit("start: 2026-12-01T00:00:00Z, ", ""), "reservations[0].start"},
		{"garbled start", edit("2026-12-01T00:00:00Z", "yesterday"), "reservations[0].start"},
		{"end and term", edit("term: 1y", "term: 1y, end: 2026-12-08T00:00:00Z"), "reservations[0].end"},
		{"neither end nor term", edit("term: 1y, ", ""), "reservations[0].end"},
		{"end before start", edit("term: 1y", "end: 2026-11-30T00:00:00Z"), "reservations[0].end"},
		{"bad term", edit("term: 1y", "term: 2 fortnights"), "reservations[0].term"},
		{"no price", edit(", price_per_hour: 0.316", ""), "reservations[0].price_per_hour"},
		{"price with too many decimals", edit("0.316", "0.3161234"), "reservations[0].price_per_hour"},
		{"garbled price", edit("0.316", "cheap"), "reservations[0].price_per_hour"},
		{"price as a list", edit("0.316", "[1, 2]"), "reservations[0].price_per_hour"},
		{"start as a number", edit("2026-12-01T00:00:00Z", "20261201"), "reservations[0].start"},
		{"free", edit("0.316", "0"), "reservations[0].price_per_hour"},
		{"unknown provider", edit("provider: aws", "provider: oracle"), "reservations[0].provider"},
		{"not a region of the provider", edit("us-east-1", "westeurope"), "reservations[0].region"},
		{"not a zone of the region", edit("region: us-east-1", "region: us-east-1, zone: us-west-2a"), "reservations[0].zone"},
		{"not in the catalog", edit("g4dn.xlarge", "g9.huge"), "reservations[0].instance_type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadReservations(t, tt.list)
			if err == nil || !slices.ContainsFunc(problems(err), func(p string) bool { return strings.HasPrefix(p, tt.field+": ") }) {
				t.Fatalf("got %v, want a problem naming %s", err, tt.field)
			}
		})
	}
}

// Reservations of the real clouds go to them, the rest to the simulated
// cloud; what the real clouds demand of them is checked up front.
func TestReservationsGoToTheCloudThatSellsThem(t *testing.T) {
	examples := exampleProviders(t)
	c := Defaults()
	c.Sim.Speed = 1
	c.Providers = examples
	base := ReservationConfig{Count: 2, Start: "2026-12-01T00:00:00Z", Term: "1y", PricePerHour: "1.5"}
	with := func(id, provider, region, itype string) ReservationConfig {
		r := base
		r.ID, r.Provider, r.Region, r.InstanceType = id, provider, region, itype
		return r
	}
	c.Reservations = []ReservationConfig{
		with("cr-0123456789abcdef0", "aws", "us-east-1", "p4d.24xlarge"),
		with("ri-eastus", "azure", "eastus", "Standard_NC24ads_A100_v4"),
		with("gcp-a100", "gcp", "us-central1", "a2-highgpu-1g"),
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	rs, err := c.reservations()
	if err != nil {
		t.Fatal(err)
	}
	simulated, awsRes, az := c.reservationsBy(rs)
	if len(simulated) != 1 || simulated[0].ID != "gcp-a100" || len(awsRes) != 1 || awsRes[0].ID != "cr-0123456789abcdef0" ||
		len(az) != 1 || az[0].VMSize != "Standard_NC24ads_A100_v4" || az[0].Term != "1y" || az[0].Count != 2 {
		t.Fatalf("sim %+v, aws %v, azure %+v", simulated, awsRes, az)
	}
	p := c.Providers.withReservations(awsRes, az)
	if !slices.Contains(p.AWS.Reservations.IDs, "cr-0123456789abcdef0") || len(p.Azure.Reservations) != len(examples.Azure.Reservations)+1 {
		t.Fatalf("providers got %v and %+v", p.AWS.Reservations.IDs, p.Azure.Reservations)
	}
	// Its instances bill the configured price (AWS sells the offer at zero).
	if got := p.AWS.Reservations.Prices["cr-0123456789abcdef0"]; got != money.MustParse("1.5") {
		t.Errorf("the AWS reservation's instances bill %s, want 1.5", got)
	}
	if slices.Contains(examples.AWS.Reservations.IDs, "cr-0123456789abcdef0") && len(examples.AWS.Reservations.IDs) == 1 {
		// The example names that ID itself: nothing to add, nothing twice.
		if len(p.AWS.Reservations.IDs) != 1 {
			t.Fatalf("an ID listed twice: %v", p.AWS.Reservations.IDs)
		}
	}
	for _, tt := range []struct {
		name  string
		r     ReservationConfig
		field string
	}{
		{"an AWS reservation is a cr- ID", with("my-block", "aws", "us-east-1", "p4d.24xlarge"), "reservations[3].id"},
		{"in a configured AWS region", with("cr-0123456789abcdef1", "aws", "us-west-2", "p4d.24xlarge"), "reservations[3].region"},
		{"an Azure reservation is 1y or 3y", func() ReservationConfig {
			r := with("ri-short", "azure", "eastus", "Standard_NC24ads_A100_v4")
			r.Term, r.End = "", "2026-12-08T00:00:00Z"
			return r
		}(), "reservations[3].term"},
		{"of a configured VM size", with("ri-other", "azure", "eastus", "Standard_NC4as_T4_v3"), "reservations[3].instance_type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := c
			bad.Reservations = append(slices.Clone(c.Reservations), tt.r)
			err := bad.Validate()
			if err == nil || !slices.ContainsFunc(problems(err), func(p string) bool { return strings.HasPrefix(p, tt.field+": ") }) {
				t.Fatalf("got %v, want a problem naming %s", err, tt.field)
			}
		})
	}
	noSim := Defaults()
	noSim.Sim.Providers = []string{"azure"}
	noSim.Reservations = []ReservationConfig{with("gcp-a100", "gcp", "us-central1", "a2-highgpu-1g")}
	if err := noSim.Validate(); err == nil || !strings.Contains(err.Error(), "reservations[0].provider: ") {
		t.Fatalf("a reservation no cloud sells: %v", err)
	}
}

// GET /v1/reservations: platform readers see the reservation, its slots
// in use once a job lands on it, and its cost so far split into used and
// idle; team tokens do not.
func TestReservationsHTTP(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Sim.Speed = 60 // a 100-hour job stays running for the test
	start := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	cfg.Reservations = []ReservationConfig{{ID: "r-t4", Provider: "aws", Region: "us-east-1", InstanceType: "g4dn.xlarge", Count: 2,
		Start: configText(start.Format(time.RFC3339)), Term: "30d", PricePerHour: "0.30"}}
	s := startServer(t, cfg)
	call := apiCall{t: t, s: s, v: apiValidator(t), token: tokenFor(t, s, "", auth.Viewer)}
	get := func(path string) api.ReservationList {
		t.Helper()
		var l api.ReservationList
		if err := json.Unmarshal(call.want(http.StatusOK, http.MethodGet, path, "", nil), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := get("/v1/reservations")
	if len(l.Reservations) != 1 {
		t.Fatalf("reservations = %+v", l)
	}
	r := l.Reservations[0]
	if r.ID != "r-t4" || r.Kind != "reservation" || r.State != "active" || r.Count != 2 || r.InUse != 0 || r.Zone != "us-east-1a" ||
		r.PricePerHour != money.MustParse("0.30") || r.Paid < money.MustParse("0.6") || r.Used != 0 || r.IdleCost != r.Paid || r.Utilization != 0 ||
		l.Paid != r.Paid || l.IdleCost != r.IdleCost {
		t.Fatalf("before any job: %+v", l)
	}

	c := clientOf(s)
	v, _, err := c.Submit(t.Context(), []byte("name: t4\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 100h on T4\n"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	running := waitState(t, c, v.ID, job.Running, 30*time.Second)
	if p := running.Placement; p == nil || p.Purchase != string(providers.Reserved) {
		t.Fatalf("the job runs on %+v, want the reservation", running.Placement)
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		r = get("/v1/reservations?spans=true").Reservations[0]
		if r.InUse != 1 || r.Used <= 0 || r.Used+r.IdleCost != r.Paid || !(r.Utilization > 0 && r.Utilization < 0.5) || len(r.IdleSpans) == 0 {
			return fmt.Errorf("with the job on it: %+v", r)
		}
		return nil
	})
	var sum money.Micros
	for _, sp := range r.IdleSpans {
		sum += sp.Cost
	}
	if sum != r.IdleCost || !r.IdleSpans[0].From.Equal(start) || r.IdleSpans[0].Slots != 2 {
		t.Fatalf("idle spans %+v add up to %s, idle cost %s; want them from the start, both slots first", r.IdleSpans, sum, r.IdleCost)
	}

	// The market lists the reserved offer, with its term's end.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var m api.Market
		if err := json.Unmarshal(call.want(http.StatusOK, http.MethodGet, "/v1/market?purchase=reserved", "", nil), &m); err != nil {
			return err
		}
		if len(m.Offers) != 1 || m.Offers[0].InstanceType != "g4dn.xlarge" || m.Offers[0].Price != 0 || !m.Offers[0].Until.Equal(start.Add(30*24*time.Hour)) {
			return fmt.Errorf("reserved offers on the market: %+v", m.Offers)
		}
		return nil
	})
	call.want(http.StatusBadRequest, http.MethodGet, "/v1/reservations?spans=maybe", "", nil)
	call.as(tokenFor(t, s, v.Team, auth.Admin)).want(http.StatusForbidden, http.MethodGet, "/v1/reservations", "", nil)
	call.as("").want(http.StatusUnauthorized, http.MethodGet, "/v1/reservations", "", nil)
	l2, err := c.Reservations(t.Context(), false)
	if err != nil || len(l2.Reservations) != 1 || l2.Reservations[0].IdleSpans != nil {
		t.Fatalf("the client reads %+v, %v", l2, err)
	}
}

// The dry run lists the reserved offers and plans a waiting job onto
// one: reserved capacity is used first.
func TestDryRunListsReservedOffersAndUsesThem(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Sim.Regions = []string{"us-east-1"}
	cfg.Reservations = []ReservationConfig{{ID: "cb-1", Kind: "capacity-block", Provider: "aws", Region: "us-east-1", Zone: "us-east-1b",
		InstanceType: "g4dn.xlarge", Count: 3, Start: configText(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)), Term: "7d", PricePerHour: "0.35"}}
	bus := eventstest.OpenBus(t, dir, "", nil)
	svc := api.NewService(bus, nil, clock.Real{}, nil)
	spec := []byte("name: t4\nteam: ml\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [T4]}\nwork: 2h on T4\n")
	if _, err := svc.Submit(asOperator(t.Context()), spec, "", "test"); err != nil {
		t.Fatal(err)
	}
	bus.Close()
	var out strings.Builder
	if err := DryRun(t.Context(), cfg, &out, eventstest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		`Reserved capacity`,
		`aws/us-east-1/us-east-1b/g4dn\.xlarge/reserved +1 x T4 +3 +\d{4}-`, // its 3 slots free, until the end
		`1 x aws/us-east-1b g4dn\.xlarge +reserved`,                         // the plan
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("dry run output lacks %s:\n%s", want, text)
		}
	}
}

// An AWS capacity reservation named in the server's reservations is sold
// by the AWS provider, and a job placed on it launches into it: RunInstances
// targets the reservation's ID (the local fake EC2 records it).
func TestAWSReservationOfTheConfigIsLaunchedInto(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none,
		"AWS_PROFILE": "",
	} {
		t.Setenv(k, v)
	}
	cloud := awsfake.Start()
	t.Cleanup(cloud.Close)
	cloud.AddInstanceType("us-east-1", "g5.xlarge", "us-east-1a", "us-east-1b")
	cloud.SetOnDemandPrice("us-east-1", "g5.xlarge", "1.006")
	cloud.SetSpotPrice("us-east-1a", "g5.xlarge", "0.3017", time.Now().Add(-time.Hour))
	const id = "cr-0123456789abcdef0"
	cloud.AddReservation(awsfake.Reservation{ID: id, InstanceType: "g5.xlarge", Zone: "us-east-1b", Total: 2, Available: 2})

	cfg := testConfig(t.TempDir())
	cfg.Sim.Enabled, cfg.Sim.Speed = false, 1
	cfg.Providers.AWS = &aws.Config{
		Regions:       []aws.RegionConfig{{Name: "us-east-1", AMI: "ami-0abcdef1234567890"}},
		InstanceTypes: []string{"g5.xlarge"},
		Endpoints:     aws.Endpoints{EC2: cloud.EC2URL(), Pricing: cloud.PricingURL()},
		Agent:         aws.AgentConfig{NATSURL: "nats://10.0.0.4:4222"},
	}
	cfg.Reservations = []ReservationConfig{{ID: id, Provider: "aws", Region: "us-east-1", Zone: "us-east-1b", InstanceType: "g5.xlarge",
		Count: 2, Start: configText(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)), Term: "1y", PricePerHour: "0.62"}}
	s := startServer(t, cfg)
	c := clientOf(s)
	v, _, err := c.Submit(t.Context(), []byte("name: t\ncommand: [x]\nresources: {gpus_per_node: 1, accelerators: [A10G]}\nwork: 3h on A10G\n"), "application/yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		ls := cloud.Launches()
		if len(ls) == 0 {
			return errors.New("nothing launched yet")
		}
		if l := ls[0]; l.Action != "RunInstances" || l.Reservation != id || l.Zone != "us-east-1b" || l.Tags["spotwise:job"] != v.ID {
			return fmt.Errorf("launch %+v, want RunInstances into %s", l, id)
		}
		return nil
	})
	got, err := c.Get(t.Context(), v.ID)
	if err != nil || got.Placement == nil || got.Placement.Purchase != string(providers.Reserved) {
		t.Fatalf("placement %+v, %v: want the reservation", got.Placement, err)
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		l, err := c.Reservations(t.Context(), false)
		if err != nil {
			return err
		}
		if r := l.Reservations[0]; r.ID != id || r.InUse != 1 || r.Count != 2 {
			return fmt.Errorf("reservations = %+v", l.Reservations)
		}
		return nil
	})
}

// The example server configuration of reserved capacity loads and
// validates.
func TestReservationsServerExample(t *testing.T) {
	c := Defaults()
	if err := c.LoadFile(filepath.Join("..", "..", "examples", "reservations", "server.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	rs, err := c.reservations()
	if err != nil || len(rs) != 2 || rs[0].Count != 4 || rs[0].End.Sub(rs[0].Start) != 3*8760*time.Hour {
		t.Fatalf("reservations = %+v, %v", rs, err)
	}
}
