package azurefake

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// AccessToken is the bearer token Credential hands out. ARM requests
// carrying any other Authorization are refused with 401, so a test knows
// the provider used the credential it was given.
const AccessToken = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.azurefake-access-token"

// Cloud is one fake subscription: its VMs (in any number of resource
// groups), the long-running operations on them, and the retail price
// feed. Build it with New and Close it when done.
type Cloud struct {
	now       func() time.Time
	manual    bool
	bootDelay time.Duration
	prices    *priceServer

	mu         sync.Mutex
	vms        map[string]*vm // vmKey(rg, name) -> VM
	ops        map[string]*operation
	creates    []createRecord
	deletes    []string
	refuse     []rule // PUTs answered with an error
	failProv   []rule // PUTs accepted whose provisioning then fails
	deleteFail int    // the next n deletions fail, the VM stays
	throttle   map[string]int
	retryAfter time.Duration
	calls      map[string]int
	auth       []string
}

// Option changes how New builds a Cloud.
type Option func(*Cloud)

// WithClock sets the clock VMs boot by, and the times the fake writes
// (default time.Now).
func WithClock(now func() time.Time) Option { return func(c *Cloud) { c.now = now } }

// WithBootDelay makes a new VM read Creating (power state starting) for d
// of the clock before it is Succeeded and running (default 0: running as
// soon as it is created).
func WithBootDelay(d time.Duration) Option { return func(c *Cloud) { c.bootDelay = d } }

// WithManualStates keeps new VMs Creating and starting until SetState
// moves them: the test decides when each VM runs.
func WithManualStates() Option { return func(c *Cloud) { c.manual = true } }

// New starts a Cloud: no VMs, no prices (see SetPrice), and the Retail
// Prices API listening on a loopback port.
func New(opts ...Option) *Cloud {
	c := &Cloud{now: time.Now, vms: map[string]*vm{}, ops: map[string]*operation{},
		throttle: map[string]int{}, calls: map[string]int{}}
	for _, o := range opts {
		o(c)
	}
	c.prices = newPriceServer()
	return c
}

// Close stops the Retail Prices API server.
func (c *Cloud) Close() { c.prices.srv.Close() }

// Transport is the ARM endpoint, for azure.WithTransport: every request
// the armcompute client sends, whatever its host, is answered in process.
func (c *Cloud) Transport() policy.Transporter { return transport{c} }

// Credential is a token credential handing out AccessToken, for
// azure.WithCredential.
func (c *Cloud) Credential() azcore.TokenCredential { return credential{} }

type credential struct{}

func (credential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: AccessToken, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// transport serves ARM requests with the Cloud's handler, in process.
type transport struct{ c *Cloud }

func (t transport) Do(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.c.serveARM(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// Throttle answers the next n ARM requests of an HTTP method (GET, PUT,
// DELETE) with 429 Too Many Requests and a Retry-After of retryAfter
// (whole seconds, as ARM writes it), before they reach the VMs.
func (c *Cloud) Throttle(method string, n int, retryAfter time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.throttle[method] = n
	c.retryAfter = retryAfter
}

// Calls counts the ARM requests of an HTTP method received so far,
// throttled ones included.
func (c *Cloud) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// Authorizations returns the Authorization header of every ARM request
// received, in order.
func (c *Cloud) Authorizations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.auth)
}

// admitLocked counts a request and decides whether it is throttled or
// unauthorized; it writes the refusal and reports false if so.
func (c *Cloud) admitLocked(w http.ResponseWriter, req *http.Request) bool {
	c.calls[req.Method]++
	auth := req.Header.Get("Authorization")
	c.auth = append(c.auth, auth)
	if c.throttle[req.Method] > 0 {
		c.throttle[req.Method]--
		w.Header().Set("Retry-After", strconv.Itoa(int(c.retryAfter/time.Second)))
		writeError(w, http.StatusTooManyRequests, "TooManyRequests", "The request is being throttled.")
		return false
	}
	if auth != "Bearer "+AccessToken {
		writeError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid.")
		return false
	}
	if req.URL.Query().Get("api-version") == "" {
		writeError(w, http.StatusBadRequest, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests.")
		return false
	}
	return true
}

// newGUID is a random GUID in Azure's upper-case form.
func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
