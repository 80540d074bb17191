package server

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/spotwise/spotwise/clock"
	"github.com/spotwise/spotwise/events"
	"github.com/spotwise/spotwise/job"
)

// agentCreds issues each launched attempt's agent its own NATS user and
// revokes it when the attempt ends (one account update for every end a
// moment brings), for as long as this server holds the scheduler lease.
type agentCreds struct {
	bus  *events.Bus
	id   *events.Identity
	wall clock.Clock
	log  *zap.Logger
	ends chan events.AttemptRef
}

// agentIdentity starts the term's credential work: nil methods when the
// bus holds no identity (an external NATS without an identity dir: agents
// use the image's credential).
func (s *Server) agentIdentity(ctx context.Context, wg *sync.WaitGroup) (*agentCreds, error) {
	id := s.bus.Identity()
	if id == nil {
		return nil, nil
	}
	wall := s.wallClock
	if wall == nil {
		wall = clock.Real{}
	}
	a := &agentCreds{bus: s.bus, id: id, wall: wall, log: s.log.Named("nats-identity"), ends: make(chan events.AttemptRef, 4096)}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := s.bus.AdoptRevocations(actx) // another server may have revoked since
	cancel()
	if err != nil {
		a.log.Warn("could not read the revocations in force", zap.Error(err))
	}
	stop, err := s.bus.AnswerRenewals(a.live)
	if err != nil {
		return nil, err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stop()
		a.revokeLoop(ctx)
	}()
	return a, nil
}

// issue is the scheduler's AgentCredentials.
func (a *agentCreds) issue(jobID string, attempt int) (string, error) {
	return a.id.AgentCreds(jobID, attempt, a.wall.Now())
}

// ended is the scheduler's AttemptEnded: it never blocks the scheduler (a
// revocation lost to a full queue is covered by the renewal check and the
// credential's expiry).
func (a *agentCreds) ended(jobID string, attempt int) {
	select {
	case a.ends <- events.AttemptRef{JobID: jobID, Attempt: attempt}:
	default:
		a.log.Warn("revocation queue full; the credential expires instead", zap.String("job", jobID), zap.Int("attempt", attempt))
	}
}

// live reports whether a job's attempt has not ended (a renewal's check).
func (a *agentCreds) live(ctx context.Context, jobID string, attempt int) (bool, error) {
	if !job.ValidID(jobID) {
		return false, nil
	}
	rec, _, err := a.bus.Jobs().Get(ctx, jobID)
	switch {
	case err == events.ErrNotFound:
		return false, nil
	case err != nil:
		return false, err
	}
	return slices.Contains(job.LiveAttempts(rec), attempt), nil
}

func (a *agentCreds) revokeLoop(ctx context.Context) {
	for {
		var refs []events.AttemptRef
		select {
		case <-ctx.Done():
			return
		case e := <-a.ends:
			refs = append(refs, e)
		}
	drain:
		for {
			select {
			case e := <-a.ends:
				refs = append(refs, e)
			default:
				break drain
			}
		}
		for try := 0; ; try++ {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := a.bus.RevokeAgents(pctx, refs...)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			a.log.Warn("revoking ended attempts' NATS users; trying again", zap.Int("attempts", len(refs)), zap.Error(err))
			if try >= 5 {
				break
			}
			time.Sleep(time.Second)
		}
	}
}

// agentCredentialWindow is how long, on the scheduler's clock, an ended
// attempt's credential may still be good for: its lifetime in wall time,
// times the simulated clock's speed.
func agentCredentialWindow(c clock.Clock) time.Duration {
	w := events.AgentCredentialTTL
	if sc, ok := c.(*clock.Scaled); ok && sc.Speed() > 1 {
		w = time.Duration(float64(w) * sc.Speed())
	}
	return w
}
