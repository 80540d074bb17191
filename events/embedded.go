package events

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
)

// EmbeddedOptions configures the in-process NATS server that spotwise runs
// when no external server is given.
type EmbeddedOptions struct {
	// DataDir holds the JetStream store (DataDir/jetstream).
	DataDir string
	// Listen is the client address ("127.0.0.1:4222") other processes and
	// any NATS client use to reach the embedded server; "" serves
	// in-process connections only, and port -1 picks a free port.
	Listen string
	// ServerName names the server in the JetStream cluster metadata; it
	// must stay the same across restarts for the store to be found.
	ServerName string
	// Cluster joins other embedded servers: the cluster listen address and
	// the routes to the others ("nats-route://127.0.0.1:6223").
	ClusterName   string
	ClusterListen string
	Routes        []string
	// Identity is the NATS identity the server trusts (operator mode;
	// anonymous connections are refused); nil loads or creates the one in
	// DataDir/nats. Servers of one cluster must share one.
	Identity *Identity
}

// IdentityDir is where an embedded server keeps its NATS identity.
func IdentityDir(dataDir string) string { return filepath.Join(dataDir, "nats") }

// StartEmbedded starts a NATS server with JetStream in this process and
// waits until it accepts connections.
func StartEmbedded(o EmbeddedOptions, log *zap.Logger) (*server.Server, error) {
	if o.DataDir == "" {
		return nil, fmt.Errorf("embedded NATS: a data directory is required")
	}
	if o.ServerName == "" {
		o.ServerName = "spotwise"
	}
	opts := &server.Options{
		ServerName:         o.ServerName,
		JetStream:          true,
		StoreDir:           filepath.Join(o.DataDir, "jetstream"),
		NoSigs:             true,
		MaxPayload:         8 << 20,
		JetStreamMaxMemory: 256 << 20,
	}
	if o.Identity == nil {
		id, err := LoadOrCreateIdentity(IdentityDir(o.DataDir))
		if err != nil {
			return nil, err
		}
		o.Identity = id
	}
	if err := o.Identity.serverOptions(opts, filepath.Join(o.DataDir, "jwt"), time.Now()); err != nil {
		return nil, err
	}
	if o.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := splitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded NATS listen address: %w", err)
		}
		opts.Host, opts.Port = host, port
	}
	if o.ClusterListen != "" {
		host, port, err := splitHostPort(o.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("embedded NATS cluster address: %w", err)
		}
		opts.Cluster.Name = o.ClusterName
		opts.Cluster.Host, opts.Cluster.Port = host, port
		opts.Routes = server.RoutesFromStr(joinComma(o.Routes))
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	ns.SetLoggerV2(natsLogger{log.Named("nats")}, false, false, false)
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded NATS did not start within 30s (is %s in use?)", o.Listen)
	}
	return ns, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: bad port", addr)
	}
	return host, port, nil
}

func joinComma(s []string) string {
	out := ""
	for i, r := range s {
		if i > 0 {
			out += ","
		}
		out += r
	}
	return out
}

// natsLogger sends nats-server's log lines to zap.
type natsLogger struct{ l *zap.Logger }

func (n natsLogger) Noticef(f string, v ...any) { n.l.Debug(fmt.Sprintf(f, v...)) }
func (n natsLogger) Warnf(f string, v ...any)   { n.l.Warn(fmt.Sprintf(f, v...)) }
func (n natsLogger) Fatalf(f string, v ...any)  { n.l.Error(fmt.Sprintf(f, v...)) }
func (n natsLogger) Errorf(f string, v ...any)  { n.l.Error(fmt.Sprintf(f, v...)) }
func (n natsLogger) Debugf(f string, v ...any)  { n.l.Debug(fmt.Sprintf(f, v...)) }
func (n natsLogger) Tracef(f string, v ...any)  {}
