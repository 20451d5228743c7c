package config_test

import (
	"net"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// source is where a connection to a manager pod comes from: an address
// outside the pod network, or a pod (its namespace, its namespace's labels
// and its own labels).
type source struct {
	name      string
	ip        string
	namespace string
	nsLabels  map[string]string
	labels    map[string]string
}

// admits reports whether np lets src connect to the named port of a pod in
// np's namespace that np selects, as the NetworkPolicy API defines it.
func admits(t *testing.T, np networkingv1.NetworkPolicy, src source, port string) bool {
	t.Helper()
	for _, rule := range np.Spec.Ingress {
		portMatches := len(rule.Ports) == 0
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.String() == port {
				portMatches = true
			}
		}
		if !portMatches {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, peer := range rule.From {
			if peerMatches(t, np.Namespace, peer, src) {
				return true
			}
		}
	}
	return false
}

func peerMatches(t *testing.T, namespace string, peer networkingv1.NetworkPolicyPeer, src source) bool {
	t.Helper()
	if peer.IPBlock != nil {
		_, cidr, err := net.ParseCIDR(peer.IPBlock.CIDR)
		if err != nil {
			t.Fatalf("ipBlock %s: %v", peer.IPBlock.CIDR, err)
		}
		return src.ip != "" && cidr.Contains(net.ParseIP(src.ip))
	}
	if src.labels == nil {
		return false // not a pod
	}
	selects := func(sel *metav1.LabelSelector, set map[string]string) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatalf("selector %v: %v", sel, err)
		}
		return s.Matches(labels.Set(set))
	}
	if peer.NamespaceSelector == nil && src.namespace != namespace {
		return false
	}
	if peer.NamespaceSelector != nil && !selects(peer.NamespaceSelector, src.nsLabels) {
		return false
	}
	return peer.PodSelector == nil || selects(peer.PodSelector, src.labels)
}

// networkPolicies returns the NetworkPolicies among objs.
func networkPolicies(t *testing.T, objs []*unstructured.Unstructured) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, u := range objs {
		if u.GetKind() == "NetworkPolicy" {
			out = append(out, decodeAs[networkingv1.NetworkPolicy](t, u))
		}
	}
	return out
}

// TestChartNetworkPolicy renders the chart's NetworkPolicy and checks whom
// it admits to which port of the manager pods: with the control plane's
// CIDRs, the second scheduler deployed and a Prometheus named, the gate's
// port admits kube-apiserver and the other managers, the extender's port
// kube-scheduler (not the second scheduler, whose plugin calls no
// extender), the metrics port Prometheus, and nobody else anything
// (Longhorn's pods included); with the default
// values the gate's and the extender's ports admit every source and the
// metrics port none; networkPolicy.enabled=false renders none.
func TestChartNetworkPolicy(t *testing.T) {
	ns := map[string]string{"kubernetes.io/metadata.name": namespace}
	apiServer := source{name: "kube-apiserver", ip: "10.0.0.10"}
	scheduler := source{name: "kube-scheduler", ip: "10.0.0.11"}
	manager := source{name: "another manager", ip: "10.244.1.7", namespace: namespace, nsLabels: ns,
		labels: map[string]string{"app.kubernetes.io/name": "diskschedule", "app.kubernetes.io/component": "manager"}}
	second := source{name: "the second scheduler", ip: "10.244.1.8", namespace: namespace, nsLabels: ns,
		labels: map[string]string{"app.kubernetes.io/name": "diskschedule", "app.kubernetes.io/component": "scheduler"}}
	prometheus := source{name: "Prometheus", ip: "10.244.2.3", namespace: "monitoring",
		nsLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}, labels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
	longhorn := source{name: "longhorn-manager", ip: "10.244.1.9", namespace: namespace, nsLabels: ns, labels: map[string]string{"app": "longhorn-manager"}}
	elsewhere := source{name: "an address elsewhere", ip: "192.168.7.7"}

	objs := mustRenderChart(t, map[string]any{
		"scheduler": map[string]any{"enabled": true},
		"networkPolicy": map[string]any{
			"controlPlaneCIDRs": []any{"10.0.0.10/32", "10.0.0.11/32"},
			"metricsFrom": []any{map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}},
				"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "prometheus"}},
			}},
		},
	})
	policies := networkPolicies(t, objs)
	if len(policies) != 1 {
		t.Fatalf("%d NetworkPolicies, want one", len(policies))
	}
	np := policies[0]
	d := managerDeployment(t, objs)
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) || len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("the NetworkPolicy selects %v (%v), policy types %v; want the manager's pods %v, Ingress", np.Spec.PodSelector, err, np.Spec.PolicyTypes, d.Spec.Template.Labels)
	}
	declared := map[string]bool{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		declared[p.Name] = true
	}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil || !declared[p.Port.String()] {
				t.Errorf("a rule admits to port %v, which the manager's container does not declare", p.Port)
			}
		}
	}
	for _, c := range []struct {
		src                       source
		webhook, extender, metric bool
	}{
		{apiServer, true, true, false},
		{scheduler, true, true, false},
		{manager, true, false, false},
		{second, false, false, false},
		{prometheus, false, false, true},
		{longhorn, false, false, false},
		{elsewhere, false, false, false},
	} {
		for port, want := range map[string]bool{"webhook": c.webhook, "extender": c.extender, "metrics": c.metric} {
			if got := admits(t, np, c.src, port); got != want {
				t.Errorf("%s to port %s: admitted %v, want %v", c.src.name, port, got, want)
			}
		}
	}

	defaults := networkPolicies(t, mustRenderChart(t, nil))
	if len(defaults) != 1 {
		t.Fatalf("the default values render %d NetworkPolicies, want one", len(defaults))
	}
	for _, src := range []source{apiServer, elsewhere, longhorn} {
		if !admits(t, defaults[0], src, "webhook") || !admits(t, defaults[0], src, "extender") || admits(t, defaults[0], src, "metrics") {
			t.Errorf("default values, %s: want the gate's and the extender's ports open and the metrics port closed", src.name)
		}
	}
	if off := networkPolicies(t, mustRenderChart(t, map[string]any{"networkPolicy": map[string]any{"enabled": false}})); len(off) != 0 {
		t.Errorf("networkPolicy.enabled=false renders %d NetworkPolicies", len(off))
	}
	if _, err := renderChart(namespace, map[string]any{"networkPolicy": map[string]any{"controlPlaneCIDRs": []any{"10.0.0.10"}}}); err == nil {
		t.Errorf("networkPolicy.controlPlaneCIDRs without a prefix length rendered")
	}
}
