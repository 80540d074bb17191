package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/spotwise/spotwise/providers"
)

// EventBridge detail types the consumer reads.
const (
	DetailSpotInterruption = "EC2 Spot Instance Interruption Warning"
	DetailRebalance        = "EC2 Instance Rebalance Recommendation"
	DetailStateChange      = "EC2 Instance State-change Notification"
	DetailHealth           = "AWS Health Event"
)

// SpotNoticeWindow is how long after a spot interruption warning EC2
// takes the instance.
const SpotNoticeWindow = 2 * time.Minute

const (
	// maxReceives is how often a message whose handling fails (an EC2
	// lookup that errs) is retried before it is dropped.
	maxReceives = 5
	// seenRetention is how long handled event IDs are remembered, so a
	// redelivered message reports nothing twice.
	seenRetention = 6 * time.Hour
	sqsMaxBackoff = time.Minute
)

// bridgeEvent is an EventBridge event as delivered to SQS.
type bridgeEvent struct {
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       time.Time       `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// notice is what one event says about one instance, before the instance
// is looked up.
type notice struct {
	kind     providers.EventKind // for state changes, set once the state is known
	instance string
	state    string // EC2 state name, state changes only
	deadline time.Time
	reason   string
}

// errGarbled marks a message that cannot be read: it is deleted, counted
// and never retried.
var errGarbled = errors.New("garbled message")

// parsers reads each detail type; one function per kind of event.
var parsers = map[string]func(bridgeEvent) ([]notice, error){
	DetailSpotInterruption: parseSpotInterruption,
	DetailRebalance:        parseRebalance,
	DetailStateChange:      parseStateChange,
	DetailHealth:           parseHealth,
}

func parseSpotInterruption(e bridgeEvent) ([]notice, error) {
	var d struct {
		InstanceID string `json:"instance-id"`
		Action     string `json:"instance-action"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil || d.InstanceID == "" || e.Time.IsZero() {
		return nil, fmt.Errorf("%w: spot interruption warning without an instance or time", errGarbled)
	}
	return []notice{{kind: providers.EventSpotInterruption, instance: d.InstanceID, deadline: e.Time.Add(SpotNoticeWindow),
		reason: "spot interruption warning (" + cmpOr(d.Action, "terminate") + ")"}}, nil
}

func parseRebalance(e bridgeEvent) ([]notice, error) {
	var d struct {
		InstanceID string `json:"instance-id"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil || d.InstanceID == "" {
		return nil, fmt.Errorf("%w: rebalance recommendation without an instance", errGarbled)
	}
	return []notice{{kind: providers.EventRebalance, instance: d.InstanceID, reason: "rebalance recommendation"}}, nil
}

func parseStateChange(e bridgeEvent) ([]notice, error) {
	var d struct {
		InstanceID string `json:"instance-id"`
		State      string `json:"state"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil || d.InstanceID == "" || d.State == "" {
		return nil, fmt.Errorf("%w: state-change notification without an instance or state", errGarbled)
	}
	switch d.State {
	case "pending":
		return nil, nil // Launch reported it pending already
	case "running", "stopping", "stopped", "shutting-down", "terminated":
		return []notice{{instance: d.InstanceID, state: d.State}}, nil
	}
	return nil, fmt.Errorf("%w: unknown instance state %q", errGarbled, d.State)
}

// healthTimeLayouts are the forms AWS Health writes times in.
var healthTimeLayouts = []string{time.RFC1123, time.RFC1123Z, time.RFC3339, "Mon, 2 Jan 2006 15:04:05 MST"}

func parseHealth(e bridgeEvent) ([]notice, error) {
	var d struct {
		Service          string `json:"service"`
		Category         string `json:"eventTypeCategory"`
		Code             string `json:"eventTypeCode"`
		StartTime        string `json:"startTime"`
		AffectedEntities []struct {
			EntityValue string `json:"entityValue"`
		} `json:"affectedEntities"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return nil, fmt.Errorf("%w: health event: %v", errGarbled, err)
	}
	if d.Service != "EC2" || d.Category != "scheduledChange" {
		return nil, nil // not about an instance going away
	}
	var start time.Time
	for _, layout := range healthTimeLayouts {
		if t, err := time.Parse(layout, d.StartTime); err == nil {
			start = t.UTC()
			break
		}
	}
	if start.IsZero() {
		return nil, fmt.Errorf("%w: health event %s with start time %q", errGarbled, d.Code, d.StartTime)
	}
	ids := map[string]bool{}
	var out []notice
	add := func(v string) {
		if i := strings.LastIndex(v, "/"); i >= 0 { // an ARN in resources
			v = v[i+1:]
		}
		if strings.HasPrefix(v, "i-") && !ids[v] {
			ids[v] = true
			out = append(out, notice{kind: providers.EventMaintenance, instance: v, deadline: start, reason: "scheduled change: " + d.Code})
		}
	}
	for _, ent := range d.AffectedEntities {
		add(ent.EntityValue)
	}
	for _, r := range e.Resources {
		add(r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: health event %s names no instance", errGarbled, d.Code)
	}
	return out, nil
}

// parseMessage reads an SQS message body: an EventBridge event, directly
// or wrapped in an SNS notification. A nil event with no error is a kind
// spotwise does not handle.
func parseMessage(body string) (*bridgeEvent, []notice, error) {
	var env struct {
		Type    string `json:"Type"`
		Message string `json:"Message"`
	}
	if err := json.Unmarshal([]byte(body), &env); err == nil && env.Type == "Notification" && env.Message != "" {
		body = env.Message
	}
	var e bridgeEvent
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errGarbled, err)
	}
	if e.DetailType == "" {
		return nil, nil, fmt.Errorf("%w: no detail-type", errGarbled)
	}
	parse, ok := parsers[e.DetailType]
	if !ok {
		return &e, nil, nil
	}
	ns, err := parse(e)
	return &e, ns, err
}

// consume reads the queue until ctx ends: long polls, handles each
// message and deletes it once handled. Receive errors are retried with
// backoff.
func (p *Provider) consume(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: awssdk.String(p.cfg.SQSQueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 20,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var missing *sqstypes.QueueDoesNotExist
			if errors.As(err, &missing) || errorCode(err) == "AccessDenied" {
				p.log.Error("cannot read the interruption queue", zap.String("queue", p.cfg.SQSQueueURL), zap.Error(err))
			} else {
				p.log.Warn("receiving from the interruption queue", zap.Error(err), zap.Duration("retry_in", backoff))
			}
			if !p.sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, sqsMaxBackoff)
			continue
		}
		backoff = time.Second
		for _, m := range out.Messages {
			p.handleMessage(ctx, m)
		}
	}
}

// handleMessage handles one message and deletes it unless handling failed
// for a reason that may pass (then SQS delivers it again, up to
// maxReceives times).
func (p *Provider) handleMessage(ctx context.Context, m sqstypes.Message) {
	log := p.log.With(zap.String("message", awssdk.ToString(m.MessageId)))
	e, ns, err := parseMessage(awssdk.ToString(m.Body))
	switch {
	case err != nil:
		p.garbled.Add(1)
		log.Warn("dropping an unreadable interruption message", zap.Error(err))
	case len(ns) == 0:
		log.Debug("ignoring an event spotwise does not act on", zap.String("event", e.DetailType))
	case p.seenBefore(e.ID):
		log.Debug("event handled already", zap.String("event", e.DetailType), zap.String("id", e.ID))
	default:
		if err := p.handleNotices(ctx, e, ns); err != nil {
			n, _ := strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
			if n < maxReceives {
				log.Warn("handling an interruption event failed; it will come again", zap.String("event", e.DetailType), zap.Error(err))
				return
			}
			log.Error("handling an interruption event failed too often; dropping it", zap.String("event", e.DetailType), zap.Error(err))
		} else {
			p.markSeen(e.ID)
		}
	}
	if _, err := p.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: awssdk.String(p.cfg.SQSQueueURL),
		ReceiptHandle: m.ReceiptHandle}); err != nil && ctx.Err() == nil {
		log.Warn("deleting a handled message", zap.Error(err))
	}
}

// handleNotices looks each instance up and reports what happened to the
// ones spotwise launched.
func (p *Provider) handleNotices(ctx context.Context, e *bridgeEvent, ns []notice) error {
	for _, n := range ns {
		ended := n.state != "" && n.state != "running"
		in, ok, err := p.lookup(ctx, e.Region, n.instance, ended)
		if err != nil {
			return fmt.Errorf("looking up %s: %w", n.instance, err)
		}
		if !ok {
			p.log.Info("event for an instance spotwise did not launch; dropped", zap.String("event", e.DetailType),
				zap.String("instance", n.instance), zap.String("region", e.Region))
			continue
		}
		if n.state != "" {
			p.stateChanged(in, n.state, e.Time)
			continue
		}
		if n.kind == providers.EventSpotInterruption {
			p.mu.Lock()
			if t := p.known[in.ID]; t != nil {
				t.reclaim = true
			}
			p.mu.Unlock()
		}
		p.log.Info("interruption notice", zap.String("event", string(n.kind)), zap.String("instance", in.ID),
			zap.String("job", in.JobID), zap.Time("deadline", n.deadline))
		p.emit(providers.Event{Kind: n.kind, Provider: ProviderName, Region: in.Region, Time: e.Time,
			Instance: &in, Deadline: n.deadline, Reason: n.reason})
	}
	return nil
}

// stateChanged applies a state-change notification to what EC2 last said
// of the instance and reports the transition once.
func (p *Provider) stateChanged(in providers.Instance, state string, at time.Time) {
	switch state {
	case "running":
		if in.State == providers.InstancePending || in.State == "" {
			in.State = providers.InstanceRunning
		}
		in.RunningAt = at
	default:
		if !in.State.Ended() {
			// EC2's describe lags the event: take the event's word.
			p.mu.Lock()
			t := p.known[in.ID]
			p.mu.Unlock()
			in.State, in.Reason = stateOf(ec2types.InstanceStateName(state), "", "", t)
		}
		if in.EndedAt.IsZero() {
			in.EndedAt = at
		}
	}
	p.transition(in, at)
}

func (p *Provider) seenBefore(id string) bool {
	if id == "" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.seen[id]
	return ok
}

func (p *Provider) markSeen(id string) {
	if id == "" {
		return
	}
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[id] = now
	for k, t := range p.seen {
		if now.Sub(t) > seenRetention {
			delete(p.seen, k)
		}
	}
}
