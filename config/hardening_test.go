package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/longhorn/diskschedule/internal/gate"
)

// webhookCertDir is the manager's --webhook-cert-dir default (cmd/main.go):
// the one path it writes, the gate's certificate.
const webhookCertDir = "/tmp/k8s-webhook-server/serving-certs"

// gateTimeoutMargin is what the chart requires between the gate's own wait
// and the webhook's timeoutSeconds (diskschedule.gateTimeoutMargin).
const gateTimeoutMargin = 2

// managerDeployment returns the manager's Deployment among objs.
func managerDeployment(t *testing.T, objs []*unstructured.Unstructured) appsv1.Deployment {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "Deployment" && u.GetName() == "longhorn-diskschedule-controller-manager" {
			return decodeAs[appsv1.Deployment](t, u)
		}
	}
	t.Fatalf("no manager Deployment among %d objects", len(objs))
	return appsv1.Deployment{}
}

// TestManagerHardened checks the manager's pod, as the chart and
// config/default render it: a read-only root filesystem with an emptyDir
// where it writes the gate's certificate, a rollout that can proceed under
// the required anti-affinity (checkDisruptions checks it) and a memory limit
// with room over the 465 MiB recorded at 1000 nodes.
func TestManagerHardened(t *testing.T) {
	for name, objs := range map[string][]*unstructured.Unstructured{
		"chart":          mustRenderChart(t, nil),
		"config/default": renderKustomization(t, "default"),
	} {
		d := managerDeployment(t, objs)
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("%s: the manager's root filesystem is writable: %+v", name, c.SecurityContext)
		}
		mounted := ""
		for _, m := range c.VolumeMounts {
			if m.MountPath == webhookCertDir || strings.HasPrefix(webhookCertDir, m.MountPath+"/") {
				mounted = m.Name
			}
		}
		var emptyDir bool
		for _, v := range spec.Volumes {
			if v.Name == mounted && v.EmptyDir != nil {
				emptyDir = true
			}
		}
		if !emptyDir {
			t.Errorf("%s: %s is not on an emptyDir (mounts %+v)", name, webhookCertDir, c.VolumeMounts)
		}
		if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 1 {
			t.Errorf("%s: with required anti-affinity a rollout must be allowed one manager down, strategy %+v", name, d.Spec.Strategy)
		}
		const recordedMiB = 465 // docs/benchmarks.md: 59 MiB + 406 MiB at 1000 nodes
		if limit := c.Resources.Limits.Memory(); limit.Value() < 2*recordedMiB<<20 {
			t.Errorf("%s: memory limit %s leaves the collector no room over the %d MiB recorded at 1000 nodes", name, limit, recordedMiB)
		}
	}

	relaxed := managerDeployment(t, mustRenderChart(t, map[string]any{"manager": map[string]any{"podAntiAffinity": "preferred"}}))
	if a := relaxed.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil || a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil ||
		len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("manager.podAntiAffinity=preferred: affinity %+v, want one preferred term and no required one", a)
	}
	if ru := relaxed.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("manager.podAntiAffinity=preferred: strategy %+v, want a surge and no manager down", relaxed.Spec.Strategy)
	}
	none := managerDeployment(t, mustRenderChart(t, map[string]any{"manager": map[string]any{"podAntiAffinity": "none",
		"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "role", "operator": "Exists"}}}}}}}}}))
	if a := none.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity != nil || a.NodeAffinity == nil {
		t.Errorf("manager.podAntiAffinity=none with a nodeAffinity: affinity %+v", a)
	}
}

// TestChartGateTimeout checks that the webhook's timeoutSeconds leaves the
// gate its wait plus a margin: values.schema.json's minimum is the gate's
// default wait (gate.DefaultDecisionTimeout) plus the margin, and a
// --gate-timeout in manager.extraArgs past timeoutSeconds less the margin
// makes the chart fail, saying why.
func TestChartGateTimeout(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Gate struct {
				Properties struct {
					TimeoutSeconds struct {
						Minimum int `json:"minimum"`
					} `json:"timeoutSeconds"`
				} `json:"properties"`
			} `json:"gate"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	want := int(gate.DefaultDecisionTimeout.Seconds()) + gateTimeoutMargin
	if got := schema.Properties.Gate.Properties.TimeoutSeconds.Minimum; got != want {
		t.Errorf("values.schema.json: gate.timeoutSeconds minimum %d, want the gate's wait %s plus %ds", got, gate.DefaultDecisionTimeout, gateTimeoutMargin)
	}
	for _, c := range []struct {
		timeout int
		args    []any
		fail    string
	}{
		{10, nil, ""},
		{10, []any{"--gate-timeout=8s"}, ""},
		{12, []any{"--gate-timeout=6s"}, ""},
		{10, []any{"--gate-timeout=7500ms"}, ""},
		{10, []any{"--gate-timeout=8.5s"}, "--gate-timeout to 8500ms, which leaves less than 2s of gate.timeoutSeconds=10"},
		{10, []any{"--gate-timeout=9s"}, "--gate-timeout to 9000ms"},
		{30, []any{"-gate-timeout=1m"}, "--gate-timeout to 60000ms"},
		{12, []any{"--ledger-workers=2", "--gate-timeout", "11s"}, "--gate-timeout to 11000ms"},
		{10, []any{"--gate-timeout=soon"}, "--gate-timeout=soon is not a duration"},
		{9, nil, "timeoutSeconds"},
	} {
		_, err := renderChart(namespace, map[string]any{"gate": map[string]any{"timeoutSeconds": c.timeout},
			"manager": map[string]any{"extraArgs": c.args}})
		switch {
		case c.fail == "" && err != nil:
			t.Errorf("timeoutSeconds %d, args %v: %v", c.timeout, c.args, err)
		case c.fail != "" && (err == nil || !strings.Contains(err.Error(), c.fail)):
			t.Errorf("timeoutSeconds %d, args %v: %v, want an error saying %q", c.timeout, c.args, err, c.fail)
		}
	}
}
