// Package notices holds the instance's own interruption notices, as the
// agent on the instance hears them: NewEC2 polls the EC2 instance metadata
// service (IMDSv2: the spot instance-action, the rebalance recommendation,
// scheduled maintenance) and NewAzure polls Azure Scheduled Events
// (Preempt, Terminate, Reboot, Redeploy, Freeze), approving an event once
// its checkpoint is stored. Both are agent.NoticeSources.
//
// It reads only the link-local metadata service of the instance it runs
// on. It must not talk to a cloud's control plane (launching, pricing,
// listing: that is providers/), to NATS (the agent forwards what it hears)
// or hold credentials.
package notices
