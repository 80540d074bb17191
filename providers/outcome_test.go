package providers

import (
	"strings"
	"testing"
	"time"
)

func TestOutcomeErr(t *testing.T) {
	const id = "aws/us-east-1/us-east-1a/p3.2xlarge/spot"
	long := strings.Repeat("capacity ", 100)
	tests := []struct {
		name       string
		oc         Outcome
		code, msg  string
		wantReason string
	}{
		{"capacity with advice", Outcome{Scope: ScopeSpotRegion, For: time.Hour, Advice: "the spot quota is used up"},
			"MaxSpotInstanceCountExceeded", "Max spot instance count exceeded",
			"the spot quota is used up (MaxSpotInstanceCountExceeded: Max spot instance count exceeded)"},
		{"refusal without a message", Outcome{Refused: true, Scope: ScopeProvider, Account: true, Advice: "grant ec2:CreateFleet"},
			"UnauthorizedOperation", "", "grant ec2:CreateFleet (UnauthorizedOperation)"},
		{"no advice", Outcome{}, "Unsupported", "not\n  here", "Unsupported: not here"},
		{"no code", Outcome{Advice: "short"}, "", "started 1 of 2", "short (started 1 of 2)"},
		{"a long message is cut", Outcome{}, "X", long, "X: " + strings.TrimSpace(long)[:maxMessage] + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.oc.Err(id, tt.code, tt.msg)
			if lr, ok := AsLaunchRefused(err); ok != tt.oc.Refused || IsInsufficientCapacity(err) == tt.oc.Refused {
				t.Fatalf("%T: refused %v", err, ok)
			} else if ok {
				if lr.OfferID != id || lr.Code != tt.code || lr.Scope != tt.oc.Scope || lr.Account != tt.oc.Account || lr.Reason != tt.wantReason {
					t.Errorf("%+v", lr)
				}
				return
			}
			ice := err.(*InsufficientCapacityError)
			if ice.OfferID != id || ice.Code != tt.code || ice.Scope != tt.oc.Scope || ice.For != tt.oc.For || ice.Reason != tt.wantReason {
				t.Errorf("%+v, want reason %q", ice, tt.wantReason)
			}
		})
	}
}

func TestLastingTTL(t *testing.T) {
	for _, tt := range []struct {
		l        Lasting
		shortage time.Duration
		want     time.Duration
	}{
		{LastsShortage, 3 * time.Minute, 3 * time.Minute},
		{LastsPrice, 3 * time.Minute, time.Minute},
		{LastsPrice, 30 * time.Second, 30 * time.Second},
		{LastsQuota, 3 * time.Minute, 15 * time.Minute},
		{LastsQuota, time.Hour, time.Hour},
		{LastsLong, 5 * time.Minute, time.Hour},
	} {
		if got := tt.l.TTL(tt.shortage); got != tt.want {
			t.Errorf("%d.TTL(%s) = %s, want %s", tt.l, tt.shortage, got, tt.want)
		}
	}
}
