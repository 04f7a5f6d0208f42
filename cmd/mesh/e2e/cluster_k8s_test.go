package e2e

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestClusterDeployKubernetes decodes every manifest under deploy/k8s
// strictly with the Kubernetes API types (an unknown or misspelt field
// fails) and checks them against the binary: the kustomize layout lists
// every file, a StatefulSet of three `mesh nats` servers routes to its own
// pods and keeps JetStream on a volume claim, a Deployment per role runs
// that role's subcommand with liveness on /health and readiness on /ready
// at the port it serves them on, the Secrets hold what the pods read (the
// NATS credentials exactly as `mesh creds` writes them), and the bridge
// has a Service and an Ingress.
func TestClusterDeployKubernetes(t *testing.T) {
	t.Parallel()
	cli := readMeshCLI(t)
	base := "../../../deploy/k8s/base"
	k := readKustomization(t, base)
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		if n := e.Name(); n != "kustomization.yaml" && n != secretsExample && !slices.Contains(k.Resources, n) {
			t.Errorf("%s is not in the kustomization's resources", n)
		}
	}
	o := decodeManifests(t, base, k.Resources)
	// The Secrets are created by hand before the first apply; an apply -k
	// that held them would put the example's placeholders over the values.
	if len(o.secrets) != 0 {
		t.Errorf("the kustomization's resources hold Secrets %v: kubectl apply -k would replace the operator's values", slices.Collect(maps.Keys(o.secrets)))
	}
	if slices.Contains(k.Resources, secretsExample) {
		t.Errorf("%s is among the kustomization's resources", secretsExample)
	}
	o.secrets = decodeManifests(t, base, []string{secretsExample}).secrets
	overlay := readKustomization(t, "../../../deploy/k8s/overlays/example")
	if !slices.Equal(overlay.Resources, []string{"../../base"}) {
		t.Errorf("the example overlay's resources: %v", overlay.Resources)
	}
	for _, p := range overlay.Patches {
		patch := decodeManifests(t, "../../../deploy/k8s/overlays/example", []string{p.Path})
		for name := range patch.deployments {
			if o.deployments[name] == nil {
				t.Errorf("the overlay patches Deployment %s, which the base lacks", name)
			}
		}
	}
	if len(o.namespaces) != 1 || o.namespaces[k.Namespace] == nil {
		t.Errorf("namespace %q is not defined: %v", k.Namespace, o.namespaces)
	}

	// The Secrets: what `mesh creds` writes, and the bridge's tokens.
	creds := o.secrets["mesh-nats-creds"]
	if creds == nil {
		t.Fatal("no Secret mesh-nats-creds")
	}
	var keys []string
	for key := range creds.StringData {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	if want := credsFiles(t); !slices.Equal(keys, want) {
		t.Errorf("Secret mesh-nats-creds holds %v, mesh creds writes %v", keys, want)
	}
	credsDir := imageEnv(t)["MESH_NATS_CREDS_DIR"]

	nats := o.statefulSets["nats"]
	if nats == nil || nats.Spec.Replicas == nil || *nats.Spec.Replicas != 3 {
		t.Fatalf("no StatefulSet nats of 3: %+v", nats)
	}
	c := nats.Spec.Template.Spec.Containers[0]
	cli.checkCommand(t, "StatefulSet nats", c.Args)
	env := containerEnv(t, cli, "StatefulSet nats", c, o)
	if c.Args[0] != "nats" || env["MESH_NATS_REPLICAS"] != "3" || env["MESH_NATS_ROUTES"] != "nats-0.nats:6222,nats-1.nats:6222,nats-2.nats:6222" {
		t.Errorf("the nats servers: args %v env %v", c.Args, env)
	}
	if nats.Spec.ServiceName != "nats" || o.services["nats"] == nil || o.services["nats"].Spec.ClusterIP != "None" {
		t.Error("the nats pods' names (nats-N.nats) need the headless Service nats")
	}
	if len(nats.Spec.VolumeClaimTemplates) != 1 || !mountedAt(c, nats.Spec.VolumeClaimTemplates[0].Name, "/var/lib/mesh/data") {
		t.Error("the JetStream store is not on a volume claim")
	}
	checkProbes(t, "StatefulSet nats", c, env["MESH_NATS_MONITOR_ADDR"], "/healthz", "/healthz?js-enabled-only=true")
	checkBudget(t, o, "StatefulSet nats", nats.Spec.Selector.MatchLabels)
	checkCreds(t, "StatefulSet nats", c, nats.Spec.Template.Spec.Volumes, credsDir)

	for _, role := range roleServices {
		d := o.deployments[role]
		if d == nil {
			t.Errorf("no Deployment %s", role)
			continue
		}
		where := "Deployment " + role
		c := d.Spec.Template.Spec.Containers[0]
		cli.checkCommand(t, where, c.Args)
		if len(c.Args) == 0 || c.Args[0] != role {
			t.Errorf("%s runs %v", where, c.Args)
		}
		env := containerEnv(t, cli, where, c, o)
		if !strings.Contains(env["NATS_URL"], "nats-0.nats:4222") || strings.Count(env["NATS_URL"], ",") != 2 {
			t.Errorf("%s: NATS_URL %q does not list the three servers", where, env["NATS_URL"])
		}
		addr := env["MESH_HEALTH_ADDR"]
		if role == "bridge" {
			addr = env["MESH_HTTP_ADDR"]
		}
		checkProbes(t, where, c, addr, "/health", "/ready")
		if d.Spec.Replicas != nil && *d.Spec.Replicas > 1 {
			checkBudget(t, o, where, d.Spec.Selector.MatchLabels)
		}
		checkCreds(t, where, c, d.Spec.Template.Spec.Volumes, credsDir)
	}
	svc := o.services["bridge"]
	switch {
	case svc == nil:
		t.Error("no Service for the bridge")
	case len(svc.Spec.Ports) != 1:
		t.Errorf("the bridge's Service has ports %+v, want one", svc.Spec.Ports)
	case svc.Spec.Ports[0].TargetPort.StrVal != "http":
		t.Errorf("the bridge's Service targets port %q, want http", svc.Spec.Ports[0].TargetPort.StrVal)
	case svc.Spec.Selector["app.kubernetes.io/name"] != "bridge":
		t.Errorf("the bridge's Service selects %v, want app.kubernetes.io/name bridge", svc.Spec.Selector)
	}
	ing := o.ingresses["bridge"]
	if ing == nil || ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != "bridge" {
		t.Fatalf("the bridge's Ingress: %+v", ing)
	}
	// The bridge answers the Ingress's host, not 421.
	bridgeEnv := containerEnv(t, cli, "Deployment bridge", o.deployments["bridge"].Spec.Template.Spec.Containers[0], o)
	hosts := strings.Split(bridgeEnv["MESH_HTTP_HOSTS"], ",")
	for _, r := range ing.Spec.Rules {
		if !slices.Contains(hosts, r.Host) {
			t.Errorf("the Ingress's host %s is not in the bridge's MESH_HTTP_HOSTS %q: the bridge would answer it 421", r.Host, bridgeEnv["MESH_HTTP_HOSTS"])
		}
	}
}

// secretsExample shows the Secrets the pods read; it is not a resource of
// the kustomization.
const secretsExample = "secrets.example.yaml"

func readKustomization(t *testing.T, dir string) kustomization {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("%s: %s %s", dir, k.APIVersion, k.Kind)
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("%s: resource %s: %v", dir, r, err)
		}
	}
	return k
}

// containerEnv checks c's variables and returns their literal values; a
// value from a Secret must name a key that Secret has.
func containerEnv(t *testing.T, cli meshCLI, where string, c corev1.Container, o k8sObjects) map[string]string {
	t.Helper()
	env := map[string]string{}
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
		env[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			s := o.secrets[ref.Name]
			if _, ok := s.StringData[ref.Key]; s == nil || !ok {
				t.Errorf("%s: %s reads key %s of Secret %s, which has none", where, e.Name, ref.Key, ref.Name)
			}
		}
	}
	for _, from := range c.EnvFrom {
		if from.SecretRef == nil || o.secrets[from.SecretRef.Name] == nil {
			t.Errorf("%s: envFrom %+v names no Secret of the manifests", where, from)
			continue
		}
		for k := range o.secrets[from.SecretRef.Name].StringData {
			names = append(names, k)
		}
	}
	cli.checkEnv(t, where, names)
	return env
}

// checkProbes wants liveness on live and readiness on ready, at the port
// the process listens on (addr), named by one of c's ports.
func checkProbes(t *testing.T, where string, c corev1.Container, addr, live, ready string) {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("%s: listen address %q", where, addr)
		return
	}
	want, _ := strconv.Atoi(port)
	portOf := func(name string) int32 {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		return -1
	}
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, live}, {"readiness", c.ReadinessProbe, ready}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no %s probe over HTTP", where, p.kind)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || portOf(g.Port.StrVal) != int32(want) {
			t.Errorf("%s: %s probe %s on port %q (%d), want %s on %d", where, p.kind, g.Path, g.Port.StrVal, portOf(g.Port.StrVal), p.path, want)
		}
	}
}

// checkCreds wants the Secret mesh-nats-creds mounted, read-only, where
// the image looks for the credentials, readable by the pod's group.
func checkCreds(t *testing.T, where string, c corev1.Container, vols []corev1.Volume, dir string) {
	t.Helper()
	for _, v := range vols {
		if v.Secret != nil && v.Secret.SecretName == "mesh-nats-creds" {
			if !mountedAt(c, v.Name, dir) {
				t.Errorf("%s: the credentials are not at %s", where, dir)
			}
			if m := v.Secret.DefaultMode; m == nil || *m&0o040 == 0 || *m&0o007 != 0 {
				t.Errorf("%s: credentials mode %v: the pod's group (fsGroup) must read them, others not", where, m)
			}
			return
		}
	}
	t.Errorf("%s: the Secret mesh-nats-creds is not mounted", where)
}

func mountedAt(c corev1.Container, volume, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == volume && m.MountPath == path {
			return true
		}
	}
	return false
}

// checkBudget checks that a PodDisruptionBudget lets a drain take at most
// one of the pods labelled labels at a time: a NATS cluster keeps its
// majority, and a role of two replicas keeps one serving.
func checkBudget(t *testing.T, o k8sObjects, where string, labels map[string]string) {
	t.Helper()
	for name, b := range o.budgets {
		if b.Spec.Selector != nil && maps.Equal(b.Spec.Selector.MatchLabels, labels) {
			if b.Spec.MaxUnavailable == nil || b.Spec.MaxUnavailable.IntValue() != 1 || b.Spec.MinAvailable != nil {
				t.Errorf("%s: PodDisruptionBudget %s allows %v unavailable (min available %v), want at most 1", where, name, b.Spec.MaxUnavailable, b.Spec.MinAvailable)
			}
			return
		}
	}
	t.Errorf("%s: no PodDisruptionBudget selects its pods (%v): a drain could take them all at once", where, labels)
}
