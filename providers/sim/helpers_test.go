package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers"
	"github.com/spotwise/spotwise/providers/catalog"
)

// t0 is where the fake clocks start: on a price-step boundary, so that
// advancing by PriceInterval moves exactly one step.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// Offer IDs of the test catalog.
var (
	awsBigOD   = providers.OfferID("aws", "us-east-1", "us-east-1a", "p4de.24xlarge", providers.OnDemand)
	awsBigSpot = providers.OfferID("aws", "us-east-1", "us-east-1a", "p4de.24xlarge", providers.Spot)
	awsSmallOD = providers.OfferID("aws", "us-east-1", "us-east-1b", "g5.xlarge", providers.OnDemand)
	awsSmallSp = providers.OfferID("aws", "us-east-1", "us-east-1b", "g5.xlarge", providers.Spot)
	gcpOD      = providers.OfferID("gcp", "us-central1", "us-central1-c", "a2-ultragpu-1g", providers.OnDemand)
)

// testCatalog is a small catalog: 3 instance types over 3 regions with 6
// zones between them, so 16 offers.
func testCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	tp := catalog.Throughput{TrainMixed: 1, TrainFP32: 1, Inference: 1}
	gpus := []catalog.GPU{
		{Name: "A100-80GB", Family: "A100", Vendor: "nvidia", MemoryGB: 80, Throughput: tp},
		{Name: "A10G", Family: "A10G", Vendor: "nvidia", MemoryGB: 24, Throughput: tp},
	}
	regions := []catalog.Region{
		{Provider: "aws", Name: "us-east-1", Geography: "us", Zones: []string{"us-east-1a", "us-east-1b"}},
		{Provider: "aws", Name: "eu-west-1", Geography: "eu", Zones: []string{"eu-west-1a"}},
		{Provider: "gcp", Name: "us-central1", Geography: "us", Zones: []string{"us-central1-a", "us-central1-b", "us-central1-c"}},
	}
	types := []catalog.InstanceType{
		{Provider: "aws", Name: "p4de.24xlarge", GPU: "A100-80GB", GPUs: 8, VCPUs: 96, MemoryGiB: 1152, Prices: []catalog.Price{
			{Region: "us-east-1", OnDemand: money.MustParse("40.966")},
			{Region: "eu-west-1", OnDemand: money.MustParse("45.0")},
		}},
		{Provider: "aws", Name: "g5.xlarge", GPU: "A10G", GPUs: 1, VCPUs: 4, MemoryGiB: 16, Prices: []catalog.Price{
			{Region: "us-east-1", OnDemand: money.MustParse("1.006"), Spot: money.MustParse("0.45")},
		}},
		{Provider: "gcp", Name: "a2-ultragpu-1g", GPU: "A100-80GB", GPUs: 1, VCPUs: 12, MemoryGiB: 170, Prices: []catalog.Price{
			{Region: "us-central1", OnDemand: money.MustParse("5.0688")},
		}},
	}
	c, err := catalog.New(gpus, regions, types, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// memStore is an in-memory Store with the NATS KV bucket's semantics that
// matter here, and a switch to make writes fail.
type memStore struct {
	mu       sync.Mutex
	data     map[string][]byte
	rev      uint64
	failPuts bool
	// gate, when set, holds every Put until it is closed; held counts
	// the Puts it holds.
	gate chan struct{}
	held int
}

// holdPuts makes Puts wait until the returned func is called (or the
// test ends: a test that fails while writes are held lets them go before
// the cloud's Close waits for them).
func (s *memStore) holdPuts(t *testing.T) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gate := make(chan struct{})
	s.gate = gate
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.mu.Lock()
			if s.gate == gate {
				s.gate = nil
			}
			s.mu.Unlock()
			close(gate)
		})
	}
	t.Cleanup(release)
	return release
}

// heldPuts is how many Puts wait for the gate.
func (s *memStore) heldPuts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

var errNotFound = errors.New("not found")

func newMemStore() *memStore { return &memStore{data: map[string][]byte{}} }

func (s *memStore) Get(_ context.Context, key string) ([]byte, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.data[key]
	if !ok {
		return nil, 0, fmt.Errorf("%s: %w", key, errNotFound)
	}
	return slices.Clone(v), s.rev, nil
}

func (s *memStore) Put(_ context.Context, key string, value []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gate := s.gate; gate != nil {
		s.held++
		s.mu.Unlock()
		<-gate
		s.mu.Lock()
		s.held--
	}
	if s.failPuts {
		return 0, errors.New("store unavailable")
	}
	s.rev++
	s.data[key] = slices.Clone(value)
	return s.rev, nil
}

func (s *memStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.data, key)
	return nil
}

func (s *memStore) Keys(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, nil
}

func (s *memStore) setFailPuts(v bool) {
	s.mu.Lock()
	s.failPuts = v
	s.mu.Unlock()
}

// fakeRunner records which instances it runs.
type fakeRunner struct {
	mu      sync.Mutex
	starts  map[string]int // instance ID -> Start calls
	stops   map[string]int // instance ID -> stop calls
	running map[string]bool
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{starts: map[string]int{}, stops: map[string]int{}, running: map[string]bool{}}
}

func (r *fakeRunner) Start(inst providers.Instance, _ providers.Workload) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if inst.State != providers.InstanceRunning {
		panic("runner started on a " + string(inst.State) + " instance")
	}
	r.starts[inst.ID]++
	r.running[inst.ID] = true
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.stops[inst.ID]++
		r.running[inst.ID] = false
	}
}

func (r *fakeRunner) counts(id string) (starts, stops int, running bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts[id], r.stops[id], r.running[id]
}

// total is how many Start calls the runner saw.
func (r *fakeRunner) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.starts {
		n += s
	}
	return n
}

// wait waits until the runner saw the given numbers of starts and
// stops of an instance.
func (r *fakeRunner) wait(t testing.TB, id string, starts, stops int) {
	t.Helper()
	testutil.CheckFor(t, 2*time.Second, time.Millisecond, func() error {
		if s, p, _ := r.counts(id); s != starts || p != stops {
			return fmt.Errorf("runner of %s: %d starts, %d stops; want %d, %d", id, s, p, starts, stops)
		}
		return nil
	})
}

// env is one simulated cloud under test with its fakes.
type env struct {
	t      *testing.T
	clk    *clock.Fake
	store  *memStore
	runner *fakeRunner
	cloud  *Cloud
	opts   Options
}

// newEnv starts a cloud over the test catalog; edit adjusts its options.
func newEnv(t *testing.T, edit ...func(*Options)) *env {
	t.Helper()
	e := &env{t: t, clk: clock.NewFake(t0), store: newMemStore(), runner: newFakeRunner()}
	e.opts = Options{Catalog: testCatalog(t), Clock: e.clk, Seed: 42, Store: e.store, Runner: e.runner,
		Log: zaptest.NewLogger(t)}
	for _, f := range edit {
		f(&e.opts)
	}
	e.cloud = e.start()
	return e
}

// start builds a cloud with the env's options (a restart when one ran).
func (e *env) start() *Cloud {
	e.t.Helper()
	c, err := New(context.Background(), e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

func (e *env) offer(id string) providers.Offer {
	e.t.Helper()
	return offerOf(e.t, e.cloud, id)
}

func offerOf(t testing.TB, c *Cloud, id string) providers.Offer {
	t.Helper()
	offers, err := c.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offers {
		if o.ID() == id {
			return o
		}
	}
	t.Fatalf("no offer %s", id)
	return providers.Offer{}
}

func (e *env) setAvailable(id string, n int) {
	e.t.Helper()
	if err := e.cloud.SetAvailable(id, n); err != nil {
		e.t.Fatal(err)
	}
}

// launch launches count instances of an offer under key and fails the test
// on error.
func (e *env) launch(offerID, key string, count int) []providers.Instance {
	e.t.Helper()
	insts, err := e.cloud.Launch(context.Background(), e.request(offerID, key, count))
	if err != nil {
		e.t.Fatalf("launch %s: %v", key, err)
	}
	return insts
}

func (e *env) request(offerID, key string, count int) providers.LaunchRequest {
	return providers.LaunchRequest{
		IdempotencyKey: key, Offer: e.offer(offerID), Count: count,
		JobID: "job-" + key, Attempt: 1, Tags: map[string]string{"spotwise/job": "job-" + key},
		Workload: providers.Workload{Image: "trainer:1", ReferenceGPU: "A100-80GB", ReferenceSeconds: 3600, Class: "train-mixed"},
	}
}

func (e *env) instance(id string) providers.Instance {
	e.t.Helper()
	return instanceOf(e.t, e.cloud, id)
}

func instanceOf(t testing.TB, c *Cloud, id string) providers.Instance {
	t.Helper()
	insts, err := c.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range insts {
		if in.ID == id {
			return in
		}
	}
	t.Fatalf("no instance %s", id)
	return providers.Instance{}
}

// recorder is a Watch sink that keeps what it gets.
type recorder struct {
	mu     sync.Mutex
	events []providers.Event
}

func (r *recorder) sink(e providers.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) all() []providers.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// watch starts a Watch on c into a new recorder and waits until it is
// registered; the returned channel gets Watch's result.
func watch(t testing.TB, c *Cloud) (*recorder, context.CancelFunc, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{}
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx, r.sink) }()
	t.Cleanup(cancel)
	// The initial offers are queued as the watcher registers: once one is
	// in, every later change reaches the recorder.
	r.wait(t, "initial offers", func(e providers.Event) bool { return e.Kind == providers.EventOffers })
	return r, cancel, done
}

// waitEvent waits until the recorder holds an event matching ok and
// returns the first such.
func (r *recorder) wait(t testing.TB, what string, ok func(providers.Event) bool) providers.Event {
	t.Helper()
	var found providers.Event
	testutil.CheckFor(t, 2*time.Second, time.Millisecond, func() error {
		for _, e := range r.all() {
			if ok(e) {
				found = e
				return nil
			}
		}
		return fmt.Errorf("no %s event among %d", what, len(r.all()))
	})
	return found
}

func instanceEvent(kind providers.EventKind, id string) func(providers.Event) bool {
	return func(e providers.Event) bool {
		return e.Kind == kind && e.Instance != nil && e.Instance.ID == id
	}
}

func ids(insts []providers.Instance) []string {
	var out []string
	for _, in := range insts {
		out = append(out, in.ID)
	}
	return out
}
