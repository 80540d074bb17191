// Package helm_test renders the Helm chart in ./spotwise with the helm
// that `make lint-deploy` builds (helm v3.22.0 from the Go module proxy)
// and checks what an operator would notice: how many servers, where they
// find NATS, that no container runs as root or writes its image, which
// pod gets which key, that the configuration the pods get is one
// spotwise starts with, and that nats.conf loads in the nats-server
// spotwise embeds.
//
// Without SPOTWISE_HELM (a helm binary) the tests skip: `make test` does
// not build helm.
package helm_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/events"
	spotwise "github.com/spotwise/spotwise/internal/server"
)

const (
	release   = "prod"
	namespace = "gpu-sched"
	// Where `spotwise nats init` points the account resolver unless told
	// otherwise (its --resolver-dir default): it must be on a node's
	// volume, or a restarted node forgets the revoked agent users.
	resolverDir = "/var/lib/nats/jwt"
)

// object is the part of a rendered manifest the tests read.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
	Data       map[string]string `json:"data"`
	StringData map[string]string `json:"stringData"`
}

type podTemplate struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec podSpec `json:"spec"`
}

type workload struct {
	Replicas    int               `json:"replicas"`
	ServiceName string            `json:"serviceName"`
	Selector    labelSelector     `json:"selector"`
	Template    podTemplate       `json:"template"`
	PodPolicy   string            `json:"podManagementPolicy"`
	Claims      []json.RawMessage `json:"volumeClaimTemplates"`
}

type labelSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type podSpec struct {
	SecurityContext struct {
		RunAsNonRoot   *bool `json:"runAsNonRoot"`
		RunAsUser      *int  `json:"runAsUser"`
		SeccompProfile struct {
			Type string `json:"type"`
		} `json:"seccompProfile"`
	} `json:"securityContext"`
	AutomountServiceAccountToken *bool       `json:"automountServiceAccountToken"`
	Containers                   []container `json:"containers"`
	InitContainers               []container `json:"initContainers"`
	Volumes                      []volume    `json:"volumes"`
}

type container struct {
	Name    string   `json:"name"`
	Image   string   `json:"image"`
	Command []string `json:"command"`
	Args    []string `json:"args"`
	Env     []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
	EnvFrom []struct {
		SecretRef *struct {
			Name string `json:"name"`
		} `json:"secretRef"`
	} `json:"envFrom"`
	Ports []struct {
		Name          string `json:"name"`
		ContainerPort int    `json:"containerPort"`
	} `json:"ports"`
	Resources struct {
		Limits map[string]string `json:"limits"`
	} `json:"resources"`
	LivenessProbe  *probe `json:"livenessProbe"`
	ReadinessProbe *probe `json:"readinessProbe"`
	StartupProbe   *probe `json:"startupProbe"`
	Lifecycle      struct {
		PreStop struct {
			Exec struct {
				Command []string `json:"command"`
			} `json:"exec"`
		} `json:"preStop"`
	} `json:"lifecycle"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
		Privileged               *bool `json:"privileged"`
		Capabilities             struct {
			Drop []string `json:"drop"`
			Add  []string `json:"add"`
		} `json:"capabilities"`
	} `json:"securityContext"`
	VolumeMounts []struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
		SubPath   string `json:"subPath"`
		ReadOnly  bool   `json:"readOnly"`
	} `json:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path   string `json:"path"`
		Port   any    `json:"port"`
		Scheme string `json:"scheme"`
	} `json:"httpGet"`
}

type volume struct {
	Name   string `json:"name"`
	Secret *struct {
		SecretName string `json:"secretName"`
		Items      []struct {
			Key  string `json:"key"`
			Path string `json:"path"`
		} `json:"items"`
	} `json:"secret"`
	ConfigMap *struct {
		Name string `json:"name"`
	} `json:"configMap"`
	EmptyDir *json.RawMessage `json:"emptyDir"`
}

type serviceMonitorSpec struct {
	Selector  labelSelector `json:"selector"`
	Endpoints []struct {
		Port          string `json:"port"`
		Path          string `json:"path"`
		Scheme        string `json:"scheme"`
		Authorization struct {
			Type        string `json:"type"`
			Credentials struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"credentials"`
		} `json:"authorization"`
	} `json:"endpoints"`
}

// manifests is one rendering of the chart.
type manifests []object

func (m manifests) find(t *testing.T, kind, name string) object {
	t.Helper()
	for _, o := range m {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	t.Fatalf("no %s %q among %s", kind, name, m.names())
	return object{}
}

func (m manifests) ofKind(kind string) []object {
	var out []object
	for _, o := range m {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func (m manifests) names() string {
	var s []string
	for _, o := range m {
		s = append(s, o.Kind+"/"+o.Metadata.Name)
	}
	return strings.Join(s, " ")
}

func spec[T any](t *testing.T, o object) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(o.Spec, &v); err != nil {
		t.Fatalf("%s %s: %v", o.Kind, o.Metadata.Name, err)
	}
	return v
}

// helm runs the helm of SPOTWISE_HELM with args and returns its output
// and error.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := os.Getenv("SPOTWISE_HELM")
	if bin == "" {
		t.Skip("SPOTWISE_HELM is not set: `make lint-deploy` builds helm and runs these tests")
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), err
}

// kubeVersion is the Kubernetes version the chart is rendered for: a helm
// built by `go install` assumes 1.20, older than the chart's kubeVersion.
func kubeVersion() string {
	if v := os.Getenv("SPOTWISE_KUBE_VERSION"); v != "" {
		return v
	}
	return "1.31.0"
}

// render is `helm template` of the chart in the test namespace with sets
// (key=value, as --set takes them; or a whole flag: --set-file=key=path).
func render(t *testing.T, sets ...string) manifests {
	t.Helper()
	args := []string{"template", release, "spotwise", "--namespace", namespace, "--kube-version", kubeVersion()}
	for _, s := range sets {
		if strings.HasPrefix(s, "--") {
			args = append(args, s)
		} else {
			args = append(args, "--set", s)
		}
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var m manifests
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(out, -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("a rendered manifest is not YAML: %v\n%s", err, doc)
		}
		if o.Kind == "" { // a template that rendered to comments only
			continue
		}
		if o.Metadata.Namespace != "" && o.Metadata.Namespace != namespace {
			t.Errorf("%s %s is in namespace %q, not the release's", o.Kind, o.Metadata.Name, o.Metadata.Namespace)
		}
		m = append(m, o)
	}
	return m
}

func (c container) env(name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func (c container) flag(name string) (string, bool) {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func (c container) mount(name string) (path string, readOnly, ok bool) {
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			return m.MountPath, m.ReadOnly, true
		}
	}
	return "", false, false
}

func (p podSpec) volume(name string) volume {
	for _, v := range p.Volumes {
		if v.Name == name {
			return v
		}
	}
	return volume{}
}

// secretsMounted lists the Secrets a pod mounts (name -> keys projected).
func (p podSpec) secretsMounted() map[string][]string {
	out := map[string][]string{}
	for _, v := range p.Volumes {
		if v.Secret == nil {
			continue
		}
		var keys []string
		for _, it := range v.Secret.Items {
			keys = append(keys, it.Key)
		}
		out[v.Secret.SecretName] = keys
	}
	return out
}

// writeCert writes a self-signed certificate and its key (PEM).
func writeCert(t *testing.T, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nats"},
		DNSNames:  []string{"*." + release + "-spotwise-nats-headless." + namespace + ".svc.cluster.local"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Like the systemd units: no root, a read-only image, no privilege
// escalation, no capability, the runtime's seccomp filter, no Kubernetes
// API token.
func checkHardened(t *testing.T, what string, p podSpec) {
	t.Helper()
	if p.SecurityContext.RunAsNonRoot == nil || !*p.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: runAsNonRoot is not true", what)
	}
	if u := p.SecurityContext.RunAsUser; u == nil || *u == 0 {
		t.Errorf("%s: no non-root runAsUser", what)
	}
	if p.SecurityContext.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("%s: seccompProfile %q, want RuntimeDefault", what, p.SecurityContext.SeccompProfile.Type)
	}
	if p.AutomountServiceAccountToken == nil || *p.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a Kubernetes API token it has no use for", what)
	}
	for _, c := range append(p.Containers, p.InitContainers...) {
		sc := c.SecurityContext
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: allowPrivilegeEscalation is not false", what, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: the root file system is writable", what, c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s/%s: privileged", what, c.Name)
		}
		if !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s/%s: capabilities drop %v add %v, want drop [ALL] and nothing added", what, c.Name, sc.Capabilities.Drop, sc.Capabilities.Add)
		}
	}
}

func TestChartLints(t *testing.T) {
	for _, sets := range [][]string{
		nil,
		{"serviceMonitor.enabled=true", "tls.secretName=spotwise-tls"},
		{"nats.enabled=false", "externalNATS.urls={tls://nats-a.example.com:4222}"},
	} {
		args := []string{"lint", "--strict", "spotwise", "--namespace", namespace, "--kube-version", kubeVersion()}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		if out, err := helm(t, args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// The default install: two servers (one schedules, one stands by) on a
// three-node NATS cluster of the chart, every stream in three replicas.
func TestChartDefaultInstall(t *testing.T) {
	m := render(t)
	full, natsName := release+"-spotwise", release+"-spotwise-nats"

	dep := spec[workload](t, m.find(t, "Deployment", full))
	sts := spec[workload](t, m.find(t, "StatefulSet", natsName))
	if dep.Replicas != 2 {
		t.Errorf("%d spotwise servers, want 2 (one scheduling, one standby)", dep.Replicas)
	}
	if sts.Replicas != 3 || sts.PodPolicy != "Parallel" {
		t.Errorf("NATS: %d nodes, pod management %q; want 3, Parallel (a node is ready only once a quorum is up)", sts.Replicas, sts.PodPolicy)
	}
	if !subset(dep.Selector.MatchLabels, dep.Template.Metadata.Labels) || !subset(sts.Selector.MatchLabels, sts.Template.Metadata.Labels) {
		t.Fatal("a workload's selector does not select its own pods")
	}
	if subset(dep.Selector.MatchLabels, sts.Template.Metadata.Labels) || subset(sts.Selector.MatchLabels, dep.Template.Metadata.Labels) {
		t.Error("the servers' and the NATS nodes' selectors overlap")
	}
	checkHardened(t, "Deployment", dep.Template.Spec)
	checkHardened(t, "StatefulSet", sts.Template.Spec)
	checkSoftMemoryLimit(t, dep.Template.Spec.Containers[0])
	checkSoftMemoryLimit(t, sts.Template.Spec.Containers[0])

	// The servers list every NATS node by its stable name, as compose does.
	srv := dep.Template.Spec.Containers[0]
	headless := m.find(t, "Service", sts.ServiceName)
	hs := spec[struct {
		ClusterIP                string            `json:"clusterIP"`
		PublishNotReadyAddresses bool              `json:"publishNotReadyAddresses"`
		Selector                 map[string]string `json:"selector"`
	}](t, headless)
	if hs.ClusterIP != "None" || !hs.PublishNotReadyAddresses || !subset(hs.Selector, sts.Template.Metadata.Labels) {
		t.Errorf("the NATS nodes' Service is not headless, does not publish nodes before they are ready, or does not select them: %+v", hs)
	}
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("nats://%s-%d.%s.%s.svc.cluster.local:4222", natsName, i, sts.ServiceName, namespace))
	}
	if url, _ := srv.flag("nats-url"); url != strings.Join(want, ",") {
		t.Errorf("--nats-url=%s\nwant          %s", url, strings.Join(want, ","))
	}
	if r, _ := srv.flag("nats-replicas"); r != "3" {
		t.Errorf("--nats-replicas=%s, want 3", r)
	}

	// Keys: identity.json to the servers only, operator.conf to the NATS
	// nodes only.
	if got := dep.Template.Spec.secretsMounted(); !slices.Equal(got["spotwise-nats-identity"], []string{"identity.json"}) || len(got) != 1 {
		t.Errorf("the servers mount the Secrets %v, want spotwise-nats-identity with identity.json only", got)
	}
	if got := sts.Template.Spec.secretsMounted(); !slices.Equal(got["spotwise-nats-operator"], []string{"operator.conf"}) || len(got) != 1 {
		t.Errorf("the NATS nodes mount the Secrets %v, want spotwise-nats-operator with operator.conf only", got)
	}
	dir, _ := srv.env("SPOTWISE_NATS_IDENTITY_DIR")
	if p, ro, ok := srv.mount("nats-identity"); !ok || p != dir || !ro {
		t.Errorf("SPOTWISE_NATS_IDENTITY_DIR=%q but the identity is mounted at %q (read-only %v)", dir, p, ro)
	}
	if len(m.ofKind("Secret")) != 0 {
		t.Errorf("the chart makes Secrets nobody gave it: %s", m.names())
	}

	// Health: the probes ask the port the server listens on, at an
	// endpoint that needs no token.
	addr, _ := srv.flag("http-addr")
	if len(srv.Ports) != 1 || srv.Ports[0].Name != "http" || !strings.HasSuffix(addr, fmt.Sprintf(":%d", srv.Ports[0].ContainerPort)) {
		t.Errorf("the server listens on %s, the container port is %+v", addr, srv.Ports)
	}
	// Liveness asks nothing of NATS (an outage must not restart the
	// servers); readiness does.
	for _, pr := range []struct {
		name string
		p    *probe
		path string
	}{{"liveness", srv.LivenessProbe, "/livez"}, {"readiness", srv.ReadinessProbe, "/readyz"}, {"startup", srv.StartupProbe, "/livez"}} {
		if p := pr.p; p == nil || p.HTTPGet == nil || p.HTTPGet.Port != "http" || p.HTTPGet.Path != pr.path {
			t.Errorf("%s probe: %+v, want GET %s on port http", pr.name, p, pr.path)
		}
	}
	svc := spec[struct {
		Selector map[string]string `json:"selector"`
		Ports    []struct {
			TargetPort any `json:"targetPort"`
		} `json:"ports"`
	}](t, m.find(t, "Service", full))
	if !subset(svc.Selector, dep.Template.Metadata.Labels) || subset(svc.Selector, sts.Template.Metadata.Labels) || svc.Ports[0].TargetPort != "http" {
		t.Errorf("the API Service does not select exactly the servers' port http: %+v", svc)
	}

	// Disruptions: a drain leaves a server up and a NATS quorum.
	for _, c := range []struct {
		name   string
		pods   map[string]string
		field  string
		value  int
		others map[string]string
	}{
		{full, dep.Template.Metadata.Labels, "minAvailable", 1, sts.Template.Metadata.Labels},
		{natsName, sts.Template.Metadata.Labels, "maxUnavailable", 1, dep.Template.Metadata.Labels},
	} {
		pdb := spec[map[string]any](t, m.find(t, "PodDisruptionBudget", c.name))
		sel, _ := json.Marshal(pdb["selector"])
		var ls labelSelector
		_ = json.Unmarshal(sel, &ls)
		if !subset(ls.MatchLabels, c.pods) || subset(ls.MatchLabels, c.others) || pdb[c.field] != float64(c.value) {
			t.Errorf("PodDisruptionBudget %s: %v", c.name, pdb)
		}
	}
	if len(m.ofKind("ServiceMonitor")) != 0 {
		t.Error("a ServiceMonitor by default: clusters without the Prometheus Operator would refuse the install")
	}

	// The NATS image is the nats-server spotwise embeds and is tested
	// against, here and in compose.
	checkNATSVersion(t, sts.Template.Spec.Containers[0].Image)

	// Each node keeps its store on its own volume, the account resolver's
	// JWTs with it.
	nats := sts.Template.Spec.Containers[0]
	store, _, _ := nats.mount("store")
	if len(sts.Claims) != 1 || store == "" || !strings.HasPrefix(resolverDir, store+"/") {
		t.Errorf("the NATS store is mounted at %q (%d claims); the account resolver at %s is not on it", store, len(sts.Claims), resolverDir)
	}
}

// checkNATSVersion: image is nats:<the nats-server version of go.mod>
// (the alpine variant has the wget compose's health check needs), and
// compose runs the same.
func checkNATSVersion(t *testing.T, image string) {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`github.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(gomod)
	if v == nil {
		t.Fatal("no nats-server in go.mod")
	}
	want := "nats:" + string(v[1]) + "-alpine"
	if image != want {
		t.Errorf("the chart's NATS image is %s, want %s", image, want)
	}
	compose, err := os.ReadFile(filepath.Join("..", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := regexp.MustCompile(`image: (nats:\S+)`).FindSubmatch(compose); got == nil || string(got[1]) != want {
		t.Errorf("compose.yaml runs %q, want %s", got, want)
	}
}

// What the servers get (the ConfigMap as --config, then their
// environment, then their flags) is a configuration spotwise starts with,
// as `spotwise server` merges it.
func TestChartServerConfigIsValid(t *testing.T) {
	for _, sets := range [][]string{
		nil,
		{"config.sim.speed=120", "config.scheduler.workers=8", "env.SPOTWISE_LOG_LEVEL=debug"},
	} {
		m := render(t, sets...)
		dep := spec[workload](t, m.find(t, "Deployment", release+"-spotwise"))
		srv := dep.Template.Spec.Containers[0]
		cm := m.find(t, "ConfigMap", release+"-spotwise")

		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
			t.Fatal(err)
		}
		mounted := ""
		for _, vm := range srv.VolumeMounts {
			if vm.Name == "config" && vm.SubPath == "config.yaml" {
				mounted = vm.MountPath
			}
		}
		if f, _ := srv.flag("config"); f == "" || f != mounted {
			t.Fatalf("--config=%s, the ConfigMap is mounted at %q", f, mounted)
		}

		cfg := spotwise.Defaults()
		if err := cfg.LoadFile(path); err != nil {
			t.Fatalf("the ConfigMap's config.yaml: %v\n%s", err, cm.Data["config.yaml"])
		}
		err := cfg.LoadEnv(func(k string) (string, bool) { return srv.env(k) })
		if err != nil {
			t.Fatalf("the pod's environment: %v", err)
		}
		// The flags the chart passes (the Deployment's args).
		cfg.NATS.URL, _ = srv.flag("nats-url")
		r, _ := srv.flag("nats-replicas")
		if cfg.NATS.Replicas, err = strconv.Atoi(r); err != nil {
			t.Fatalf("--nats-replicas=%s: %v", r, err)
		}
		cfg.HTTPAddr, _ = srv.flag("http-addr")
		cfg.DataDir, _ = srv.flag("data-dir")
		if err := cfg.Validate(); err != nil {
			t.Errorf("spotwise would refuse this configuration (%v): %v", sets, err)
		}
		if p, ro, _ := srv.mount("data"); p != cfg.DataDir || ro {
			t.Errorf("data_dir %s (the operator token's place) is not the writable volume at %s", cfg.DataDir, p)
		}
		if x, _ := srv.env("XDG_CONFIG_HOME"); !strings.HasPrefix(x, cfg.DataDir+"/") {
			t.Errorf("XDG_CONFIG_HOME=%q is not on the writable data volume: the CLI config would not be written", x)
		}
	}
}

// The rendered nats.conf, with the include `spotwise nats init` writes,
// loads in the nats-server spotwise embeds: operator mode, JetStream
// stored on the node's volume, the cluster's routes to every node, its
// name from the pod, and the preStop hook's pid file where the server
// writes it.
func TestChartNATSConfigLoads(t *testing.T) {
	m := render(t, "nats.replicas=5")
	natsName := release + "-spotwise-nats"
	sts := spec[workload](t, m.find(t, "StatefulSet", natsName))
	node := sts.Template.Spec.Containers[0]
	cm := m.find(t, "ConfigMap", natsName)

	if p, _, _ := node.mount("operator"); p != "/etc/nats/identity" {
		t.Errorf("operator.conf is mounted at %q; nats.conf includes identity/operator.conf next to itself (/etc/nats)", p)
	}
	if p, _, _ := node.mount("config"); p != "/etc/nats/nats.conf" || !slices.Contains(node.Command, p) {
		t.Errorf("nats.conf mounted at %q, the command is %v", p, node.Command)
	}
	t.Setenv("SERVER_NAME", natsName+"-3")
	opts := loadNATSConf(t, cm.Data["nats.conf"], nil)
	if opts.ServerName != natsName+"-3" {
		t.Errorf("server_name %q, want the pod's name", opts.ServerName)
	}
	if len(opts.TrustedOperators) != 1 || opts.SystemAccount == "" || opts.AccountResolver == nil {
		t.Errorf("not in operator mode: %d operators, system account %q", len(opts.TrustedOperators), opts.SystemAccount)
	}
	store, _, _ := node.mount("store")
	if !opts.JetStream || opts.StoreDir != store || !opts.SyncAlways {
		t.Errorf("JetStream %v in %q (the volume is at %q), sync always %v", opts.JetStream, opts.StoreDir, store, opts.SyncAlways)
	}
	if opts.MaxPayload != 8*1000*1000 && opts.MaxPayload != 8*1024*1024 {
		t.Errorf("max_payload %d, want 8MB like the embedded server", opts.MaxPayload)
	}
	if opts.LameDuckDuration != 30*time.Second {
		t.Errorf("lame_duck_duration %s, want 30s", opts.LameDuckDuration)
	}
	var routes []string
	for _, r := range opts.Routes {
		routes = append(routes, r.Host)
	}
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local:6222", natsName, i, sts.ServiceName, namespace))
	}
	if opts.Cluster.Name != "spotwise" || !slices.Equal(routes, want) {
		t.Errorf("cluster %q routes %v\nwant spotwise %v", opts.Cluster.Name, routes, want)
	}
	if pre := node.Lifecycle.PreStop.Exec.Command; !slices.Contains(pre, "ldm="+opts.PidFile) {
		t.Errorf("preStop %v does not signal lame duck mode to the pid file %s", pre, opts.PidFile)
	}
	if p, ro, _ := node.mount("pid"); p != filepath.Dir(opts.PidFile) || ro {
		t.Errorf("the pid file %s is not on the writable volume at %s", opts.PidFile, p)
	}
}

// loadNATSConf loads a rendered nats.conf in nats-server as a node would,
// beside the include `spotwise nats init` writes (with a temporary
// resolver directory), after replacing the paths in moved (a mounted
// directory -> a local one).
func loadNATSConf(t *testing.T, conf string, moved map[string]string) *server.Options {
	t.Helper()
	base := t.TempDir()
	id, err := events.LoadOrCreateIdentity(filepath.Join(base, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	// The resolver directory of the real include is checked against the
	// volume in TestChartDefaultInstall; here it must be a temporary one.
	if _, _, err := id.WriteServerConfig(filepath.Join(base, "etc", "identity"), filepath.Join(base, "jwt"), time.Now()); err != nil {
		t.Fatal(err)
	}
	for from, to := range moved {
		conf = strings.ReplaceAll(conf, from, to)
	}
	path := filepath.Join(base, "etc", "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the chart's nats.conf does not load: %v\n%s", err, conf)
	}
	return opts
}

// Optional parts: a ServiceMonitor with the metrics token, TLS on the
// API, Secrets made from values, an external NATS cluster.
func TestChartOptions(t *testing.T) {
	t.Run("service monitor and TLS", func(t *testing.T) {
		m := render(t, "serviceMonitor.enabled=true", "serviceMonitor.labels.release=kps", "tls.secretName=spotwise-tls")
		sm := m.find(t, "ServiceMonitor", release+"-spotwise")
		s := spec[serviceMonitorSpec](t, sm)
		svc := m.find(t, "Service", release+"-spotwise")
		if !subset(s.Selector.MatchLabels, svc.Metadata.Labels) || sm.Metadata.Labels["release"] != "kps" {
			t.Errorf("the ServiceMonitor does not select the API Service or lacks the Prometheus label: %+v %v", s.Selector, sm.Metadata.Labels)
		}
		e := s.Endpoints[0]
		if e.Port != "http" || e.Path != "/metrics" || e.Scheme != "https" || e.Authorization.Type != "Bearer" || e.Authorization.Credentials.Name != "spotwise-metrics-token" {
			t.Errorf("endpoint %+v: want https /metrics on port http with the metrics token", e)
		}
		srv := spec[workload](t, m.find(t, "Deployment", release+"-spotwise")).Template.Spec.Containers[0]
		cert, _ := srv.flag("tls-cert")
		if p, ro, _ := srv.mount("tls"); p == "" || !ro || !strings.HasPrefix(cert, p+"/") || srv.LivenessProbe.HTTPGet.Scheme != "HTTPS" {
			t.Errorf("--tls-cert=%s, the certificate mounted at %q, liveness scheme %s", cert, p, srv.LivenessProbe.HTTPGet.Scheme)
		}
	})

	t.Run("secrets from values", func(t *testing.T) {
		dir := t.TempDir()
		identity, operator := filepath.Join(dir, "identity.json"), filepath.Join(dir, "operator.conf")
		_ = os.WriteFile(identity, []byte(`{"operator_seed": "SO..."}`), 0o600)
		_ = os.WriteFile(operator, []byte("operator: eyJ...\n"), 0o600)
		m := render(t, "secretEnv.values.AWS_ACCESS_KEY_ID=AKIAEXAMPLE", "secretEnv.values.AWS_SECRET_ACCESS_KEY=s3cr3t",
			"--set-file=natsIdentity.identityJSON="+identity, "--set-file=natsIdentity.operatorConf="+operator)
		env := m.find(t, "Secret", release+"-spotwise-env")
		if env.StringData["AWS_SECRET_ACCESS_KEY"] != "s3cr3t" {
			t.Errorf("env Secret: %v", env.StringData)
		}
		dep := spec[workload](t, m.find(t, "Deployment", release+"-spotwise"))
		srv := dep.Template.Spec.Containers[0]
		if len(srv.EnvFrom) != 1 || srv.EnvFrom[0].SecretRef == nil || srv.EnvFrom[0].SecretRef.Name != env.Metadata.Name {
			t.Errorf("the servers do not take their environment from %s: %+v", env.Metadata.Name, srv.EnvFrom)
		}
		for _, a := range srv.Args {
			if strings.Contains(a, "s3cr3t") {
				t.Errorf("a secret on the command line: %s", a)
			}
		}
		if dep.Template.Metadata.Labels == nil || dep.Template.Spec.volume("nats-identity").Secret.SecretName != "spotwise-nats-identity" {
			t.Error("the servers do not mount the identity Secret")
		}
		for name, key := range map[string]string{"spotwise-nats-identity": identity, "spotwise-nats-operator": operator} {
			s := m.find(t, "Secret", name)
			if s.Metadata.Annotations["helm.sh/resource-policy"] != "keep" {
				t.Errorf("Secret %s would go with `helm uninstall`: the cluster's accounts are signed by it", name)
			}
			want, _ := os.ReadFile(key)
			if got, _ := base64.StdEncoding.DecodeString(s.Data[filepath.Base(key)]); !bytes.Equal(got, want) {
				t.Errorf("Secret %s holds %q under %s, want the file's %q", name, got, filepath.Base(key), want)
			}
		}
	})

	t.Run("network policy", func(t *testing.T) {
		if n := len(render(t).ofKind("NetworkPolicy")); n != 0 {
			t.Errorf("%d NetworkPolicies by default", n)
		}
		m := render(t, "networkPolicy.enabled=true", "networkPolicy.natsClientsFrom[0].ipBlock.cidr=10.20.0.0/16")
		dep := spec[workload](t, m.find(t, "Deployment", release+"-spotwise")).Template.Metadata.Labels
		nodes := spec[workload](t, m.find(t, "StatefulSet", release+"-spotwise-nats")).Template.Metadata.Labels
		np := spec[struct {
			PodSelector labelSelector `json:"podSelector"`
			Ingress     []struct {
				Ports []struct {
					Port int `json:"port"`
				} `json:"ports"`
				From []struct {
					PodSelector *labelSelector `json:"podSelector"`
					IPBlock     *struct {
						CIDR string `json:"cidr"`
					} `json:"ipBlock"`
				} `json:"from"`
			} `json:"ingress"`
		}](t, m.find(t, "NetworkPolicy", release+"-spotwise-nats"))
		if !subset(np.PodSelector.MatchLabels, nodes) || subset(np.PodSelector.MatchLabels, dep) {
			t.Fatalf("the NATS policy does not select exactly the NATS nodes: %v", np.PodSelector)
		}
		// Who may reach each port: "nats", "servers", or a CIDR.
		allowed := map[int][]string{}
		for _, rule := range np.Ingress {
			for _, p := range rule.Ports {
				for _, f := range rule.From {
					switch {
					case f.IPBlock != nil:
						allowed[p.Port] = append(allowed[p.Port], f.IPBlock.CIDR)
					case f.PodSelector != nil && subset(f.PodSelector.MatchLabels, nodes) && !subset(f.PodSelector.MatchLabels, dep):
						allowed[p.Port] = append(allowed[p.Port], "nats")
					case f.PodSelector != nil && subset(f.PodSelector.MatchLabels, dep) && !subset(f.PodSelector.MatchLabels, nodes):
						allowed[p.Port] = append(allowed[p.Port], "servers")
					default:
						allowed[p.Port] = append(allowed[p.Port], fmt.Sprintf("%+v", f))
					}
				}
			}
		}
		want := map[int][]string{6222: {"nats"}, 4222: {"servers", "10.20.0.0/16"}}
		if fmt.Sprint(allowed) != fmt.Sprint(want) {
			t.Errorf("the NATS nodes admit %v, want %v", allowed, want)
		}
		m.find(t, "NetworkPolicy", release+"-spotwise")
	})

	t.Run("NATS over TLS", func(t *testing.T) {
		m := render(t, "nats.tls.secretName=nats-tls")
		natsName := release + "-spotwise-nats"
		sts := spec[workload](t, m.find(t, "StatefulSet", natsName))
		dep := spec[workload](t, m.find(t, "Deployment", release+"-spotwise"))
		srv := dep.Template.Spec.Containers[0]
		url, _ := srv.flag("nats-url")
		if strings.Count(url, "tls://") != 3 || strings.Contains(url, "nats://") {
			t.Errorf("--nats-url=%s: want every node over tls://", url)
		}
		ca, _ := srv.env("SPOTWISE_NATS_TLS_CA")
		if p, ro, _ := srv.mount("nats-tls"); ca == "" || ca != p+"/ca.crt" || !ro {
			t.Errorf("SPOTWISE_NATS_TLS_CA=%q, the CA mounted at %q", ca, p)
		}
		if got := dep.Template.Spec.secretsMounted()["nats-tls"]; !slices.Equal(got, []string{"ca.crt"}) {
			t.Errorf("the servers mount %v of the NATS TLS Secret, want ca.crt only (not the nodes' key)", got)
		}
		if got := sts.Template.Spec.secretsMounted()["nats-tls"]; !slices.Equal(got, []string{"tls.crt", "tls.key"}) {
			t.Errorf("the nodes mount %v of the NATS TLS Secret, want tls.crt and tls.key", got)
		}
		dir, _, _ := sts.Template.Spec.Containers[0].mount("tls")
		local := t.TempDir()
		writeCert(t, filepath.Join(local, "tls.crt"), filepath.Join(local, "tls.key"))
		t.Setenv("SERVER_NAME", natsName+"-0")
		opts := loadNATSConf(t, m.find(t, "ConfigMap", natsName).Data["nats.conf"], map[string]string{dir + "/": local + "/"})
		if opts.TLSConfig == nil || len(opts.TLSConfig.Certificates) != 1 {
			t.Errorf("the nodes do not serve TLS to clients (certificate files under %s)", dir)
		}
	})

	t.Run("external NATS", func(t *testing.T) {
		m := render(t, "nats.enabled=false", "externalNATS.urls={tls://nats-a.example.com:4222,tls://nats-b.example.com:4222}", "externalNATS.replicas=5")
		if n := len(m.ofKind("StatefulSet")); n != 0 {
			t.Errorf("%d StatefulSets with nats.enabled=false", n)
		}
		srv := spec[workload](t, m.find(t, "Deployment", release+"-spotwise")).Template.Spec.Containers[0]
		url, _ := srv.flag("nats-url")
		r, _ := srv.flag("nats-replicas")
		if url != "tls://nats-a.example.com:4222,tls://nats-b.example.com:4222" || r != "5" {
			t.Errorf("--nats-url=%s --nats-replicas=%s", url, r)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, c := range []struct {
			sets []string
			want string
		}{
			{[]string{"nats.enabled=false"}, "externalNATS.urls must name the NATS cluster"},
			{[]string{"config.nats.url=nats://elsewhere:4222"}, "config.nats.url is set by the chart"},
			{[]string{"config.http_addr=:9090"}, "config.http_addr is set by the chart"},
			{[]string{"nats.replicas=1"}, "at '/nats/replicas': minimum: got 1, want 3"},
			// values.schema.json: a misspelt value is an error, not ignored.
			{[]string{"replica=3"}, "additional properties 'replica' not allowed"},
			{[]string{"nats.storage.sise=100Gi"}, "additional properties 'sise' not allowed"},
			{[]string{"externalNATS.urls={nats-a:4222}"}, "/externalNATS/urls/0"},
		} {
			args := []string{"template", release, "spotwise", "--kube-version", kubeVersion()}
			for _, s := range c.sets {
				args = append(args, "--set", s)
			}
			if _, err := helm(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: %v, want an error saying %q", c.sets, err, c.want)
			}
		}
	})
}

// checkSoftMemoryLimit fails unless a Go container with a memory limit
// has a soft one (GOMEMLIMIT) between 80% and 95% of it: under it, so the
// runtime collects before the kernel kills, and not so far under that the
// collector runs all the time.
func checkSoftMemoryLimit(t *testing.T, c container) {
	t.Helper()
	limit, ok := c.Resources.Limits["memory"]
	if !ok {
		t.Errorf("container %s has no memory limit", c.Name)
		return
	}
	soft, ok := c.env("GOMEMLIMIT")
	if !ok {
		t.Errorf("container %s has a memory limit (%s) and no GOMEMLIMIT", c.Name, limit)
		return
	}
	hard, err1 := memBytes(limit)
	goal, err2 := memBytes(soft)
	if err := errors.Join(err1, err2); err != nil {
		t.Errorf("container %s: %v", c.Name, err)
		return
	}
	if r := float64(goal) / float64(hard); r < 0.8 || r > 0.95 {
		t.Errorf("container %s: GOMEMLIMIT %s is %.0f%% of its memory limit %s, want 80-95%%", c.Name, soft, 100*r, limit)
	}
}

// memBytes reads a memory size written as Kubernetes (Mi, Gi) and
// GOMEMLIMIT (MiB, GiB) write them.
func memBytes(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"Ki", 10}, {"Mi", 20}, {"Gi", 30}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil || v <= 0 {
				return 0, fmt.Errorf("memory size %q is not a count of %s", s, u.suffix)
			}
			return v << u.shift, nil
		}
	}
	return 0, fmt.Errorf("memory size %q has no unit this test reads", s)
}
