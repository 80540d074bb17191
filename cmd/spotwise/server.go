package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/job"
)

func newServerCmd() *cobra.Command {
	var configFile string
	var dryRun, noClientConfig bool
	cfg := server.Defaults()
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the spotwise server (API, scheduler, feeds)",
		Long: `Run the spotwise server. With no configuration it starts an embedded NATS
server with JetStream (stored under --data-dir) and the simulated cloud at
120x speed. Configuration comes from defaults, then --config FILE (YAML),
then SPOTWISE_* environment variables, then flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Flags given on the command line win; apply file and env
			// first, then re-apply the flags that were set.
			flagged := cfg
			merged := server.Defaults()
			if configFile != "" {
				if err := merged.LoadFile(configFile); err != nil {
					return err
				}
			}
			if err := merged.LoadEnv(os.LookupEnv); err != nil {
				return err
			}
			if err := merged.Alerts.ExpandEnv(os.LookupEnv); err != nil {
				return err
			}
			applyFlags(cmd, &merged, flagged)
			log, err := newLogger(merged.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			if dryRun {
				return server.DryRun(cmd.Context(), merged, cmd.OutOrStdout(), log)
			}
			server.SetMemoryLimit(log)
			server.TuneGC(log)
			s, err := server.Start(cmd.Context(), merged, log, server.WithVersion(version))
			if err != nil {
				return err
			}
			defer s.Close()
			clientFile := ""
			if v, _ := strconv.ParseBool(os.Getenv("SPOTWISE_NO_CLIENT_CONFIG")); v {
				noClientConfig = true
			}
			if !noClientConfig {
				// The CLI on this machine talks to this server with
				// nothing set: the README's `make run`, then submit.
				scheme := "http://"
				if merged.HTTPTLS.CertFile != "" {
					scheme = "https://"
				}
				if clientFile, err = writeClientConfig(clientConfig{Server: scheme + s.HTTPAddr(), Token: s.OperatorToken()}); err != nil {
					log.Warn("writing the client config (the CLI needs --token or SPOTWISE_TOKEN)", zap.Error(err))
				}
			}
			printBanner(s, merged, clientFile)
			<-cmd.Context().Done()
			log.Info("shutting down")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "YAML config file")
	f.BoolVar(&dryRun, "dry-run", false, "price and plan with the configured providers, print the offers and the plan for waiting jobs, launch nothing, exit")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "where the embedded NATS server keeps its store")
	f.StringVar(&cfg.NodeName, "node-name", "", "this server's name among several on one NATS cluster (env SPOTWISE_NODE_NAME)")
	f.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "HTTP API address")
	f.StringVar(&cfg.HTTPTLS.CertFile, "tls-cert", "", "serve the API over TLS with this certificate (PEM)")
	f.StringVar(&cfg.HTTPTLS.KeyFile, "tls-key", "", "the TLS certificate's key (PEM)")
	f.BoolVar(&noClientConfig, "no-client-config", false, "do not write the server's address and operator token into the CLI's config file ($XDG_CONFIG_HOME/spotwise/config.yaml; env SPOTWISE_NO_CLIENT_CONFIG)")
	f.StringVar(&cfg.NATS.URL, "nats-url", "", "external NATS server or cluster (comma-separated URLs); empty runs the embedded server")
	f.StringVar(&cfg.NATS.Listen, "nats-listen", cfg.NATS.Listen, "client address of the embedded NATS server (empty: in-process only)")
	f.StringVar(&cfg.NATS.CredsFile, "nats-creds", "", "NATS credentials file (JWT and nkey)")
	f.StringVar(&cfg.NATS.IdentityDir, "nats-identity-dir", "", "NATS identity of an external cluster (`spotwise nats init`): connect as its service user and issue each agent its own")
	f.StringVar(&cfg.NATS.NKeyFile, "nats-nkey", "", "NATS nkey seed file")
	f.StringVar(&cfg.NATS.User, "nats-user", "", "NATS user")
	f.StringVar(&cfg.NATS.Password, "nats-password", "", "NATS password (prefer SPOTWISE_NATS_PASSWORD)")
	f.StringVar(&cfg.NATS.Token, "nats-token", "", "NATS token (prefer SPOTWISE_NATS_TOKEN)")
	f.StringVar(&cfg.NATS.TLSCAFile, "nats-tls-ca", "", "CA file to verify the NATS server")
	f.StringVar(&cfg.NATS.TLSCertFile, "nats-tls-cert", "", "client certificate for NATS")
	f.StringVar(&cfg.NATS.TLSKeyFile, "nats-tls-key", "", "client key for NATS")
	f.IntVar(&cfg.NATS.Replicas, "nats-replicas", cfg.NATS.Replicas, "replicas of every stream and bucket (3 on a cluster)")
	f.Float64Var(&cfg.Sim.Speed, "sim-speed", cfg.Sim.Speed, "how much faster than real time the simulated cloud runs (1 = real time)")
	f.Int64Var(&cfg.Sim.Seed, "sim-seed", cfg.Sim.Seed, "seed of the simulated cloud (prices, capacity, latencies)")
	f.Float64Var(&cfg.Sim.Interruptions.RateScale, "sim-interruption-scale", cfg.Sim.Interruptions.RateScale, "multiplies the simulated spot interruption rates (1 is realistic; 2000 makes a 2-hour job likely to be preempted; 0: none)")
	f.BoolVar(&cfg.Scheduler.Arbitrage.Enabled, "arbitrage", cfg.Scheduler.Arbitrage.Enabled, "move running jobs to clearly cheaper capacity (scheduler.arbitrage in the config)")
	f.StringSliceVar(&cfg.Sim.Traces, "sim-trace", nil, "availability trace files or folders (../shared/traces format) that drive spot availability in their zones")
	f.StringVar(&cfg.Checkpoints.URI, "checkpoints", "", "default checkpoint store: file:///path, s3://bucket/prefix, azblob://account/container/prefix (default: under --data-dir)")
	f.StringVar(&cfg.Log.Level, "log-level", cfg.Log.Level, "debug, info, warn or error")
	f.StringVar(&cfg.Log.Format, "log-format", cfg.Log.Format, "console or json")
	return cmd
}

// applyFlags copies the flags set on the command line from flagged to cfg.
func applyFlags(cmd *cobra.Command, cfg *server.Config, flagged server.Config) {
	set := map[string]func(){
		"data-dir":               func() { cfg.DataDir = flagged.DataDir },
		"node-name":              func() { cfg.NodeName = flagged.NodeName },
		"http-addr":              func() { cfg.HTTPAddr = flagged.HTTPAddr },
		"tls-cert":               func() { cfg.HTTPTLS.CertFile = flagged.HTTPTLS.CertFile },
		"tls-key":                func() { cfg.HTTPTLS.KeyFile = flagged.HTTPTLS.KeyFile },
		"nats-url":               func() { cfg.NATS.URL = flagged.NATS.URL },
		"nats-listen":            func() { cfg.NATS.Listen = flagged.NATS.Listen },
		"nats-creds":             func() { cfg.NATS.CredsFile = flagged.NATS.CredsFile },
		"nats-identity-dir":      func() { cfg.NATS.IdentityDir = flagged.NATS.IdentityDir },
		"nats-nkey":              func() { cfg.NATS.NKeyFile = flagged.NATS.NKeyFile },
		"nats-user":              func() { cfg.NATS.User = flagged.NATS.User },
		"nats-password":          func() { cfg.NATS.Password = flagged.NATS.Password },
		"nats-token":             func() { cfg.NATS.Token = flagged.NATS.Token },
		"nats-tls-ca":            func() { cfg.NATS.TLSCAFile = flagged.NATS.TLSCAFile },
		"nats-tls-cert":          func() { cfg.NATS.TLSCertFile = flagged.NATS.TLSCertFile },
		"nats-tls-key":           func() { cfg.NATS.TLSKeyFile = flagged.NATS.TLSKeyFile },
		"nats-replicas":          func() { cfg.NATS.Replicas = flagged.NATS.Replicas },
		"sim-speed":              func() { cfg.Sim.Speed = flagged.Sim.Speed },
		"sim-seed":               func() { cfg.Sim.Seed = flagged.Sim.Seed },
		"sim-interruption-scale": func() { cfg.Sim.Interruptions.RateScale = flagged.Sim.Interruptions.RateScale },
		"sim-trace":              func() { cfg.Sim.Traces = flagged.Sim.Traces },
		"arbitrage":              func() { cfg.Scheduler.Arbitrage.Enabled = flagged.Scheduler.Arbitrage.Enabled },
		"checkpoints":            func() { cfg.Checkpoints.URI = flagged.Checkpoints.URI },
		"log-level":              func() { cfg.Log.Level = flagged.Log.Level },
		"log-format":             func() { cfg.Log.Format = flagged.Log.Format },
	}
	for name, apply := range set {
		if cmd.Flags().Changed(name) {
			apply()
		}
	}
}

func newLogger(c server.LogConfig) (*zap.Logger, error) {
	return buildLogger(c, colorOn(os.Stderr), nil)
}

// buildLogger builds the server's logger; color colours the console
// format's levels (only for a terminal); paths, when set, replace the
// standard error it writes to.
func buildLogger(c server.LogConfig, color bool, paths []string) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	zc := zap.NewProductionConfig()
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.DisableStacktrace = true
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
		// Colour only on a terminal, and never with NO_COLOR set: a log
		// redirected to a file must not fill with escape codes.
		if color {
			zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
	}
	if paths != nil {
		zc.OutputPaths, zc.ErrorOutputPaths = paths, paths
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	return zc.Build()
}

func printBanner(s *server.Server, cfg server.Config, clientFile string) {
	nats := s.NATSURL()
	if cfg.NATS.URL != "" {
		nats = "external"
	} else if nats == "" {
		nats = "embedded (in-process only)"
	}
	speed := fmt.Sprintf("%gx", cfg.Sim.Speed)
	if cfg.Sim.Speed == 1 {
		speed = "real time"
	}
	scheme := "http"
	if cfg.HTTPTLS.CertFile != "" {
		scheme = "https"
	}
	client := "the CLI needs --token or SPOTWISE_TOKEN (the operator token is in the file above)"
	if clientFile != "" {
		client = "server and operator token written to " + clientFile
	}
	fmt.Fprintf(os.Stderr, `
spotwise is running
  dashboard       %s://%s/ui/ (sign in with the operator token)
  HTTP API        %s://%s
  NATS            %s
  simulated cloud %s (seed %d), %s
  clock           %s
  operator token  %s
  CLI             %s

Submit a job from another shell:
  spotwise submit examples/bert-finetune.yaml
  spotwise jobs

`, scheme, s.HTTPAddr(), scheme, s.HTTPAddr(), nats, speed, cfg.Sim.Seed, job.Duration(cfg.Scheduler.ReconcileInterval).D().String()+" reconciliation", s.Clock().Now().UTC().Format("2006-01-02 15:04:05 MST"),
		s.OperatorTokenFile(), client)
}
