// Package helm holds the test of the weir Helm chart (deploy/helm/weir): it
// is a module of its own so that Helm's and Kubernetes' dependencies stay
// out of weir's go.mod. Run it with `cd deploy/helm && go test ./...`.
package helm

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart writes (the operator's Go types are not a dependency): decoding it
// strictly still refuses a field the chart misspells.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// objects are a rendering's objects, decoded by kind.
type objects struct {
	deployments  []appsv1.Deployment
	statefulSets []appsv1.StatefulSet
	configMaps   []corev1.ConfigMap
	secrets      []corev1.Secret
	services     []corev1.Service
	accounts     []corev1.ServiceAccount
	pdbs         []policyv1.PodDisruptionBudget
	monitors     []serviceMonitor
	raw          string // every manifest, for text searches
}

// render renders the chart with the values given over values.yaml and
// decodes every object strictly into its Kubernetes type: an unknown or
// misplaced field fails the test.
func render(t *testing.T, vals map[string]any) objects {
	t.Helper()
	out, err := renderErr(vals)
	if err != nil {
		t.Fatal(err)
	}
	var o objects
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, doc := range strings.Split(out[name], "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			o.raw += doc + "\n"
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			strict := func(v any) {
				t.Helper()
				if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
					t.Fatalf("%s: %s %s: %v\n%s", name, tm.APIVersion, tm.Kind, err, doc)
				}
			}
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				var v appsv1.Deployment
				strict(&v)
				o.deployments = append(o.deployments, v)
			case "apps/v1 StatefulSet":
				var v appsv1.StatefulSet
				strict(&v)
				o.statefulSets = append(o.statefulSets, v)
			case "v1 ConfigMap":
				var v corev1.ConfigMap
				strict(&v)
				o.configMaps = append(o.configMaps, v)
			case "v1 Secret":
				var v corev1.Secret
				strict(&v)
				o.secrets = append(o.secrets, v)
			case "v1 Service":
				var v corev1.Service
				strict(&v)
				o.services = append(o.services, v)
			case "v1 ServiceAccount":
				var v corev1.ServiceAccount
				strict(&v)
				o.accounts = append(o.accounts, v)
			case "policy/v1 PodDisruptionBudget":
				var v policyv1.PodDisruptionBudget
				strict(&v)
				o.pdbs = append(o.pdbs, v)
			case "monitoring.coreos.com/v1 ServiceMonitor":
				var v serviceMonitor
				strict(&v)
				o.monitors = append(o.monitors, v)
			default:
				t.Fatalf("%s: unexpected object %s %s", name, tm.APIVersion, tm.Kind)
			}
		}
	}
	return o
}

func renderErr(vals map[string]any) (map[string]string, error) {
	chrt, err := loader.Load("weir")
	if err != nil {
		return nil, err
	}
	rv, err := util.ToRenderValues(chrt, vals, common.ReleaseOptions{Name: "orders", Namespace: "streams", IsInstall: true, Revision: 1}, nil)
	if err != nil {
		return nil, err
	}
	return engine.Render(chrt, rv)
}

func stripComments(doc string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// pod is the pod template of the one workload.
func (o objects) pod(t *testing.T) corev1.PodSpec {
	t.Helper()
	switch {
	case len(o.deployments) == 1 && len(o.statefulSets) == 0:
		return o.deployments[0].Spec.Template.Spec
	case len(o.statefulSets) == 1 && len(o.deployments) == 0:
		return o.statefulSets[0].Spec.Template.Spec
	}
	t.Fatalf("want one Deployment or StatefulSet, got %d and %d", len(o.deployments), len(o.statefulSets))
	return corev1.PodSpec{}
}

// flag is the value after name in args ("" and false if absent).
func flag(args []string, name string) (string, bool) {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

// checkPod asserts what every rendering's pod must hold: probes on the
// health endpoints of the port --health-addr serves, secrets referenced
// (never a literal), non-root with a read-only root filesystem, the
// pipeline file from the ConfigMap, a grace period for the savepoint.
func checkPod(t *testing.T, o objects, grace int64) corev1.Container {
	t.Helper()
	p := o.pod(t)
	if len(p.Containers) != 1 {
		t.Fatalf("containers: %d, want 1", len(p.Containers))
	}
	c := p.Containers[0]
	if c.Args[0] != "run" || c.Args[1] != "/etc/weir/pipeline.yaml" {
		t.Errorf("args %q: want run /etc/weir/pipeline.yaml ...", c.Args)
	}
	addr, _ := flag(c.Args, "--health-addr")
	var healthPort int32
	for _, cp := range c.Ports {
		if cp.Name == "health" {
			healthPort = cp.ContainerPort
		}
	}
	if want := fmt.Sprintf("0.0.0.0:%d", healthPort); healthPort == 0 || addr != want {
		t.Errorf("--health-addr %q, health port %d: want them to agree", addr, healthPort)
	}
	for _, pr := range []struct {
		name string
		p    *corev1.Probe
		path string
	}{{"startup", c.StartupProbe, "/healthz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if pr.p == nil || pr.p.HTTPGet == nil {
			t.Errorf("%s probe: missing or not HTTP", pr.name)
			continue
		}
		if pr.p.HTTPGet.Path != pr.path || pr.p.HTTPGet.Port.String() != "health" {
			t.Errorf("%s probe: %s on port %s, want %s on the health port", pr.name, pr.p.HTTPGet.Path, pr.p.HTTPGet.Port.String(), pr.path)
		}
	}
	if p.TerminationGracePeriodSeconds == nil || *p.TerminationGracePeriodSeconds != grace {
		t.Errorf("terminationGracePeriodSeconds %v, want %d", p.TerminationGracePeriodSeconds, grace)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v: want a read-only root filesystem, no privilege escalation", sc)
	}
	if ps := p.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v: want non-root 65532", ps)
	}
	// The pipeline file comes from the ConfigMap, read-only.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if m, ok := mounts["/etc/weir/pipeline.yaml"]; !ok || !m.ReadOnly || m.SubPath != "pipeline.yaml" {
		t.Errorf("pipeline mount %+v: want /etc/weir/pipeline.yaml read-only from the ConfigMap", m)
	}
	if _, ok := mounts["/var/lib/weir"]; !ok {
		t.Error("no volume at /var/lib/weir")
	}
	if _, ok := mounts["/tmp"]; !ok {
		t.Error("no writable /tmp under a read-only root filesystem")
	}
	for _, v := range p.Volumes {
		if v.Name == "pipeline" && (v.ConfigMap == nil || v.ConfigMap.Name != o.configMaps[0].Name) {
			t.Errorf("volume pipeline %+v: want the ConfigMap %s", v, o.configMaps[0].Name)
		}
	}
	// No environment variable carries a literal secret.
	for _, e := range c.Env {
		if e.Value != "" && strings.Contains(strings.ToLower(e.Name), "password") {
			t.Errorf("env %s is a literal: want a reference to a Secret", e.Name)
		}
	}
	return c
}

const pipelineWithSecretRefs = `name: orders
job:
  checkpoint: {interval: 10s, dir: "${WEIR_CHECKPOINT_DIR}"}
kafka:
  brokers: ["${KAFKA_BROKERS}"]
  sasl: {mechanism: SCRAM-SHA-512, username: "${KAFKA_USER}", password: "${KAFKA_PASSWORD}"}
source:
  kafka: {topics: [orders]}
steps:
  - filter: amount > 0
sink:
  kafka: {topic: out, delivery: exactly-once}
`

// TestJobDefaults: a memory-backend job is a Deployment of one pod that is
// never two (Recreate), with no group flags and no volume claim.
func TestJobDefaults(t *testing.T) {
	o := render(t, nil)
	if len(o.deployments) != 1 || len(o.statefulSets) != 0 {
		t.Fatalf("deployments %d statefulsets %d: want one Deployment", len(o.deployments), len(o.statefulSets))
	}
	d := o.deployments[0]
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1", d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %q: want Recreate (never two copies of one job)", d.Spec.Strategy.Type)
	}
	c := checkPod(t, o, 120)
	for _, f := range []string{"--group", "--member", "--static-membership=true", "--ui-addr"} {
		if slices.Contains(c.Args, f) {
			t.Errorf("args %q hold %s: not in job mode by default", c.Args, f)
		}
	}
	if len(o.secrets) != 0 || c.EnvFrom != nil {
		t.Errorf("secrets %d envFrom %v: want none without secrets values", len(o.secrets), c.EnvFrom)
	}
	if len(o.pdbs) != 1 || o.pdbs[0].Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget: %+v", o.pdbs)
	}
	if len(o.monitors) != 0 {
		t.Error("ServiceMonitor rendered although not enabled")
	}
	if got := o.configMaps[0].Data["pipeline.yaml"]; !strings.Contains(got, "name: example") {
		t.Errorf("ConfigMap pipeline.yaml: %q", got)
	}
}

// TestJobPebbleSecrets: a Pebble job is a StatefulSet of one with a volume
// claim at /var/lib/weir; the secret values land in a Secret the pod reads
// by reference, never in the ConfigMap or the pod spec.
func TestJobPebbleSecrets(t *testing.T) {
	const password = "s3cr3t-pa55word"
	o := render(t, map[string]any{
		"pipeline":                      pipelineWithSecretRefs,
		"checkpointURL":                 "s3://bucket/orders",
		"state":                         map[string]any{"backend": "pebble", "size": "50Gi", "storageClassName": "fast"},
		"secrets":                       map[string]any{"values": map[string]any{"KAFKA_USER": "weir", "KAFKA_PASSWORD": password, "KAFKA_BROKERS": "kafka:9092"}},
		"dashboard":                     map[string]any{"enabled": true},
		"terminationGracePeriodSeconds": 300,
	})
	if len(o.statefulSets) != 1 {
		t.Fatalf("statefulsets %d: want one for a Pebble job", len(o.statefulSets))
	}
	s := o.statefulSets[0]
	if s.Spec.Replicas == nil || *s.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1", s.Spec.Replicas)
	}
	if len(s.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("volumeClaimTemplates: %d, want 1", len(s.Spec.VolumeClaimTemplates))
	}
	pvc := s.Spec.VolumeClaimTemplates[0]
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; pvc.Name != "data" || q.String() != "50Gi" || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "fast" {
		t.Errorf("claim %s %s %v: want data 50Gi fast", pvc.Name, q.String(), pvc.Spec.StorageClassName)
	}
	for _, v := range s.Spec.Template.Spec.Volumes {
		if v.Name == "data" {
			t.Errorf("volume data %+v in the pod: the claim template must provide it", v)
		}
	}
	c := checkPod(t, o, 300)
	if strings.Contains(o.configMaps[0].Data["pipeline.yaml"], password) || strings.Contains(o.raw, password) {
		t.Error("the password appears in clear in the rendering")
	}
	if len(o.secrets) != 1 || string(o.secrets[0].Data["KAFKA_PASSWORD"]) != password {
		t.Fatalf("Secret: %+v", o.secrets)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != o.secrets[0].Name {
		t.Errorf("envFrom %+v: want the Secret %s", c.EnvFrom, o.secrets[0].Name)
	}
	if addr, _ := flag(c.Args, "--ui-addr"); addr != "0.0.0.0:8080" {
		t.Errorf("--ui-addr %q with the dashboard on", addr)
	}
	var ckpt string
	for _, e := range c.Env {
		if e.Name == "WEIR_CHECKPOINT_DIR" {
			ckpt = e.Value
		}
	}
	if ckpt != "s3://bucket/orders" {
		t.Errorf("WEIR_CHECKPOINT_DIR %q", ckpt)
	}
}

// TestGroup: group mode is a StatefulSet of N members, each started with
// its pod's name as member id (downward API), one group, the object-store
// checkpoint URL and static membership; an existing Secret is referenced.
func TestGroup(t *testing.T) {
	o := render(t, map[string]any{
		"mode":                "group",
		"replicas":            5,
		"checkpointURL":       "gs://bucket/orders",
		"group":               map[string]any{"name": "order-totals", "sessionTimeout": "30s"},
		"secrets":             map[string]any{"existingSecret": "kafka-credentials", "filesSecret": "kafka-tls"},
		"metrics":             map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}}},
		"podDisruptionBudget": map[string]any{"maxUnavailable": 2},
	})
	if len(o.statefulSets) != 1 {
		t.Fatalf("statefulsets %d: want one in group mode", len(o.statefulSets))
	}
	s := o.statefulSets[0]
	if s.Spec.Replicas == nil || *s.Spec.Replicas != 5 {
		t.Errorf("replicas %v, want 5", s.Spec.Replicas)
	}
	if s.Spec.ServiceName != o.services[0].Name || o.services[0].Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("serviceName %q: want the headless service %s", s.Spec.ServiceName, o.services[0].Name)
	}
	if len(s.Spec.VolumeClaimTemplates) != 0 {
		t.Error("a claim in group mode with the memory backend")
	}
	c := checkPod(t, o, 120)
	for f, want := range map[string]string{"--group": "order-totals", "--member": "$(POD_NAME)", "--checkpoint-dir": "gs://bucket/orders", "--session-timeout": "30s"} {
		if got, _ := flag(c.Args, f); got != want {
			t.Errorf("%s %q, want %q (args %q)", f, got, want, c.Args)
		}
	}
	if !slices.Contains(c.Args, "--static-membership=true") {
		t.Errorf("args %q: want --static-membership=true", c.Args)
	}
	// $(POD_NAME) is expanded by the kubelet from an env var defined
	// before use, from the pod's own name.
	var podName *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "POD_NAME" {
			podName = &c.Env[i]
		}
	}
	if podName == nil || podName.ValueFrom == nil || podName.ValueFrom.FieldRef == nil || podName.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Fatalf("POD_NAME %+v: want the downward API's metadata.name", podName)
	}
	if len(o.secrets) != 0 {
		t.Error("a Secret created although existingSecret is given")
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "kafka-credentials" {
		t.Errorf("envFrom %+v: want kafka-credentials", c.EnvFrom)
	}
	var tls bool
	for _, v := range s.Spec.Template.Spec.Volumes {
		tls = tls || (v.Secret != nil && v.Secret.SecretName == "kafka-tls")
	}
	if !tls {
		t.Error("filesSecret kafka-tls not mounted")
	}
	if len(o.pdbs) != 1 || o.pdbs[0].Spec.MaxUnavailable.IntValue() != 2 {
		t.Errorf("PodDisruptionBudget %+v", o.pdbs)
	}
	if len(o.monitors) != 1 || o.monitors[0].Spec.Endpoints[0].Port != "metrics" || o.monitors[0].Labels["release"] != "prom" {
		t.Errorf("ServiceMonitor %+v", o.monitors)
	}
}

// TestRefused: values the chart cannot honour fail the rendering with one
// line naming the value and what is accepted.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"mode": "cluster"}, `mode "cluster": want job or group`},
		{map[string]any{"state": map[string]any{"backend": "rocksdb"}}, `state.backend "rocksdb": want memory or pebble`},
		{map[string]any{"mode": "group"}, "mode group needs checkpointURL"},
		{map[string]any{"mode": "group", "checkpointURL": "s3://b/p", "replicas": 0}, "replicas 0: want an integer >= 1"},
	} {
		_, err := renderErr(tc.vals)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.vals, err, tc.want)
		}
	}
}
