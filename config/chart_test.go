package config_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/release"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/longhorn/diskschedule/internal/podmutator"
	"github.com/longhorn/diskschedule/test/framework/schedulerconfig"
)

// chartDir is the Helm chart, relative to this package.
const chartDir = "../dist/chart"

// kubeVersion is the Kubernetes version the chart is rendered for: the
// test control plane's (Helm's SDK would otherwise assume v1.20).
var kubeVersion = mustKubeVersion("v1.36.3")

func mustKubeVersion(v string) *chartutil.KubeVersion {
	kv, err := chartutil.ParseKubeVersion(v)
	if err != nil {
		panic(err)
	}
	return kv
}

// helmLabels are the labels the chart adds to every object's metadata for
// Helm's own tools; config/default has none of them. They are the only
// difference the chart may have from config/default, with the CRD's
// helm.sh/resource-policy annotation (crd.keep).
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// renderChart renders the chart as `helm template --namespace ns` does,
// with vals over values.yaml, without its hooks.
func renderChart(ns string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	rel, err := renderRelease(ns, vals)
	if err != nil {
		return nil, err
	}
	return decodeManifests([]byte(rel.Manifest))
}

// renderHooks renders the chart's hooks as `helm template --namespace ns`
// does, with vals over values.yaml.
func renderHooks(ns string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	rel, err := renderRelease(ns, vals)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, h := range rel.Hooks {
		objs, err := decodeManifests([]byte(h.Manifest))
		if err != nil {
			return nil, fmt.Errorf("decoding hook %s: %w", h.Path, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// renderRelease renders the chart into a release without installing it.
func renderRelease(ns string, vals map[string]any) (*release.Release, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.ClientOnly, install.DryRun = true, true
	install.ReleaseName, install.Namespace, install.KubeVersion = "diskschedule", ns, kubeVersion
	return install.Run(chrt, vals)
}

func mustRenderChart(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderChart(namespace, vals)
	if err != nil {
		t.Fatalf("rendering the chart with %v: %v", vals, err)
	}
	return objs
}

// renderKustomization returns what `kustomize build dir` renders.
func renderKustomization(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	data, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeManifests(data)
	if err != nil {
		t.Fatalf("decoding kustomize build %s: %v", dir, err)
	}
	return objs
}

// decodeManifests decodes a stream of YAML documents, skipping empty ones;
// integers decode as int64, as the API machinery reads them.
func decodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if string(js) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
}

// key names an object: kind, namespace and name.
func key(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// withoutHelmMetadata returns u without what the chart adds for Helm alone.
func withoutHelmMetadata(u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	labels := u.GetLabels()
	for _, l := range helmLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		labels = nil
	}
	u.SetLabels(labels)
	annotations := u.GetAnnotations()
	delete(annotations, "helm.sh/resource-policy")
	if len(annotations) == 0 {
		annotations = nil
	}
	u.SetAnnotations(annotations)
	return u
}

// sameObjects fails the test for every object that chart and kustomize do
// not both render, or render differently (after withoutHelmMetadata).
func sameObjects(t *testing.T, chart, kustomized []*unstructured.Unstructured, context string) {
	t.Helper()
	want := map[string]*unstructured.Unstructured{}
	for _, u := range kustomized {
		want[key(u)] = u
	}
	got := map[string]*unstructured.Unstructured{}
	for _, u := range chart {
		if _, dup := got[key(u)]; dup {
			t.Errorf("%s: the chart renders %s twice", context, key(u))
		}
		got[key(u)] = withoutHelmMetadata(u)
		for _, l := range helmLabels {
			if _, ok := u.GetLabels()[l]; !ok {
				t.Errorf("%s: the chart's %s lacks the label %s", context, key(u), l)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: config renders %s, the chart does not", context, k)
			continue
		}
		if diff := cmp.Diff(want[k].Object, g.Object); diff != "" {
			t.Errorf("%s: the chart's %s differs from config's (-config +chart):\n%s", context, k, diff)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: the chart renders %s, config does not", context, k)
		}
	}
}

// TestChartMatchesConfig renders the chart (dist/chart) with its default
// values, with gate.failurePolicy=Ignore and with scheduler.enabled=true,
// and checks that it holds the very objects of config/default, of
// config/default with the component webhook/ignore and of config/default
// with the component scheduler/secondary: names, kinds and every field, the
// Helm labels aside.
func TestChartMatchesConfig(t *testing.T) {
	sameObjects(t, mustRenderChart(t, nil), renderKustomization(t, "default"), "default values")
	sameObjects(t, mustRenderChart(t, map[string]any{"gate": map[string]any{"failurePolicy": "Ignore"}}),
		renderKustomization(t, "testdata/gate-ignore"), "gate.failurePolicy=Ignore")
	sameObjects(t, mustRenderChart(t, map[string]any{"scheduler": map[string]any{"enabled": true}}),
		renderKustomization(t, "testdata/secondary-scheduler"), "scheduler.enabled=true")
}

// TestChartFilesMatchConfig checks that the files the chart's templates read
// are config's own, as `make chart` copies them.
func TestChartFilesMatchConfig(t *testing.T) {
	for chartFile, configFile := range map[string]string{
		"files/longhorn.io_diskschedules.yaml": "crd/bases/longhorn.io_diskschedules.yaml",
		"files/role.yaml":                      "rbac/role.yaml",
		"files/gate.yaml":                      "webhook/manifests.yaml",
		"files/pods.yaml":                      "webhook/pods.yaml",
		"files/secondary-scheduler.yaml":       "scheduler/secondary/kube-scheduler-config.yaml",
		"files/diskschedule.rules.yaml":        "prometheus/diskschedule.rules.yaml",
		"files/diskschedule-dashboard.json":    "grafana/diskschedule-dashboard.json",
	} {
		got, err := os.ReadFile(filepath.Join(chartDir, chartFile))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(configFile)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("dist/chart/%s differs from config/%s: run make chart", chartFile, configFile)
		}
	}
}

// TestChartMonitoring renders the chart's optional monitoring objects: the
// ServiceMonitor is config/prometheus's, the PrometheusRule holds the groups
// of the plain rules file, the dashboard ConfigMap config/grafana's
// dashboard.
func TestChartMonitoring(t *testing.T) {
	objs := mustRenderChart(t, map[string]any{"prometheus": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}},
	}})
	var monitors, rules []*unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "ServiceMonitor":
			monitors = append(monitors, u)
		case "PrometheusRule":
			rules = append(rules, u)
		}
	}
	sameObjects(t, monitors, renderKustomization(t, "prometheus"), "prometheus.serviceMonitor.enabled")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules, want one", len(rules))
	}
	if got := rules[0].GetLabels()["release"]; got != "kube-prometheus-stack" {
		t.Errorf("the PrometheusRule's label release = %q, want prometheus.prometheusRule.labels'", got)
	}
	data, err := os.ReadFile("prometheus/diskschedule.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(rules[0].Object, "spec")
	if diff := cmp.Diff(file, spec, cmp.Transformer("int64", func(i int64) float64 { return float64(i) })); diff != "" {
		t.Errorf("the PrometheusRule's spec differs from config/prometheus/diskschedule.rules.yaml (-file +chart):\n%s", diff)
	}
	dashboards := mustRenderChart(t, map[string]any{"grafana": map[string]any{"dashboard": map[string]any{"enabled": true}}})
	dashboard, err := os.ReadFile("grafana/diskschedule-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, u := range dashboards {
		if u.GetKind() == "ConfigMap" && u.GetName() == "longhorn-diskschedule-dashboard" {
			found = true
			got, _, _ := unstructured.NestedString(u.Object, "data", "diskschedule-dashboard.json")
			if got != strings.TrimSuffix(string(dashboard), "\n") || u.GetLabels()["grafana_dashboard"] != "1" {
				t.Errorf("the dashboard ConfigMap holds another dashboard, or lacks the label grafana_dashboard: %v", u.GetLabels())
			}
		}
	}
	if !found {
		t.Errorf("grafana.dashboard.enabled renders no ConfigMap longhorn-diskschedule-dashboard")
	}
	for _, u := range mustRenderChart(t, nil) {
		if k := u.GetKind(); k == "ServiceMonitor" || k == "PrometheusRule" || k == "ConfigMap" && u.GetName() != "diskschedule-config" {
			t.Errorf("the default values render %s, which needs its value enabled", key(u))
		}
	}
}

// TestChartValues checks what the chart's values change.
func TestChartValues(t *testing.T) {
	objs := mustRenderChart(t, map[string]any{
		"image":    map[string]any{"repository": "registry.example.com/diskschedule", "tag": "v0.1.0", "pullPolicy": "IfNotPresent"},
		"manager":  map[string]any{"replicas": 3, "extraArgs": []any{"--gate-timeout=6s"}},
		"gate":     map[string]any{"timeoutSeconds": 12},
		"extender": map[string]any{"enabled": false, "podSchedulingTimeout": 0, "nodeReservationTimeout": 30},
		"metrics":  map[string]any{"readers": []any{map[string]any{"name": "prometheus-k8s", "namespace": "monitoring"}}},
		"crd":      map[string]any{"keep": false},
	})
	find := func(kind, name string) *unstructured.Unstructured {
		t.Helper()
		for _, u := range objs {
			if u.GetKind() == kind && u.GetName() == name {
				return u
			}
		}
		t.Fatalf("the chart renders no %s %s", kind, name)
		return nil
	}
	for _, c := range []struct {
		obj  *unstructured.Unstructured
		path []string
		want any
	}{
		{find("Deployment", "longhorn-diskschedule-controller-manager"), []string{"spec", "replicas"}, int64(3)},
		{find("ConfigMap", "diskschedule-config"), []string{"data", "scheduler-extender-enabled"}, "false"},
		{find("ConfigMap", "diskschedule-config"), []string{"data", "scheduler-extender-pod-scheduling-timeout"}, "0"},
		{find("ConfigMap", "diskschedule-config"), []string{"data", "scheduler-extender-node-reservation-timeout"}, "30"},
		{find("ClusterRoleBinding", "longhorn-diskschedule-metrics-reader-rolebinding"), []string{"roleRef", "name"}, "longhorn-diskschedule-metrics-reader"},
	} {
		got, _, err := unstructured.NestedFieldNoCopy(c.obj.Object, c.path...)
		if err != nil || got != c.want {
			t.Errorf("%s %s: %v = %v (%v), want %v", c.obj.GetKind(), c.obj.GetName(), c.path, got, err, c.want)
		}
	}
	containers, _, _ := unstructured.NestedSlice(find("Deployment", "longhorn-diskschedule-controller-manager").Object, "spec", "template", "spec", "containers")
	mgr := containers[0].(map[string]any)
	if mgr["image"] != "registry.example.com/diskschedule:v0.1.0" || mgr["imagePullPolicy"] != "IfNotPresent" {
		t.Errorf("the manager's image %v, pull policy %v", mgr["image"], mgr["imagePullPolicy"])
	}
	if args := mgr["args"].([]any); args[len(args)-1] != "--gate-timeout=6s" {
		t.Errorf("the manager's args %v do not end with manager.extraArgs", args)
	}
	webhooks, _, _ := unstructured.NestedSlice(find("ValidatingWebhookConfiguration", "diskschedule-gate").Object, "webhooks")
	for _, wh := range webhooks {
		if s := wh.(map[string]any)["timeoutSeconds"]; s != int64(12) {
			t.Errorf("webhook %v: timeoutSeconds %v, want 12", wh.(map[string]any)["name"], s)
		}
	}
	if _, keep := find("CustomResourceDefinition", "diskschedules.longhorn.io").GetAnnotations()["helm.sh/resource-policy"]; keep {
		t.Errorf("crd.keep=false still keeps the CRD on uninstall")
	}
	for _, u := range mustRenderChart(t, map[string]any{"manager": map[string]any{"replicas": 1}}) {
		if u.GetKind() == "PodDisruptionBudget" {
			t.Errorf("manager.replicas=1 renders %s, which would block every drain", key(u))
		}
	}
	if _, err := renderChart(namespace, map[string]any{"gate": map[string]any{"failurePolicy": "Never"}}); err == nil {
		t.Errorf("gate.failurePolicy=Never rendered: values.schema.json lets it through")
	}
}

// TestChartSchedulerImage checks the second scheduler's image:
// kube-scheduler with the diskschedule plugin, at the manager's tag unless
// scheduler.image.tag says otherwise.
func TestChartSchedulerImage(t *testing.T) {
	for _, c := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{}, "diskschedule-scheduler:latest"},
		{map[string]any{"image": map[string]any{"repository": "registry.example.com/diskschedule", "tag": "v0.1.0"},
			"scheduler": map[string]any{"image": map[string]any{"repository": "registry.example.com/diskschedule-scheduler"}}},
			"registry.example.com/diskschedule-scheduler:v0.1.0"},
		{map[string]any{"image": map[string]any{"tag": "v0.1.0"}, "scheduler": map[string]any{"image": map[string]any{"tag": "v0.1.1"}}},
			"diskschedule-scheduler:v0.1.1"},
	} {
		vals := c.vals
		scheduler, _ := vals["scheduler"].(map[string]any)
		if scheduler == nil {
			scheduler = map[string]any{}
			vals["scheduler"] = scheduler
		}
		scheduler["enabled"] = true
		var image string
		for _, u := range mustRenderChart(t, vals) {
			if u.GetKind() == "Deployment" && u.GetName() == "longhorn-diskschedule-scheduler" {
				containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				image, _ = containers[0].(map[string]any)["image"].(string)
			}
		}
		if image != c.want {
			t.Errorf("values %v: image %q, want %s", c.vals, image, c.want)
		}
	}
}

// TestChartRefuses checks that the chart fails to render, saying why, when
// told to install Longhorn's CRDs or to install outside Longhorn's namespace.
func TestChartRefuses(t *testing.T) {
	for _, c := range []struct {
		name, ns string
		vals     map[string]any
		want     string
	}{
		{"Longhorn's CRDs", namespace, map[string]any{"longhorn": map[string]any{"installCRDs": true}},
			"never installs Longhorn's CRDs"},
		{"another namespace", "default", nil,
			`installs into Longhorn's namespace "longhorn-system", not "default": run helm install with --namespace longhorn-system`},
		{"a namespace that is not Longhorn's", "storage", map[string]any{"longhorn": map[string]any{"namespace": "longhorn"}},
			`installs into Longhorn's namespace "longhorn", not "storage"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := renderChart(c.ns, c.vals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("rendering into %s with %v: %v, want an error saying %q", c.ns, c.vals, err, c.want)
			}
		})
	}
	// Longhorn in another namespace: the chart installs there, and
	// everything namespaced, the gate's Service and selector follow.
	objs, err := renderChart("longhorn", map[string]any{"longhorn": map[string]any{"namespace": "longhorn"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetNamespace() != "" && u.GetNamespace() != "longhorn" {
			t.Errorf("%s is in namespace %s, want longhorn", key(u), u.GetNamespace())
		}
		if u.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		webhooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for _, wh := range webhooks {
			svcNS, _, _ := unstructured.NestedString(wh.(map[string]any), "clientConfig", "service", "namespace")
			selected, _, _ := unstructured.NestedString(wh.(map[string]any), "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name")
			if svcNS != "longhorn" || selected != "longhorn" {
				t.Errorf("webhook %v calls a Service in %q and selects namespace %q, want longhorn", wh.(map[string]any)["name"], svcNS, selected)
			}
		}
	}
}

// TestChartLint runs `helm lint --strict` on the chart through Helm's SDK.
func TestChartLint(t *testing.T) {
	lint := action.NewLint()
	lint.Strict, lint.Namespace, lint.KubeVersion = true, namespace, kubeVersion
	for _, vals := range []map[string]any{nil, {"gate": map[string]any{"failurePolicy": "Ignore"}}, {"scheduler": map[string]any{"enabled": true}}} {
		result := lint.Run([]string{chartDir}, vals)
		for _, err := range result.Errors {
			t.Errorf("helm lint with %v: %v", vals, err)
		}
		for _, m := range result.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint with %v: %s", vals, m)
			}
		}
	}
}

// TestChartInstalls applies the chart server-side, as helm install does,
// into an API server that serves Longhorn v1.12.0's own CRDs and nothing of
// the add-on, then upgrades it to gate.failurePolicy=Ignore and to
// scheduler.enabled=true, and checks each time that the API server holds
// config's objects: every name and kind, the RBAC rules, the gate's webhooks
// with their rules and matchConditions. With the second scheduler, the
// configuration it runs, as the API server holds it, is the one the sandbox
// runs (checkSecondaryScheduler).
func TestChartInstalls(t *testing.T) {
	_, cfg := startLonghornAPIServer(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	for _, step := range []struct {
		name, config string
		vals         map[string]any
	}{
		{"install", "default", nil},
		{"upgrade to failurePolicy=Ignore", "testdata/gate-ignore", map[string]any{"gate": map[string]any{"failurePolicy": "Ignore"}}},
		{"upgrade to scheduler.enabled=true", "testdata/secondary-scheduler", map[string]any{"scheduler": map[string]any{"enabled": true}}},
	} {
		for _, u := range mustRenderChart(t, step.vals) {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
				t.Fatalf("%s: applying %s: %v", step.name, key(u), err)
			}
		}
		for _, want := range renderKustomization(t, step.config) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(want.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
				t.Errorf("%s: the API server does not hold config's %s: %v", step.name, key(want), err)
				continue
			}
			switch want.GetKind() {
			case "ClusterRole", "Role":
				if g, w := decodeAs[rbacv1.ClusterRole](t, got).Rules, decodeAs[rbacv1.ClusterRole](t, want).Rules; !cmp.Equal(g, w) {
					t.Errorf("%s: %s rules differ (-config +installed):\n%s", step.name, key(want), cmp.Diff(w, g))
				}
			case "ClusterRoleBinding", "RoleBinding":
				g, w := decodeAs[rbacv1.RoleBinding](t, got), decodeAs[rbacv1.RoleBinding](t, want)
				if !cmp.Equal(g.RoleRef, w.RoleRef) || !cmp.Equal(g.Subjects, w.Subjects) {
					t.Errorf("%s: %s binds %v to %v, config binds %v to %v", step.name, key(want), g.Subjects, g.RoleRef, w.Subjects, w.RoleRef)
				}
			case "ValidatingWebhookConfiguration":
				sameWebhooks(t, step.name, decodeAs[admissionregistrationv1.ValidatingWebhookConfiguration](t, got),
					decodeAs[admissionregistrationv1.ValidatingWebhookConfiguration](t, want))
			case "MutatingWebhookConfiguration":
				g, w := decodeAs[admissionregistrationv1.MutatingWebhookConfiguration](t, got), decodeAs[admissionregistrationv1.MutatingWebhookConfiguration](t, want)
				if len(g.Webhooks) != 1 || len(w.Webhooks) != 1 || !cmp.Equal(g.Webhooks[0].NamespaceSelector, w.Webhooks[0].NamespaceSelector) ||
					!cmp.Equal(g.Webhooks[0].ObjectSelector, w.Webhooks[0].ObjectSelector) || !cmp.Equal(g.Webhooks[0].MatchConditions, w.Webhooks[0].MatchConditions) ||
					!cmp.Equal(g.Webhooks[0].FailurePolicy, w.Webhooks[0].FailurePolicy) || !cmp.Equal(g.Webhooks[0].ClientConfig.Service, w.Webhooks[0].ClientConfig.Service) {
					t.Errorf("%s: %s differs (-config +installed):\n%s", step.name, key(want), cmp.Diff(w.Webhooks, g.Webhooks))
				}
			}
		}
	}
	checkSecondaryScheduler(ctx, t, c)
}

// checkSecondaryScheduler reads the second scheduler's configuration from
// the ConfigMap the chart installed and checks it against what the sandbox
// runs (schedulerconfig.Local, the sandbox's --secondary-scheduler): the
// same profile, diskschedule-scheduler, the pod webhook's scheduler name,
// with the diskschedule plugin following the release's namespace; the same
// leader election, on a lease the chart's Role lets it renew. The
// Deployment runs that configuration, and its ServiceAccount may do what
// the plugin and kube-scheduler do (kube-apiserver's own answer, a
// SubjectAccessReview). The ClusterRoles it is bound to are the API
// server's own.
func checkSecondaryScheduler(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "longhorn-diskschedule-scheduler-config"}, cm); err != nil {
		t.Fatalf("the second scheduler's ConfigMap: %v", err)
	}
	installed, err := schedulerconfig.Parse([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatalf("the installed configuration: %v", err)
	}
	sandbox, err := schedulerconfig.Local("/sandbox/kube-scheduler.kubeconfig", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(installed.Profiles[0].SchedulerName, ""); got != podmutator.SchedulerName || got != ptr.Deref(sandbox.Profiles[0].SchedulerName, "") {
		t.Errorf("the installed profile is %q, the sandbox's %q; want %s", got, ptr.Deref(sandbox.Profiles[0].SchedulerName, ""), podmutator.SchedulerName)
	}
	if args, err := schedulerconfig.PluginArgs(installed); err != nil || args.Namespace != namespace {
		t.Errorf("the installed plugin follows namespace %q (%v), want the release's %s", args.Namespace, err, namespace)
	}
	if diff := cmp.Diff(sandbox.Profiles, installed.Profiles); diff != "" {
		t.Errorf("the installed profiles differ from the sandbox's (-sandbox +installed):\n%s", diff)
	}
	if diff := cmp.Diff(sandbox.LeaderElection, installed.LeaderElection); diff != "" {
		t.Errorf("the installed leader election differs from the sandbox's (-sandbox +installed):\n%s", diff)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "longhorn-diskschedule-scheduler"}, d); err != nil {
		t.Fatalf("the second scheduler's Deployment: %v", err)
	}
	checkSchedulerRunsConfig(t, d.Spec.Template.Spec, cm.Name)
	role := &rbacv1.Role{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "longhorn-diskschedule-scheduler-lease"}, role); err != nil {
		t.Fatalf("the second scheduler's lease Role: %v", err)
	}
	if le := installed.LeaderElection; le.ResourceNamespace != namespace || len(role.Rules) != 1 || !slices.Equal(role.Rules[0].ResourceNames, []string{le.ResourceName}) {
		t.Errorf("the scheduler elects its leader on lease %s/%s; the Role grants %v in %s", le.ResourceNamespace, le.ResourceName, role.Rules, namespace)
	}
	for _, name := range []string{"system:kube-scheduler", "system:volume-scheduler"} {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{}); err != nil {
			t.Errorf("the ClusterRole %s the second scheduler is bound to: %v", name, err)
		}
	}
	checkSchedulerMay(ctx, t, c, d.Spec.Template.Spec.ServiceAccountName)
}

// checkSchedulerRunsConfig checks that the second scheduler's container is
// started with --config at the file its ConfigMap configMap is mounted as.
func checkSchedulerRunsConfig(t *testing.T, spec corev1.PodSpec, configMap string) {
	t.Helper()
	mounts := map[string]string{}
	for _, m := range spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	var want string
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == configMap && mounts[v.Name] != "" {
			want = mounts[v.Name] + "/config.yaml"
		}
	}
	if got := flagValue(spec.Containers[0].Args, "config", ""); want == "" || got != want {
		t.Errorf("the second scheduler runs --config=%s, its ConfigMap %s is mounted as %q", got, configMap, want)
	}
}

// checkSchedulerMay asks kube-apiserver whether the second scheduler's
// ServiceAccount may do what the plugin does (read the ledgers, Longhorn's
// objects and the extender's ConfigMap, patch the ledgers' spec, follow the
// pods and claims of every namespace) and what kube-scheduler does for it
// (list and watch the ledgers of every namespace), and that it may not
// write the ledgers' decisions or Longhorn's objects.
func checkSchedulerMay(ctx context.Context, t *testing.T, c client.Client, account string) {
	t.Helper()
	user := "system:serviceaccount:" + namespace + ":" + account
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	for _, check := range []struct {
		verb, group, resource, subresource, ns, name string
		allowed                                      bool
	}{
		{"list", "longhorn.io", "diskschedules", "", "", "", true},
		{"watch", "longhorn.io", "diskschedules", "", "", "", true},
		{"get", "longhorn.io", "diskschedules", "", namespace, "", true},
		{"patch", "longhorn.io", "diskschedules", "", namespace, "", true},
		{"update", "longhorn.io", "diskschedules", "status", namespace, "", false},
		{"patch", "longhorn.io", "diskschedules", "", "default", "", false},
		{"create", "longhorn.io", "diskschedules", "", namespace, "", false},
		{"list", "longhorn.io", "volumes", "", namespace, "", true},
		{"watch", "longhorn.io", "replicas", "", namespace, "", true},
		{"list", "longhorn.io", "nodes", "", namespace, "", true},
		{"watch", "longhorn.io", "settings", "", namespace, "", true},
		{"update", "longhorn.io", "replicas", "", namespace, "", false},
		{"list", "", "configmaps", "", namespace, "diskschedule-config", true},
		{"get", "", "configmaps", "", namespace, "longhorn-storageclass", false},
		{"list", "", "pods", "", "", "", true},
		{"watch", "", "persistentvolumeclaims", "", "", "", true},
		{"list", "", "persistentvolumes", "", "", "", true},
		{"watch", "storage.k8s.io", "storageclasses", "", "", "", true},
		{"create", "", "pods", "binding", "default", "", true},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: check.verb, Group: check.group, Resource: check.resource,
				Subresource: check.subresource, Namespace: check.ns, Name: check.name}}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatalf("asking whether %s may %s %s: %v", user, check.verb, check.resource, err)
		}
		if sar.Status.Allowed != check.allowed {
			t.Errorf("the second scheduler may %s %s.%s/%s in %q (%s): %v, want %v (%s)", check.verb, check.resource, check.group,
				check.subresource, check.ns, check.name, sar.Status.Allowed, check.allowed, sar.Status.Reason)
		}
	}
}

// sameWebhooks compares what the gate's webhooks call, on what, and when.
func sameWebhooks(t *testing.T, step string, got, want admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	if len(got.Webhooks) != len(want.Webhooks) {
		t.Fatalf("%s: %s has %d webhooks, config's %d", step, want.Name, len(got.Webhooks), len(want.Webhooks))
	}
	for i, w := range want.Webhooks {
		g := got.Webhooks[i]
		for _, field := range []struct {
			name      string
			got, want any
		}{
			{"name", g.Name, w.Name},
			{"rules", g.Rules, w.Rules},
			{"matchConditions", g.MatchConditions, w.MatchConditions},
			{"failurePolicy", g.FailurePolicy, w.FailurePolicy},
			{"sideEffects", g.SideEffects, w.SideEffects},
			{"timeoutSeconds", g.TimeoutSeconds, w.TimeoutSeconds},
			{"namespaceSelector", g.NamespaceSelector, w.NamespaceSelector},
			{"clientConfig.service", g.ClientConfig.Service, w.ClientConfig.Service},
		} {
			if !cmp.Equal(field.got, field.want) {
				t.Errorf("%s: webhook %s %s differs (-config +installed):\n%s", step, w.Name, field.name, cmp.Diff(field.want, field.got))
			}
		}
	}
}

// decodeAs converts u to the typed T.
func decodeAs[T any](t *testing.T, u *unstructured.Unstructured) T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatalf("decoding %s: %v", key(u), err)
	}
	return out
}

// TestChartGateClientCA checks gate.clientCA: named in a ConfigMap or a
// Secret, the CA is mounted read-only into the manager and the manager is
// told to verify kube-apiserver's client certificate with it
// (--webhook-client-ca); unset, neither is there; naming both fails.
func TestChartGateClientCA(t *testing.T) {
	const mount = "/etc/diskschedule/webhook-client-ca"
	for _, c := range []struct {
		name       string
		ca         map[string]any
		wantArg    string
		wantCM     string
		wantSecret string
	}{
		{"unset", nil, "", "", ""},
		{"a ConfigMap", map[string]any{"configMap": "apiserver-webhook-client-ca"}, "--webhook-client-ca=" + mount + "/ca.crt", "apiserver-webhook-client-ca", ""},
		{"a Secret and its key", map[string]any{"secret": "apiserver-client", "key": "client-ca.pem"}, "--webhook-client-ca=" + mount + "/client-ca.pem", "", "apiserver-client"},
	} {
		t.Run(c.name, func(t *testing.T) {
			vals := map[string]any{}
			if c.ca != nil {
				vals["gate"] = map[string]any{"clientCA": c.ca}
			}
			d := managerDeployment(t, mustRenderChart(t, vals))
			pod := d.Spec.Template.Spec
			var arg string
			for _, a := range pod.Containers[0].Args {
				if strings.HasPrefix(a, "--webhook-client-ca") {
					arg = a
				}
			}
			if arg != c.wantArg {
				t.Errorf("the manager's client CA argument %q, want %q", arg, c.wantArg)
			}
			var mounted *corev1.VolumeMount
			for i, m := range pod.Containers[0].VolumeMounts {
				if m.MountPath == mount {
					mounted = &pod.Containers[0].VolumeMounts[i]
				}
			}
			var volume *corev1.Volume
			for i, v := range pod.Volumes {
				if mounted != nil && v.Name == mounted.Name {
					volume = &pod.Volumes[i]
				}
			}
			switch {
			case c.wantArg == "" && mounted != nil:
				t.Errorf("without gate.clientCA the manager mounts %s", mount)
			case c.wantArg == "":
			case mounted == nil || !mounted.ReadOnly || volume == nil:
				t.Fatalf("the client CA is not mounted read-only at %s: mount %+v, volume %+v", mount, mounted, volume)
			case c.wantCM != "" && (volume.ConfigMap == nil || volume.ConfigMap.Name != c.wantCM):
				t.Errorf("the client CA's volume %+v, want ConfigMap %s", volume.VolumeSource, c.wantCM)
			case c.wantSecret != "" && (volume.Secret == nil || volume.Secret.SecretName != c.wantSecret):
				t.Errorf("the client CA's volume %+v, want Secret %s", volume.VolumeSource, c.wantSecret)
			}
			if volume != nil {
				var items []corev1.KeyToPath
				switch {
				case volume.ConfigMap != nil:
					items = volume.ConfigMap.Items
				case volume.Secret != nil:
					items = volume.Secret.Items
				}
				if want := strings.TrimPrefix(c.wantArg, "--webhook-client-ca="+mount+"/"); len(items) != 1 || items[0].Path != want {
					t.Errorf("the client CA's volume projects %+v, want the file %s the argument names", items, want)
				}
			}
		})
	}
	_, err := renderChart(namespace, map[string]any{"gate": map[string]any{"clientCA": map[string]any{"configMap": "a", "secret": "b"}}})
	if err == nil || !strings.Contains(err.Error(), "both a ConfigMap and a Secret") {
		t.Errorf("gate.clientCA naming a ConfigMap and a Secret: %v, want an error saying so", err)
	}
}
