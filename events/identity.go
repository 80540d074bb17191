package events

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"
)

// Identity is the NATS trust spotwise runs with, the NATS way: an operator
// signs two accounts, SYS (the system account) and SPOTWISE (every stream,
// bucket and subject of spotwise), and the SPOTWISE account signs its
// users:
//
//   - the service user (the spotwise servers: everything in the account);
//   - the watcher (operators who watch events: read-only, no buckets, no
//     job submissions, which carry specs, no request subjects, which carry
//     API tokens);
//   - one user per launched attempt, for its agent, signed by a signing key
//     of its own: it may publish only its own job's and attempt's agent
//     subjects (reports, notices, renewals, output) and receive only its
//     own control requests; it expires
//     (AgentCredentialTTL; the agent renews it while its attempt lives)
//     and is revoked in the account's claims when the attempt ends.
//
// Anonymous connections are refused: a server in operator mode has no
// users but the ones these accounts sign.
//
// The keys live in one file (IdentityFile, mode 0600) in a directory that
// also holds the users' creds files; `spotwise nats init` writes the same
// directory and a server configuration for an external cluster.
type Identity struct {
	dir      string
	operator nkeys.KeyPair
	sys      nkeys.KeyPair
	account  nkeys.KeyPair
	agents   nkeys.KeyPair // the account's signing key for agent users
	secret   []byte        // derives each attempt's user key
	// TTL is how long an agent credential is good for (default
	// AgentCredentialTTL).
	TTL time.Duration

	mu      sync.Mutex
	revoked map[string]int64 // user public key -> revoked at (unix seconds)
	// issueMu orders versions of the account's claims; lastIssued is the
	// issue time of the newest (unix seconds).
	issueMu    sync.Mutex
	lastIssued int64
}

// Identity files in the identity directory.
const (
	IdentityFile = "identity.json"
	ServiceCreds = "spotwise.creds"
	WatcherCreds = "watcher.creds"
	SystemCreds  = "sys.creds"
	// ServerConfig is the nats-server configuration include of an external
	// server or cluster (operator, system account, resolver, preload).
	ServerConfig = "operator.conf"
	// AccountName is the account every spotwise subject lives in.
	AccountName = "SPOTWISE"
	// WatcherInbox is the inbox prefix a watcher's requests must use
	// (`nats --inbox-prefix _INBOX_watcher`): the only inbox it may read.
	WatcherInbox = "_INBOX_watcher"
)

// AgentCredentialTTL is how long an agent's credential is good for before
// the agent must renew it; the revocation of an ended attempt's user is
// kept that long, which keeps the account's revocation list short.
const AgentCredentialTTL = time.Hour

type identityFile struct {
	Operator string `json:"operator"`
	System   string `json:"system_account"`
	Account  string `json:"account"`
	Agents   string `json:"agent_signing_key"`
	Secret   string `json:"agent_secret"`
}

// LoadOrCreateIdentity reads the identity in dir, creating one (new keys)
// when there is none.
func LoadOrCreateIdentity(dir string) (*Identity, error) {
	id, err := LoadIdentity(dir)
	if errors.Is(err, os.ErrNotExist) {
		id, err := newIdentity(dir)
		if err != nil {
			return nil, err
		}
		return id, id.save()
	}
	return id, err
}

// LoadIdentity reads the identity in dir (an error wrapping
// os.ErrNotExist when there is none). Only identity.json is read: the
// users' credentials are derived from it.
func LoadIdentity(dir string) (*Identity, error) {
	path := filepath.Join(dir, IdentityFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("NATS identity: %w", err)
	}
	var f identityFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("NATS identity %s is garbled: %w", path, err)
	}
	id := &Identity{dir: dir, revoked: map[string]int64{}}
	for _, k := range []struct {
		seed string
		kp   *nkeys.KeyPair
		want nkeys.PrefixByte
	}{{f.Operator, &id.operator, nkeys.PrefixByteOperator}, {f.System, &id.sys, nkeys.PrefixByteAccount},
		{f.Account, &id.account, nkeys.PrefixByteAccount}, {f.Agents, &id.agents, nkeys.PrefixByteAccount}} {
		kp, err := nkeys.FromSeed([]byte(k.seed))
		if err != nil {
			return nil, fmt.Errorf("NATS identity %s: a key is garbled: %w", path, err)
		}
		if pub, _ := kp.PublicKey(); !nkeys.IsValidPublicKey(pub) || nkeys.Prefix(pub) != k.want {
			return nil, fmt.Errorf("NATS identity %s: a key is of the wrong kind", path)
		}
		*k.kp = kp
	}
	if id.secret = []byte(f.Secret); len(id.secret) < 32 {
		return nil, fmt.Errorf("NATS identity %s: the agent secret is missing", path)
	}
	return id, nil
}

func newIdentity(dir string) (*Identity, error) {
	id := &Identity{dir: dir, revoked: map[string]int64{}}
	var err error
	if id.operator, err = nkeys.CreateOperator(); err != nil {
		return nil, err
	}
	for _, kp := range []*nkeys.KeyPair{&id.sys, &id.account, &id.agents} {
		if *kp, err = nkeys.CreateAccount(); err != nil {
			return nil, err
		}
	}
	user, err := nkeys.CreateUser() // 32 random bytes, as a seed string
	if err != nil {
		return nil, err
	}
	seed, _ := user.Seed()
	id.secret = seed
	return id, nil
}

func (id *Identity) save() error {
	seed := func(kp nkeys.KeyPair) string { s, _ := kp.Seed(); return string(s) }
	data, err := json.MarshalIndent(identityFile{Operator: seed(id.operator), System: seed(id.sys),
		Account: seed(id.account), Agents: seed(id.agents), Secret: string(id.secret)}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(id.dir, 0o700); err != nil {
		return fmt.Errorf("NATS identity: %w", err)
	}
	if err := writeFile0600(filepath.Join(id.dir, IdentityFile), data); err != nil {
		return err
	}
	for _, u := range []struct {
		name string
		fn   func() (string, error)
	}{{ServiceCreds, id.ServiceCreds}, {WatcherCreds, id.WatcherCreds}, {SystemCreds, id.SystemCreds}} {
		creds, err := u.fn()
		if err != nil {
			return err
		}
		if err := writeFile0600(filepath.Join(id.dir, u.name), []byte(creds)); err != nil {
			return err
		}
	}
	return nil
}

// writeFile0600 writes a secret file whole (a temporary file renamed), so
// that a crash never leaves half a key.
func writeFile0600(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Dir is the identity directory.
func (id *Identity) Dir() string { return id.dir }

// AccountKey is the SPOTWISE account's public key.
func (id *Identity) AccountKey() string { p, _ := id.account.PublicKey(); return p }

// SystemKey is the system account's public key.
func (id *Identity) SystemKey() string { p, _ := id.sys.PublicKey(); return p }

// OperatorJWT is the operator's self-signed claims, naming the system
// account.
func (id *Identity) OperatorJWT() (string, error) {
	pub, _ := id.operator.PublicKey()
	oc := jwt.NewOperatorClaims(pub)
	oc.Name = "spotwise"
	oc.SystemAccount = id.SystemKey()
	return oc.Encode(id.operator)
}

// SystemAccountJWT is the system account's claims.
func (id *Identity) SystemAccountJWT() (string, error) {
	ac := jwt.NewAccountClaims(id.SystemKey())
	ac.Name = "SYS"
	return ac.Encode(id.operator)
}

// AccountJWT is the SPOTWISE account's claims, with JetStream enabled,
// the agents' signing key and the revocations of ended attempts still
// within a credential's lifetime.
//
// Servers keep the claims with the newest issue time, counted in seconds:
// two versions issued within one second could replace each other in any
// order (dropping a revocation), so each version waits for a second of
// its own.
func (id *Identity) AccountJWT(now time.Time) (string, error) {
	id.issueMu.Lock()
	defer id.issueMu.Unlock()
	if wait := time.Unix(id.lastIssued+1, 0).Sub(time.Now()); wait > 0 {
		time.Sleep(wait)
	}
	tok, err := id.accountJWT(now)
	if err == nil {
		id.lastIssued = time.Now().Unix()
		if ac, err := jwt.DecodeAccountClaims(tok); err == nil {
			id.lastIssued = ac.IssuedAt
		}
	}
	return tok, err
}

func (id *Identity) accountJWT(now time.Time) (string, error) {
	ac := jwt.NewAccountClaims(id.AccountKey())
	ac.Name = AccountName
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1}
	agents, _ := id.agents.PublicKey()
	ac.SigningKeys.Add(agents)
	id.mu.Lock()
	keep := now.Add(-id.ttl() - time.Minute).Unix()
	for pub, at := range id.revoked {
		if at < keep { // every credential it revoked has expired
			delete(id.revoked, pub)
			continue
		}
		// A revocation covers the credentials issued before its time: set
		// past the end by two lifetimes, it also covers one issued late
		// (a replayed launch) while the entry is kept.
		ac.RevokeAt(pub, time.Unix(at, 0).Add(2*id.ttl()))
	}
	id.mu.Unlock()
	return ac.Encode(id.operator)
}

func (id *Identity) ttl() time.Duration {
	if id.TTL > 0 {
		return id.TTL
	}
	return AgentCredentialTTL
}

// user signs a user of an account and returns its creds file.
func user(kp nkeys.KeyPair, signer nkeys.KeyPair, issuerAccount string, fill func(*jwt.UserClaims)) (string, error) {
	pub, _ := kp.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.IssuerAccount = issuerAccount
	fill(uc)
	tok, err := uc.Encode(signer)
	if err != nil {
		return "", fmt.Errorf("signing NATS user %s: %w", uc.Name, err)
	}
	seed, _ := kp.Seed()
	creds, err := jwt.FormatUserConfig(tok, seed)
	return string(creds), err
}

// derived is a user key derived from the identity's secret and a name, so
// that the same name always gives the same user (a retried launch issues
// the same credential, a revocation needs only the name).
func (id *Identity) derived(name string) nkeys.KeyPair {
	m := hmac.New(sha256.New, id.secret)
	m.Write([]byte(name))
	kp, _ := nkeys.FromRawSeed(nkeys.PrefixByteUser, m.Sum(nil))
	return kp
}

// ServiceCreds is the creds file of the spotwise servers' user.
func (id *Identity) ServiceCreds() (string, error) {
	return user(id.derived("service"), id.account, "", func(uc *jwt.UserClaims) { uc.Name = "spotwise-server" })
}

// SystemCreds is the creds file of the system account user spotwise pushes
// account updates (revocations) with.
func (id *Identity) SystemCreds() (string, error) {
	return user(id.derived("system"), id.sys, "", func(uc *jwt.UserClaims) { uc.Name = "spotwise-system" })
}

// WatcherCreds is the creds file of the read-only watcher.
func (id *Identity) WatcherCreds() (string, error) {
	return user(id.derived("watcher"), id.account, "", func(uc *jwt.UserClaims) {
		uc.Name = "spotwise-watcher"
		uc.Sub.Allow.Add(watcherSubscribe()...)
		uc.Sub.Allow.Add(WatcherInbox + ".>")
		uc.Pub.Allow.Add(SubjectList, SubjectGet, SubjectLogs, "$JS.API.INFO",
			"$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.FC.>")
		for _, s := range watchedStreams {
			uc.Pub.Allow.Add("$JS.API.STREAM.INFO."+s, "$JS.API.CONSUMER.CREATE."+s, "$JS.API.CONSUMER.CREATE."+s+".>",
				"$JS.API.CONSUMER.DELETE."+s+".>", "$JS.API.CONSUMER.INFO."+s+".>", "$JS.API.CONSUMER.MSG.NEXT."+s+".>")
		}
	})
}

// watchedStreams are the streams a watcher may replay: everything but the
// job stream, whose submissions carry specs (the cost ledger included: a
// finance tool may follow it).
var watchedStreams = []string{StreamPrices, StreamInstances, StreamInterruptions, StreamAgent, StreamAlerts, StreamAudit, StreamLedger}

// watcherSubscribe are the event subjects a watcher may read live.
func watcherSubscribe() []string {
	return []string{subjectJobEvents + ".>", subjectPrices + ".>", subjectInstances + ".>", subjectInterrupt + ".>",
		subjectAgent + ".>", AllAgentControls, subjectAlerts + ".>", AllAudit, AllLedger}
}

// AgentUser is the public key of the user of a job's attempt's agent.
func (id *Identity) AgentUser(jobID string, attempt int) string {
	pub, _ := id.derived(agentName(jobID, attempt)).PublicKey()
	return pub
}

func agentName(jobID string, attempt int) string {
	return "agent " + jobID + " " + strconv.Itoa(attempt)
}

// AgentInbox is the inbox prefix of an attempt's agent: the only inbox it
// may read (so it cannot read the answers meant for anyone else).
func AgentInbox(jobID string, attempt int) string {
	return "_INBOX." + jobID + "." + strconv.Itoa(attempt)
}

// AgentCreds issues the creds file of a job's attempt's agent, good for
// the credential lifetime from now (wall time: the NATS server checks it).
func (id *Identity) AgentCreds(jobID string, attempt int, now time.Time) (string, error) {
	if err := validSubjectToken(jobID); err != nil || attempt < 1 {
		return "", fmt.Errorf("agent credentials for job %q attempt %d: not a job and attempt", jobID, attempt)
	}
	return user(id.derived(agentName(jobID, attempt)), id.agents, id.AccountKey(), func(uc *jwt.UserClaims) {
		uc.Name = agentName(jobID, attempt)
		uc.IssuedAt = now.Unix()
		uc.Expires = now.Add(id.ttl()).Unix()
		uc.Tags.Add("job:"+jobID, "attempt:"+strconv.Itoa(attempt))
		uc.Pub.Allow.Add(AgentSubject(jobID, attempt), CredentialsSubject(jobID, attempt),
			AgentInterruptionsSubject("*", "*", jobID, attempt), LogSubject(jobID, attempt))
		uc.Sub.Allow.Add(AgentControlSubject(jobID, attempt), AgentInbox(jobID, attempt)+".>")
		// The metadata bucket holds only the simulated clock, which the
		// simulated cloud's agent processes keep: reading it is harmless.
		meta := "KV_" + BucketMeta
		uc.Pub.Allow.Add("$JS.API.STREAM.INFO."+meta, "$JS.API.DIRECT.GET."+meta, "$JS.API.DIRECT.GET."+meta+".>",
			"$JS.API.STREAM.MSG.GET."+meta, "$JS.API.CONSUMER.CREATE."+meta, "$JS.API.CONSUMER.CREATE."+meta+".>",
			"$JS.API.CONSUMER.DELETE."+meta+".>", "$JS.API.CONSUMER.INFO."+meta+".>", "$JS.FC."+meta+".>")
		uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	})
}

// AgentJWT is only the user JWT of an attempt's agent (a renewal: the
// agent keeps its key).
func (id *Identity) AgentJWT(jobID string, attempt int, now time.Time) (string, error) {
	creds, err := id.AgentCreds(jobID, attempt, now)
	if err != nil {
		return "", err
	}
	return jwt.ParseDecoratedJWT([]byte(creds))
}

// Revoke marks an attempt's agent user revoked as of now; the account's
// claims (AccountJWT) carry it from then on. It reports whether it was new.
func (id *Identity) Revoke(jobID string, attempt int, now time.Time) bool {
	pub := id.AgentUser(jobID, attempt)
	id.mu.Lock()
	defer id.mu.Unlock()
	if _, ok := id.revoked[pub]; ok {
		return false
	}
	id.revoked[pub] = now.Unix()
	return true
}

// Revoked reports whether an attempt's agent user is revoked.
func (id *Identity) Revoked(jobID string, attempt int) bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	_, ok := id.revoked[id.AgentUser(jobID, attempt)]
	return ok
}

// adopt takes the revocations of account claims already in force (the
// resolver's, after a restart or from another server).
func (id *Identity) adopt(accountJWT string) {
	ac, err := jwt.DecodeAccountClaims(accountJWT)
	if err != nil || ac.Subject != id.AccountKey() {
		return
	}
	id.issueMu.Lock()
	id.lastIssued = max(id.lastIssued, ac.IssuedAt)
	id.issueMu.Unlock()
	id.mu.Lock()
	defer id.mu.Unlock()
	for pub, at := range ac.Revocations {
		if pub == jwt.All {
			continue
		}
		if end := at - int64(2*id.ttl()/time.Second); end > id.revoked[pub] {
			id.revoked[pub] = end
		}
	}
}

// serverOptions puts a NATS server in operator mode under this identity,
// with a full account resolver in resolverDir holding both accounts.
func (id *Identity) serverOptions(o *server.Options, resolverDir string, now time.Time) error {
	opJWT, err := id.OperatorJWT()
	if err != nil {
		return err
	}
	oc, err := jwt.DecodeOperatorClaims(opJWT)
	if err != nil {
		return err
	}
	res, err := server.NewDirAccResolver(resolverDir, 0, 2*time.Minute, server.NoDelete)
	if err != nil {
		return fmt.Errorf("NATS account resolver: %w", err)
	}
	if old, err := res.LoadAcc(id.AccountKey()); err == nil {
		id.adopt(old)
	}
	sysJWT, err := id.SystemAccountJWT()
	if err != nil {
		return err
	}
	accJWT, err := id.AccountJWT(now)
	if err != nil {
		return err
	}
	for pub, tok := range map[string]string{id.SystemKey(): sysJWT, id.AccountKey(): accJWT} {
		if err := res.Store(pub, tok); err != nil {
			return fmt.Errorf("NATS account resolver: %w", err)
		}
	}
	o.TrustedOperators = []*jwt.OperatorClaims{oc}
	o.SystemAccount = id.SystemKey()
	o.AccountResolver = res
	return nil
}

// WriteServerConfig writes the nats-server configuration include of an
// external server or cluster (ServerConfig, in dir or else the identity
// directory): the operator, the system account, a full resolver (its
// directory relative to the server's working directory) and both
// accounts preloaded. A file already there for this identity and
// resolver is kept (kept true): a nats-server stores a preloaded account
// newer than the one it holds, so a rewritten file would undo the
// revocations spotwise has pushed since.
func (id *Identity) WriteServerConfig(dir, resolverDir string, now time.Time) (path string, kept bool, err error) {
	path = filepath.Join(cmp.Or(dir, id.dir), ServerConfig)
	resolverLine := fmt.Sprintf("  dir: %q\n", resolverDir)
	if old, err := os.ReadFile(path); err == nil && strings.Contains(string(old), resolverLine) &&
		strings.Contains(string(old), "\n  "+id.AccountKey()+": ") && strings.Contains(string(old), "system_account: "+id.SystemKey()+"\n") {
		return path, true, nil
	}
	opJWT, err := id.OperatorJWT()
	if err != nil {
		return "", false, err
	}
	sysJWT, err := id.SystemAccountJWT()
	if err != nil {
		return "", false, err
	}
	accJWT, err := id.AccountJWT(now)
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Generated by `spotwise nats init`: the NATS identity of spotwise.\n")
	fmt.Fprintf(&b, "# Operator mode: only users the accounts below sign may connect.\n")
	fmt.Fprintf(&b, "operator: %s\n", opJWT)
	fmt.Fprintf(&b, "system_account: %s\n", id.SystemKey())
	fmt.Fprintf(&b, "resolver: {\n  type: full\n%s  allow_delete: false\n  interval: \"2m\"\n}\n", resolverLine)
	fmt.Fprintf(&b, "resolver_preload: {\n  # SYS\n  %s: %s\n  # %s\n  %s: %s\n}\n", id.SystemKey(), sysJWT, AccountName, id.AccountKey(), accJWT)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	return path, false, writeFile0600(path, []byte(b.String()))
}

// credsOption authenticates with a creds file's content.
func credsOption(creds string) nats.Option {
	tok, err := jwt.ParseDecoratedJWT([]byte(creds))
	kp, kerr := jwt.ParseDecoratedNKey([]byte(creds))
	return nats.UserJWT(func() (string, error) { return tok, err }, func(nonce []byte) ([]byte, error) {
		if kerr != nil {
			return nil, kerr
		}
		return kp.Sign(nonce)
	})
}

// Identity is the NATS identity the bus runs under: the embedded server's,
// or an external one's (Config.IdentityDir); nil when spotwise holds none.
func (b *Bus) Identity() *Identity { return b.identity }

// claimsUpdate is the system account's subject for account updates (the
// full resolver of every server in the cluster takes them).
const claimsUpdate = "$SYS.REQ.CLAIMS.UPDATE"

// RevokeAgent revokes the NATS user of a job's attempt's agent: the account
// claims with its revocation are pushed to the servers, which close its
// connections and refuse it from then on. Revoking twice is harmless.
func (b *Bus) RevokeAgent(ctx context.Context, jobID string, attempt int) error {
	return b.RevokeAgents(ctx, AttemptRef{jobID, attempt})
}

// AttemptRef names one attempt of a job.
type AttemptRef struct {
	JobID   string
	Attempt int
}

// RevokeAgents revokes several attempts' agent users with one account
// update.
func (b *Bus) RevokeAgents(ctx context.Context, refs ...AttemptRef) error {
	if b.identity == nil || b.sysc == nil {
		return nil
	}
	fresh := false
	now := time.Now()
	for _, r := range refs {
		if b.identity.Revoke(r.JobID, r.Attempt, now) {
			fresh = true
		}
	}
	if !fresh && !b.unpushed.Load() {
		return nil
	}
	b.unpushed.Store(true)
	if err := b.pushAccount(ctx); err != nil {
		return err
	}
	b.unpushed.Store(false)
	return nil
}

// pushAccount sends the account's current claims to the servers.
func (b *Bus) pushAccount(ctx context.Context) error {
	b.pushMu.Lock()
	defer b.pushMu.Unlock()
	tok, err := b.identity.AccountJWT(time.Now())
	if err != nil {
		return err
	}
	msg, err := b.sysc.RequestWithContext(ctx, claimsUpdate, []byte(tok))
	if err != nil {
		return fmt.Errorf("pushing the account's claims: %w", err)
	}
	var r struct {
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(msg.Data, &r) == nil && r.Error != nil {
		return fmt.Errorf("the NATS server refused the account's claims: %s (%d)", r.Error.Description, r.Error.Code)
	}
	return nil
}

// AdoptRevocations reads the account's claims in force from the servers
// and keeps their revocations, so that the next push (from this server,
// after another revoked) drops none.
func (b *Bus) AdoptRevocations(ctx context.Context) error {
	if b.identity == nil || b.sysc == nil {
		return nil
	}
	msg, err := b.sysc.RequestWithContext(ctx, "$SYS.REQ.ACCOUNT."+b.identity.AccountKey()+".CLAIMS.LOOKUP", nil)
	if err != nil {
		return fmt.Errorf("reading the account's claims: %w", err)
	}
	b.identity.adopt(string(msg.Data))
	return nil
}

// AgentCredential is the NATS credential of one attempt's agent, kept
// renewed while the attempt lives.
type AgentCredential struct {
	JobID   string
	Attempt int
	seed    string
	mu      sync.Mutex
	jwt     string
	life    time.Duration // a credential's lifetime, as issued
}

// ParseAgentCredential reads an attempt's creds file; ok is false when
// the file is not a per-attempt credential (an operator's static one).
func ParseAgentCredential(creds []byte) (c *AgentCredential, ok bool, err error) {
	tok, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return nil, false, fmt.Errorf("NATS creds: %w", err)
	}
	kp, err := jwt.ParseDecoratedNKey(creds)
	if err != nil {
		return nil, false, fmt.Errorf("NATS creds: %w", err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return nil, false, fmt.Errorf("NATS creds: %w", err)
	}
	parts := strings.Fields(uc.Name)
	if len(parts) != 3 || parts[0] != "agent" || uc.Expires == 0 {
		return nil, false, nil
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil {
		return nil, false, nil
	}
	seed, _ := kp.Seed()
	return &AgentCredential{JobID: parts[1], Attempt: n, seed: string(seed), jwt: tok,
		life: time.Duration(uc.Expires-uc.IssuedAt) * time.Second}, true, nil
}

// Apply makes cfg connect with the credential (the renewed one at every
// reconnect) and read only the attempt's inbox.
func (c *AgentCredential) Apply(cfg *Config) {
	cfg.UserJWT = func() (string, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.jwt, nil
	}
	cfg.UserSeed = c.seed
	cfg.InboxPrefix = AgentInbox(c.JobID, c.Attempt)
	cfg.CredsFile, cfg.NKeyFile, cfg.User, cfg.Token = "", "", "", ""
}

// renewal is the answer to a renewal request.
type renewal struct {
	JWT   string `json:"jwt,omitempty"`
	Error string `json:"error,omitempty"`
}

// KeepRenewed asks for a fresh credential at half its lifetime (wall
// time: the NATS server checks it), then reconnects with it, until ctx
// ends or the attempt is over (the answer says so; the agent's
// connection then ends with its credential).
func (c *AgentCredential) KeepRenewed(ctx context.Context, b *Bus, log *zap.Logger) {
	every := max(c.life/2, time.Second)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msg, err := b.nc.RequestWithContext(rctx, CredentialsSubject(c.JobID, c.Attempt), nil)
		cancel()
		var r renewal
		if err == nil {
			err = json.Unmarshal(msg.Data, &r)
		}
		switch {
		case err != nil:
			log.Warn("renewing the NATS credential; trying again", zap.Error(err))
			every = max(every/4, time.Second)
			continue
		case r.Error != "":
			log.Warn("the NATS credential is not renewed", zap.String("reason", r.Error))
			return
		}
		c.mu.Lock()
		c.jwt = r.JWT
		c.mu.Unlock()
		every = max(c.life/2, time.Second)
		if err := b.nc.ForceReconnect(); err != nil {
			log.Warn("reconnecting with the renewed NATS credential", zap.Error(err))
		}
	}
}

// AnswerRenewals answers agents' renewal requests (in the API queue
// group): a fresh credential while live says the attempt has not ended.
func (b *Bus) AnswerRenewals(live func(ctx context.Context, jobID string, attempt int) (bool, error)) (stop func(), err error) {
	if b.identity == nil {
		return func() {}, nil
	}
	sub, err := b.nc.QueueSubscribe(AllCredentials, APIQueue, func(m *nats.Msg) {
		var r renewal
		jobID, attempt, ok := ParseAttemptSubject(m.Subject)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		switch alive, err := live(ctx, jobID, attempt); {
		case err != nil:
			return // no answer: the agent asks again
		case !alive || b.identity.Revoked(jobID, attempt):
			r.Error = "the attempt has ended"
		default:
			if r.JWT, err = b.identity.AgentJWT(jobID, attempt, time.Now()); err != nil {
				r.Error = err.Error()
			}
		}
		data, _ := json.Marshal(r)
		_ = m.Respond(data)
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
