package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/aws"
	"github.com/spotwise/spotwise/providers/azure"
	"github.com/spotwise/spotwise/providers/catalog"
)

// ReservationConfig is reserved capacity the platform holds: a
// reservation (AWS On-Demand Capacity Reservation, Azure reservation) or
// a capacity block (AWS Capacity Block for ML: a short term bought ahead).
// Its instances are sold as reserved offers, used before spot and
// on-demand, and its hours are paid whether used or not. Reservations of
// a simulated provider are sold by the simulated cloud; those of a real
// cloud are the cloud's own (an AWS reservation's id is its "cr-..." ID,
// which launches target; an Azure reservation is 1y or 3y of a VM size).
type ReservationConfig struct {
	ID string `json:"id"`
	// Kind is reservation (default) or capacity-block.
	Kind         string `json:"kind"`
	Provider     string `json:"provider"`
	Region       string `json:"region"`
	Zone         string `json:"zone"`
	InstanceType string `json:"instance_type"`
	Count        int    `json:"count"`
	// Start and End are RFC 3339 times; Term (1y, 3y, or a duration such
	// as 7d or 48h) gives the end instead.
	Start configText `json:"start"`
	End   configText `json:"end"`
	Term  configText `json:"term"`
	// PricePerHour is what one instance-hour of the term costs, as an
	// exact decimal ("21.96").
	PricePerHour configText `json:"price_per_hour"`
}

// configText is a configuration value read as it is written, whether
// YAML makes it a string or a number, and parsed later with an error
// naming its field (an amount never goes through a float).
type configText string

func (t *configText) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = configText(s)
		return nil
	}
	if string(b) == "null" {
		*t = ""
		return nil
	}
	// Anything else is kept as written: parsing it names the field.
	*t = configText(b)
	return nil
}

// reservationKinds are the values of kind.
var reservationKinds = []string{"reservation", "capacity-block"}

// parse reads one reservation; the errors name its fields under f.
func (rc ReservationConfig) parse(f string, cat *catalog.Catalog) (providers.Reservation, []error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", f, field, fmt.Sprintf(format, args...)))
	}
	r := providers.Reservation{ID: rc.ID, Provider: rc.Provider, Region: rc.Region, Zone: rc.Zone, InstanceType: rc.InstanceType,
		Count: rc.Count, CapacityBlock: rc.Kind == "capacity-block"}
	if rc.Kind != "" && !slices.Contains(reservationKinds, rc.Kind) {
		bad("kind", "%q: want reservation or capacity-block", rc.Kind)
	}
	if rc.Start == "" {
		bad("start", "is required (RFC 3339, such as 2026-12-01T00:00:00Z)")
	} else if t, err := time.Parse(time.RFC3339, string(rc.Start)); err != nil {
		bad("start", "%q is not an RFC 3339 time (such as 2026-12-01T00:00:00Z)", rc.Start)
	} else {
		r.Start = t
	}
	switch {
	case (rc.End == "") == (rc.Term == ""):
		bad("end", "give either end (an RFC 3339 time) or term (1y, 3y, or a duration such as 7d)")
	case rc.End != "":
		if t, err := time.Parse(time.RFC3339, string(rc.End)); err != nil {
			bad("end", "%q is not an RFC 3339 time", rc.End)
		} else {
			r.End = t
		}
	default:
		if d, err := termLength(string(rc.Term)); err != nil {
			bad("term", "%v", err)
		} else if !r.Start.IsZero() {
			r.End = r.Start.Add(d)
		}
	}
	if rc.PricePerHour == "" {
		bad("price_per_hour", "is required: what one instance-hour of the term costs (\"21.96\")")
	} else if p, err := money.Parse(string(rc.PricePerHour)); err != nil {
		bad("price_per_hour", "%v", err)
	} else {
		r.Price = p
	}
	if len(errs) == 0 {
		for _, line := range problemLines(r.Validate()) {
			errs = append(errs, errors.New(f+"."+line))
		}
	}
	if rc.Provider == "" || rc.Region == "" {
		return r, errs
	}
	if !cat.KnownProvider(rc.Provider) {
		bad("provider", "%q is not a known provider (%s)", rc.Provider, strings.Join(cat.Providers(), ", "))
		return r, errs
	}
	reg, ok := cat.Region(rc.Provider, rc.Region)
	if !ok {
		bad("region", "%q is not a %s region", rc.Region, rc.Provider)
		return r, errs
	}
	if rc.Zone != "" && !slices.Contains(reg.Zones, rc.Zone) {
		bad("zone", "%q is not a zone of %s (%s)", rc.Zone, rc.Region, strings.Join(reg.Zones, ", "))
	}
	return r, errs
}

// termLength reads a term: 1y or 3y, or a duration (7d, 48h).
func termLength(s string) (time.Duration, error) {
	if t, err := providers.ParseTerm(s); err == nil {
		return t.Duration(), nil
	}
	d, err := job.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want 1y, 3y or a duration such as 7d", s)
	}
	return d, nil
}

// reservations reads the configured reservations, checking each against
// the catalog and the cloud that sells it.
func (c *Config) reservations() ([]providers.Reservation, error) {
	cat := catalog.Default()
	var errs []error
	out := make([]providers.Reservation, 0, len(c.Reservations))
	simulated := simulatedProviders(cat, *c)
	for i, rc := range c.Reservations {
		f := fmt.Sprintf("reservations[%d]", i)
		r, problems := rc.parse(f, cat)
		errs = append(errs, problems...)
		bad := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s.%s: %s", f, field, fmt.Sprintf(format, args...)))
		}
		if rc.ID != "" && slices.ContainsFunc(c.Reservations[:i], func(o ReservationConfig) bool { return o.ID == rc.ID }) {
			bad("id", "%q is used twice", rc.ID)
		}
		switch p := rc.Provider; {
		case p == "":
		case p == aws.ProviderName && c.Providers.AWS != nil:
			if !strings.HasPrefix(rc.ID, "cr-") {
				bad("id", "%q: an AWS reservation's id is its capacity reservation ID (cr-...), which launches target", rc.ID)
			}
			if !slices.ContainsFunc(c.Providers.AWS.Regions, func(r aws.RegionConfig) bool { return r.Name == rc.Region }) {
				bad("region", "%q is not one of providers.aws.regions", rc.Region)
			}
		case p == azure.Name && c.Providers.Azure != nil:
			if _, err := providers.ParseTerm(string(rc.Term)); err != nil {
				bad("term", "an Azure reservation is bought for 1y or 3y: give term: 1y or 3y")
			}
			if !slices.Contains(c.Providers.Azure.Regions, rc.Region) {
				bad("region", "%q is not one of providers.azure.regions", rc.Region)
			}
			if !slices.Contains(c.Providers.Azure.VMSizes, rc.InstanceType) {
				bad("instance_type", "%q is not one of providers.azure.vm_sizes", rc.InstanceType)
			}
		case c.Sim.Enabled && slices.Contains(simulated, p):
			if len(c.Sim.Regions) > 0 && !slices.Contains(c.Sim.Regions, rc.Region) {
				bad("region", "%q is not one of sim.regions", rc.Region)
			}
			if it, ok := cat.InstanceType(p, rc.InstanceType); !ok {
				bad("instance_type", "%q is not a %s instance type of the catalog", rc.InstanceType, p)
			} else if !slices.ContainsFunc(it.Prices, func(pr catalog.Price) bool { return pr.Region == rc.Region }) {
				bad("instance_type", "%s is not sold in %s", rc.InstanceType, rc.Region)
			}
		default:
			bad("provider", "%q is sold by no configured cloud (configure providers.%s, or keep it in the simulated cloud)", p, p)
		}
		out = append(out, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// reservationsBy splits the reservations by the cloud that sells them:
// the simulated cloud's, the AWS capacity reservations (ID and hourly
// price), the Azure reservations.
func (c *Config) reservationsBy(rs []providers.Reservation) (simulated []providers.Reservation, awsRes []providers.Reservation, az []azure.Reservation) {
	for i, r := range rs {
		switch {
		case r.Provider == aws.ProviderName && c.Providers.AWS != nil:
			awsRes = append(awsRes, r)
		case r.Provider == azure.Name && c.Providers.Azure != nil:
			t, _ := providers.ParseTerm(string(c.Reservations[i].Term))
			az = append(az, azure.Reservation{Region: r.Region, VMSize: r.InstanceType, Term: string(t), Count: r.Count})
		default:
			simulated = append(simulated, r)
		}
	}
	return simulated, awsRes, az
}

// withReservations is the AWS and Azure configuration with the
// reservations of the server's configuration added to their own: an AWS
// reservation's instances bill its configured hourly price.
func (p ProvidersConfig) withReservations(awsRes []providers.Reservation, az []azure.Reservation) ProvidersConfig {
	if p.AWS != nil && len(awsRes) > 0 {
		c := *p.AWS
		c.Reservations.IDs = slices.Clone(c.Reservations.IDs)
		c.Reservations.Prices = maps.Clone(c.Reservations.Prices)
		if c.Reservations.Prices == nil {
			c.Reservations.Prices = map[string]money.Micros{}
		}
		for _, r := range awsRes {
			if !slices.Contains(c.Reservations.IDs, r.ID) {
				c.Reservations.IDs = append(c.Reservations.IDs, r.ID)
			}
			c.Reservations.Prices[r.ID] = r.Price
		}
		p.AWS = &c
	}
	if p.Azure != nil && len(az) > 0 {
		c := *p.Azure
		c.Reservations = append(slices.Clone(c.Reservations), az...)
		p.Azure = &c
	}
	return p
}

// reservationsHTTP is GET /v1/reservations: every configured reservation
// with how many of its slots are in use and what its term has cost so far,
// used and idle (?spans=true adds the idle spans). It is served by the
// server that runs the clouds.
func (s *Server) reservationsHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fail := func(status int, code, msg string) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	spans := false
	if v := r.URL.Query().Get("spans"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			fail(http.StatusBadRequest, "invalid_request", fmt.Sprintf("spans=%q: want true or false", v))
			return
		}
		spans = b
	}
	t := s.term.Load()
	if t == nil {
		fail(http.StatusServiceUnavailable, "standby", "this server is on standby; the server holding the scheduler lease runs the clouds")
		return
	}
	rs, err := s.cfg.reservations()
	if err != nil {
		fail(http.StatusInternalServerError, "internal", err.Error())
		return
	}
	now := s.clock.Now()
	simulated, _, _ := s.cfg.reservationsBy(rs)
	held := map[string]reservationUse{}
	if t.clouds.sim != nil && len(simulated) > 0 {
		st, err := t.clouds.sim.Reservations(r.Context())
		if err != nil {
			fail(http.StatusServiceUnavailable, "unavailable", "sim: "+err.Error())
			return
		}
		for _, x := range st {
			held[x.Reservation.ID] = reservationUse{r: x.Reservation, inUse: x.InUse, uses: x.Uses}
		}
	}
	if len(held) < len(rs) {
		if err := s.realReservationUses(r, t.clouds, rs, held); err != nil {
			fail(http.StatusServiceUnavailable, "unavailable", err.Error())
			return
		}
	}
	views := make([]api.ReservationView, 0, len(rs))
	for _, res := range rs {
		h, ok := held[res.ID]
		if !ok {
			h.r = res
		}
		views = append(views, api.ReservationViewOf(h.r, h.inUse, h.r.Usage(h.uses, now), spans))
	}
	slices.SortFunc(views, func(a, b api.ReservationView) int {
		return providers.CompareReservations(providers.Reservation{ID: a.ID, Provider: a.Provider, Region: a.Region, Zone: a.Zone, InstanceType: a.InstanceType},
			providers.Reservation{ID: b.ID, Provider: b.Provider, Region: b.Region, Zone: b.Zone, InstanceType: b.InstanceType})
	})
	_ = json.NewEncoder(w).Encode(api.NewReservationList(now, views))
}

// reservationUse is a reservation with the instances that used it.
type reservationUse struct {
	r     providers.Reservation
	inUse int
	uses  []providers.ReservationUse
}

// realReservationUses finds, in the real clouds' instance listings, the
// instances on the reservations that the simulated cloud does not hold:
// those naming the reservation, else reserved instances of its shape (the
// first reservation of the shape with a slot free takes them).
func (s *Server) realReservationUses(r *http.Request, clouds *cloudSet, rs []providers.Reservation, held map[string]reservationUse) error {
	for _, p := range clouds.distinct {
		if p == providers.Provider(clouds.sim) && clouds.sim != nil {
			continue
		}
		insts, err := p.Instances(r.Context())
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		for _, in := range insts {
			if in.Purchase != providers.Reserved {
				continue
			}
			k := slices.IndexFunc(rs, func(x providers.Reservation) bool { return x.ID == in.Reservation })
			if k < 0 {
				k = slices.IndexFunc(rs, func(x providers.Reservation) bool {
					h := held[x.ID]
					return x.Provider == in.Provider && x.Region == in.Region && x.InstanceType == in.InstanceType &&
						(x.Zone == "" || x.Zone == in.Zone) && (in.State.Ended() || h.inUse < x.Count)
				})
			}
			if k < 0 {
				continue
			}
			h := held[rs[k].ID]
			h.r = rs[k]
			if !in.State.Ended() {
				h.inUse++
			}
			h.uses = append(h.uses, providers.ReservationUse{Instance: in.ID, From: in.LaunchedAt, To: in.EndedAt})
			held[rs[k].ID] = h
		}
	}
	return nil
}
