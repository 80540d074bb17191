package awsfake

import (
	"fmt"
	"time"
)

// EventBridge events as EC2 and AWS Health put them on the queue (shapes
// from their documentation). Each builder gives the event a new ID and
// reads the instance's region and zone from the fake (us-east-1 for an
// instance it does not have); the Send variants queue the event and
// return the SQS message ID.

// SpotInterruptionWarning is the "EC2 Spot Instance Interruption Warning"
// EC2 sends two minutes before it reclaims a spot instance; at is the
// event's time.
func (c *Cloud) SpotInterruptionWarning(instanceID string, at time.Time) string {
	return c.event("EC2 Spot Instance Interruption Warning", "aws.ec2", instanceID, at, true,
		map[string]any{"instance-id": instanceID, "instance-action": "terminate"})
}

// RebalanceRecommendation is the "EC2 Instance Rebalance Recommendation"
// for a spot instance at elevated risk of interruption.
func (c *Cloud) RebalanceRecommendation(instanceID string, at time.Time) string {
	return c.event("EC2 Instance Rebalance Recommendation", "aws.ec2", instanceID, at, true,
		map[string]any{"instance-id": instanceID})
}

// StateChange is the "EC2 Instance State-change Notification" of an
// instance entering state (pending, running, shutting-down, terminated,
// stopping, stopped).
func (c *Cloud) StateChange(instanceID, state string, at time.Time) string {
	return c.event("EC2 Instance State-change Notification", "aws.ec2", instanceID, at, false,
		map[string]any{"instance-id": instanceID, "state": state})
}

// HealthScheduledChange is the "AWS Health Event" of scheduled EC2
// maintenance on an instance starting at start and lasting six hours;
// eventTypeCode defaults to AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED.
func (c *Cloud) HealthScheduledChange(instanceID, eventTypeCode string, start time.Time) string {
	code := cmpOr(eventTypeCode, "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED")
	region, _ := c.placeOf(instanceID)
	const rfc1123 = "Mon, 02 Jan 2006 15:04:05 GMT"
	return c.event("AWS Health Event", "aws.health", instanceID, c.now(), false, map[string]any{
		"eventArn":          fmt.Sprintf("arn:aws:health:%s::event/EC2/%s/%s_%s", region, code, code, instanceID),
		"service":           "EC2",
		"eventTypeCode":     code,
		"eventTypeCategory": "scheduledChange",
		"startTime":         start.UTC().Format(rfc1123),
		"endTime":           start.Add(6 * time.Hour).UTC().Format(rfc1123),
		"eventDescription": []map[string]string{{"language": "en_US",
			"latestDescription": "EC2 has detected degradation of the underlying hardware hosting your Amazon EC2 instance."}},
		"affectedEntities": []map[string]any{{"entityValue": instanceID, "tags": map[string]string{}}},
	})
}

// SendSpotInterruptionWarning queues SpotInterruptionWarning.
func (c *Cloud) SendSpotInterruptionWarning(instanceID string, at time.Time) string {
	return c.Send(c.SpotInterruptionWarning(instanceID, at))
}

// SendRebalanceRecommendation queues RebalanceRecommendation.
func (c *Cloud) SendRebalanceRecommendation(instanceID string, at time.Time) string {
	return c.Send(c.RebalanceRecommendation(instanceID, at))
}

// SendStateChange queues StateChange. It does not change the instance:
// SetState does (and, with WithStateChangeEvents, sends this itself).
func (c *Cloud) SendStateChange(instanceID, state string, at time.Time) string {
	return c.Send(c.StateChange(instanceID, state, at))
}

// SendHealthScheduledChange queues HealthScheduledChange.
func (c *Cloud) SendHealthScheduledChange(instanceID, eventTypeCode string, start time.Time) string {
	return c.Send(c.HealthScheduledChange(instanceID, eventTypeCode, start))
}

// placeOf is an instance's region and zone.
func (c *Cloud) placeOf(instanceID string) (region, zone string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in := c.instances[instanceID]; in != nil {
		return in.Region, in.Zone
	}
	return DefaultRegion, DefaultRegion + "a"
}

func (c *Cloud) event(detailType, source, instanceID string, at time.Time, zonal bool, detail any) string {
	region, zone := c.placeOf(instanceID)
	return c.eventIn(region, zone, detailType, source, instanceID, at, zonal, detail)
}

// eventIn builds an event body. EC2's spot events name the instance by a
// zonal ARN without the account (arn:aws:ec2:us-east-1a:instance/i-...),
// the others by the usual one; Health events list the bare ID.
func (c *Cloud) eventIn(region, zone, detailType, source, instanceID string, at time.Time, zonal bool, detail any) string {
	resource := fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", region, Account, instanceID)
	switch {
	case zonal:
		resource = fmt.Sprintf("arn:aws:ec2:%s:instance/%s", zone, instanceID)
	case source == "aws.health":
		resource = instanceID
	}
	n := c.eventSeq.Add(1)
	return mustJSON(map[string]any{
		"version": "0", "id": fmt.Sprintf("7bf73129-1428-4cd3-a780-%012d", n), "detail-type": detailType, "source": source,
		"account": Account, "time": at.UTC().Format(time.RFC3339), "region": region, "resources": []string{resource}, "detail": detail,
	})
}

// publishStateLocked puts a state change on the queue when the fake sends
// them; called with c.mu held.
func (c *Cloud) publishStateLocked(in *instance, at time.Time) {
	if !c.stateEvents {
		return
	}
	c.queue.send(c.eventIn(in.Region, in.Zone, "EC2 Instance State-change Notification", "aws.ec2", in.ID, at, false,
		map[string]any{"instance-id": in.ID, "state": in.State}))
}
