# spotwise: the two commands that matter are `make run` and `make test`.
GO       ?= go
BIN      := bin/spotwise
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
# Where the measured spot traces live (read at run time, never copied).
TRACES   ?= ../shared/traces

.PHONY: build run test test-short bench lint lint-deploy fmt vet clean fuzz chaos

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/spotwise

# The whole system on an embedded NATS server and the simulated cloud, with
# spot interruptions frequent enough to watch jobs survive them
# (SIM_INTERRUPTIONS=1 is realistic, 0 turns them off).
SIM_INTERRUPTIONS ?= 2000
run: build
	$(BIN) server --sim-interruption-scale $(SIM_INTERRUPTIONS) $(ARGS)

# Everything, with the race detector, as CI runs it.
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m ./...

test-short:
	$(GO) test -short -count=1 ./...

# Every fuzz target for FUZZTIME each (their seed corpora already run in
# `make test`); a failing input is written under the package's
# testdata/fuzz, to be kept as a regression once the bug is fixed. Runs
# are milliseconds of real NATS each, so minimizing is bounded by count.
FUZZTIME ?= 1m
FUZZ_TARGETS := events:FuzzDecode events:FuzzLogRead scheduler:FuzzSchedulerConsumers alerts:FuzzAlertsConsumer api:FuzzNATSSubmit api:FuzzPagesChain \
	internal/server:FuzzSimControl agent:FuzzAgentControl job:FuzzParse auth:FuzzAuthenticate ledger:FuzzLedgerEntry ledger:FuzzLedgerSeal events:FuzzHistorySeal internal/idmap:FuzzKey
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; echo "== $$fn ($$pkg)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10x ./$$pkg/ || exit 1; done

# Benchmarks for the performance targets (one core for the cycle).
# Every benchmark once (the system-level ones are one sustained run each,
# 20-25 minutes in all), then each figure that has a target beside it;
# fails when one is missed. One package at a time (-p 1): two benchmark
# binaries at once on two cores would measure each other. BENCH=Readers runs the ones matching; the
# whole output is kept in bench.out.
BENCH ?= .
BENCHTIME ?= 1x
bench:
	$(GO) test -p 1 -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) -timeout 90m ./... 2>&1 | tee bench.out | $(GO) run ./internal/benchcheck

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	$$($(GO) env GOPATH)/bin/staticcheck ./...

# The Helm chart (deploy/helm/spotwise): helm lint and helm template with
# helm v3.22.0, built from the Go module proxy into bin/ the first time
# (about 8 minutes on two busy cores with empty caches, seconds after),
# then deploy/helm's tests, which render it with several sets of values
# and check the manifests. --kube-version: a helm built by `go install`
# assumes Kubernetes 1.20, older than the chart's kubeVersion.
HELM_VERSION := v3.22.0
HELM := bin/helm-$(HELM_VERSION)/helm
KUBE_VERSION ?= 1.31.0
$(HELM):
	GOBIN=$(CURDIR)/bin/helm-$(HELM_VERSION) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
#
# Then the Prometheus rules (deploy/prometheus): promtool (Debian's
# prometheus package; .ci/run installs it) checks them and runs their
# tests; and the Grafana dashboard (deploy/grafana) and the rules are read
# by a test that runs a real server and finds every metric they ask for
# on its /metrics, which promlint finds nothing wrong with.
PROMTOOL ?= promtool
lint-deploy: $(HELM)
	$(HELM) lint --strict --kube-version $(KUBE_VERSION) deploy/helm/spotwise
	$(HELM) template spotwise deploy/helm/spotwise --namespace spotwise --kube-version $(KUBE_VERSION) >/dev/null
	SPOTWISE_HELM=$(CURDIR)/$(HELM) SPOTWISE_KUBE_VERSION=$(KUBE_VERSION) $(GO) test -count=1 ./deploy/helm/
	$(PROMTOOL) check rules deploy/prometheus/alerts.yml
	$(PROMTOOL) test rules deploy/prometheus/alerts_test.yml
	$(GO) test -count=1 ./internal/server/ -run '^(TestMetricsAreLintCleanAndCoverTheDashboardAndRules|TestMetricNamesOfPromQL)$$'

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf bin data

# The spot/on-demand policy table of issue 4 over the measured traces (each
# zone alone and all together, C/R 0.6-0.9, 300 evenly spaced starts), the
# heterogeneous suite (zones that differ in price and region) and the
# generality suite (the same kind of markets from the other measured sets,
# 60 starts: their 32-second steps make 300 take about 20 minutes); each
# runs, and it fails at the end when a target was missed (about 5.5
# minutes in all). POLICY_ARGS picks another set, e.g.
# POLICY_ARGS="-set availability/16-node/aws-08-27-2023 -nodes 16 -job-hours 24".
.PHONY: bench-policy
bench-policy:
	@rc=0; \
	$(GO) run ./bidding/simulate/internal/benchpolicy -traces $(TRACES) $(POLICY_ARGS) || rc=1; \
	$(GO) run ./bidding/simulate/internal/benchpolicy -traces $(TRACES) -suite heterogeneous $(HETERO_ARGS) || rc=1; \
	$(GO) run ./bidding/simulate/internal/benchpolicy -traces $(TRACES) -suite generality -starts 60 $(GENERALITY_ARGS) || rc=1; \
	exit $$rc

# Chaos: a few hundred jobs through kill -9s of the server, zone storms and
# refused or lost launches on the simulated cloud; prints jobs lost, jobs
# stuck, the most live attempts of one job, spend billed to no job, and
# fails when a target is missed. CHAOS_SEED=n repeats a run's plan (random
# when unset; the seed is printed); CHAOS_ARGS passes flags (-jobs, -kills,
# -storms, -speed, -budget, -fault-*).
CHAOS_SEED ?=
chaos: build
	$(GO) build -o bin/chaos ./internal/chaos/cmd/chaos
	CHAOS_SEED=$(CHAOS_SEED) bin/chaos -spotwise $(BIN) $(CHAOS_ARGS)
