package events_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/providers"
)

func TestReadingsListWhatConsumersRead(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	nop := func(context.Context, events.Message) error { return nil }
	stopC, err := b.Consume(ctx, events.ConsumerConfig{Stream: events.StreamAgent, Durable: "t-agent", Subjects: []string{events.AllAgentReports}}, nop)
	if err != nil {
		t.Fatal(err)
	}
	stopF, err := b.Follow(ctx, events.StreamPrices, []string{"spotwise.prices.>"}, true, nop)
	if err != nil {
		t.Fatal(err)
	}
	stopS, err := b.Serve("spotwise.test.serve", func(context.Context, []byte) []byte { return nil })
	if err != nil {
		t.Fatal(err)
	}
	stopA, err := b.Answer("spotwise.test.answer", func([]byte) ([]byte, bool) { return nil, false })
	if err != nil {
		t.Fatal(err)
	}
	want := []events.Reading{
		{Kind: "answer", Name: "spotwise.test.answer", Subjects: []string{"spotwise.test.answer"}},
		{Kind: "consume", Name: "t-agent", Stream: events.StreamAgent, Subjects: []string{events.AllAgentReports}},
		{Kind: "follow", Name: events.StreamPrices, Stream: events.StreamPrices, Subjects: []string{"spotwise.prices.>"}},
		{Kind: "serve", Name: "spotwise.test.serve", Subjects: []string{"spotwise.test.serve"}},
	}
	if got := b.Readings(); !slices.EqualFunc(got, want, func(x, y events.Reading) bool {
		return x.Kind == y.Kind && x.Name == y.Name && x.Stream == y.Stream && slices.Equal(x.Subjects, y.Subjects)
	}) {
		t.Fatalf("readings = %+v\nwant %+v", got, want)
	}
	for _, stop := range []func(){stopC, stopF, stopS, stopA} {
		stop()
	}
	if got := b.Readings(); len(got) != 0 {
		t.Fatalf("readings after every stop = %+v", got)
	}
}

func TestEventTypeOnEverySubject(t *testing.T) {
	id := job.NewID(time.Now())
	for subject, want := range map[string]string{
		events.SubjectJobSubmitted:                      events.TypeJobSubmitted,
		events.JobEventsSubject(id):                     events.TypeJobEvent,
		events.PricesSubject("aws", "us-east-1"):        events.TypeOffers,
		events.InstancesSubject("aws", "us-east-1"):     events.TypeInstance,
		events.InterruptionsSubject("aws", "us-east-1"): events.TypeInterruption,
		events.AgentSubject(id, 1):                      events.TypeAgentReport,
		events.AgentControlSubject(id, 1):               events.TypeAgentControl,
		events.AlertsSubject(events.SeverityWarning):    events.TypeAlert,
		events.SubjectSubmit:                            "",
		events.SubjectPendingReasons:                    "",
	} {
		if got, ok := events.EventTypeOn(subject); got != want || ok != (want != "") {
			t.Errorf("EventTypeOn(%s) = %q, %v; want %q", subject, got, ok, want)
		}
	}
}

// A handler that fails on data a redelivery cannot mend (a job record
// that does not decode) drops the message at once: it is not delivered 20
// times, logged 20 times, and given up on minutes later.
func TestHandlerFailingOnGarbledStateDropsAtOnce(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	var calls atomic.Int64
	stop, err := b.Consume(ctx, events.ConsumerConfig{Stream: events.StreamAgent, Durable: "t-garbled-state", Subjects: []string{events.AllAgentReports}},
		func(context.Context, events.Message) error {
			calls.Add(1)
			_, err := events.DecodeRecord([]byte(`{"id": 7}`))
			return fmt.Errorf("reading the job: %w", err)
		})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	id := job.NewID(time.Now())
	if err := b.Publish(ctx, events.AgentSubject(id, 1), &events.AgentReport{JobID: id, Attempt: 1, Kind: events.AgentHeartbeat}); err != nil {
		t.Fatal(err)
	}
	key := events.DropKey{Consumer: "t-garbled-state", Reason: "refused"}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if n := b.Dropped()[key]; n != 1 {
			return fmt.Errorf("dropped %v, want %v once", b.Dropped(), key)
		}
		return nil
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times for a message that cannot succeed", n)
	}
}

// A poison message on the price stream is taken out of it: the next
// follower, rebuilding the book from the last message of each subject,
// does not meet it again.
func TestFollowRemovesPoisonFromTheStream(t *testing.T) {
	ctx := context.Background()
	b := eventstest.NewBus(t, nil)
	subj := events.PricesSubject("aws", "poisoned-1")
	good := &events.OffersUpdated{Provider: "aws", Region: "poisoned-1", Source: "test", Offers: []providers.Offer{}}
	if err := b.Publish(ctx, subj, good); err != nil {
		t.Fatal(err)
	}
	poison := []byte(`{"v":1,"id":"a","type":"agent.report","time":"2026-01-01T00:00:00Z","source":"x","data":{"job_id":"j-00000000000000000000000000","attempt":1,"kind":"heartbeat"}}`)
	for _, data := range [][]byte{poison, []byte("{garbled")} {
		if err := b.PublishRaw(ctx, subj, data); err != nil {
			t.Fatal(err)
		}
	}
	follow := func() (offers, refused int64) {
		var seen atomic.Int64
		before := b.Dropped()
		stop, err := b.Follow(ctx, events.StreamPrices, []string{"spotwise.prices.>"}, true, events.Typed(func(context.Context, events.Message, *events.OffersUpdated) error {
			seen.Add(1)
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		drops := func(m map[events.DropKey]int64) int64 {
			return m[events.DropKey{Consumer: events.StreamPrices, Reason: "garbled"}] + m[events.DropKey{Consumer: events.StreamPrices, Reason: "refused"}]
		}
		testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
			if seen.Load()+drops(b.Dropped())-drops(before) == 0 {
				return errors.New("nothing delivered yet")
			}
			return nil
		})
		after := b.Dropped()
		k := events.DropKey{Consumer: events.StreamPrices, Reason: "refused"}
		return seen.Load(), after[k] - before[k]
	}
	// The first follower starts at the garbled message (the subject's
	// last) and drops it; the poison before it is never read.
	if offers, _ := follow(); offers != 0 {
		t.Fatalf("first follower read %d offer updates, want none (the last message is garbled)", offers)
	}
	// With the garbled message gone, the poison is the last one: dropped,
	// and gone too.
	if _, refused := follow(); refused != 1 {
		t.Fatalf("second follower refused %d messages, want the poison once", refused)
	}
	// Now the good update is the last again.
	if offers, refused := follow(); offers != 1 || refused != 0 {
		t.Fatalf("third follower read %d updates and refused %d, want the good update alone", offers, refused)
	}
}

// A request handler that panics does not take the process down: Serve
// answers with an error, Answer stays silent, the request is counted as
// dropped, and the next request is answered.
func TestPanickingRequestHandlersDropTheRequest(t *testing.T) {
	b := eventstest.NewBus(t, nil)
	echo := func(data []byte) []byte {
		if string(data) == "boom" {
			panic("a request nobody foresaw")
		}
		return append([]byte("re:"), data...)
	}
	stopS, err := b.Serve("spotwise.test.serve", func(_ context.Context, data []byte) []byte { return echo(data) })
	if err != nil {
		t.Fatal(err)
	}
	defer stopS()
	stopA, err := b.Answer("spotwise.test.answer", func(data []byte) ([]byte, bool) { return echo(data), true })
	if err != nil {
		t.Fatal(err)
	}
	defer stopA()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if got, err := b.Request(ctx, "spotwise.test.serve", []byte("boom")); err != nil || string(got) != string(events.ErrorReply) {
		t.Fatalf("serve answered %q, %v; want the error reply", got, err)
	}
	silent, cancelSilent := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelSilent()
	if got, err := b.Request(silent, "spotwise.test.answer", []byte("boom")); err == nil {
		t.Fatalf("answer answered %q to a request its handler panicked on", got)
	}
	for _, subject := range []string{"spotwise.test.serve", "spotwise.test.answer"} {
		if got, err := b.Request(ctx, subject, []byte("hi")); err != nil || string(got) != "re:hi" {
			t.Fatalf("%s after a panic: %q, %v", subject, got, err)
		}
		if n := b.Dropped()[events.DropKey{Consumer: subject, Reason: "refused"}]; n != 1 {
			t.Errorf("%s: %d requests dropped, want 1", subject, n)
		}
	}
}
