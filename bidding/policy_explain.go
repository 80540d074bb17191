package bidding

import (
	"fmt"
	"strings"
)

// Explain is what Spotwise sees when it decides in s, for diagnosis: the
// slack and the work left, the slack the rest of the job is expected to
// burn (need), the age of the home zones' outage and how much longer it
// is expected to last, the outages its statistics hold, the slack the
// plan is expected to burn when its outages are bridged from the age of
// its current one (plan need: on-demand waits while it fits), the home
// zones and the zones with capacity (by index), and, once the value
// table answers, what finishing is expected to cost per node when the
// outage is bridged now and when it is waited on. Hours throughout.
func (Spotwise) Explain(s PolicyState) string {
	o := newOutlook(s)
	p := o.planned(s)
	var home, avail []string
	for i, z := range s.Zones {
		if o.home[i] {
			home = append(home, fmt.Sprint(i))
		}
		if z.Available {
			avail = append(avail, fmt.Sprint(i))
		}
	}
	out := fmt.Sprintf("slack %.2fh work %.1fh need %.2fh outage %.2fh (%.2fh left) outages seen %.0f plan need %.2fh home [%s] available [%s]",
		o.s/3600, o.r/3600, o.need(s, o.age)/3600, o.age/3600, o.outageLeft()/3600, o.down.total(), p.need(s, p.age)/3600,
		strings.Join(home, " "), strings.Join(avail, " "))
	if v := o.values(s, o.homePrice(s)); v != nil {
		if now, wait, ok := v.bridgeNow(o.r, o.s, o.age); ok {
			out += fmt.Sprintf(" bridge now $%.2f wait $%.2f", now/1e6, wait/1e6)
		}
	}
	return out
}
