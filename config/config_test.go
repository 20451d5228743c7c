// Package config_test checks the deployment manifests: what `kustomize
// build config/default` renders, and kube-scheduler's configuration.
package config_test

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const namespace = "longhorn-system"

// rendered is what config/default renders, by kind.
type rendered struct {
	crds                []string
	namespaces          []string
	deployments         []appsv1.Deployment
	daemonSets          []appsv1.DaemonSet
	services            []corev1.Service
	serviceAccounts     []corev1.ServiceAccount
	clusterRoles        []rbacv1.ClusterRole
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	roles               []rbacv1.Role
	roleBindings        []rbacv1.RoleBinding
	configMaps          []corev1.ConfigMap
	secrets             []corev1.Secret
	webhooks            []admissionregistrationv1.ValidatingWebhookConfiguration
	podWebhooks         []admissionregistrationv1.MutatingWebhookConfiguration
	disruptionBudgets   []policyv1.PodDisruptionBudget
	networkPolicies     []networkingv1.NetworkPolicy
}

func render(t *testing.T) *rendered {
	t.Helper()
	return renderDir(t, "default")
}

func renderDir(t *testing.T, dir string) *rendered {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	out := &rendered{}
	for _, r := range resources.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var into any
		switch r.GetKind() {
		case "CustomResourceDefinition":
			out.crds = append(out.crds, r.GetName())
			continue
		case "Namespace":
			out.namespaces = append(out.namespaces, r.GetName())
			continue
		case "Deployment":
			out.deployments = append(out.deployments, appsv1.Deployment{})
			into = &out.deployments[len(out.deployments)-1]
		case "DaemonSet":
			out.daemonSets = append(out.daemonSets, appsv1.DaemonSet{})
			into = &out.daemonSets[len(out.daemonSets)-1]
		case "Service":
			out.services = append(out.services, corev1.Service{})
			into = &out.services[len(out.services)-1]
		case "ServiceAccount":
			out.serviceAccounts = append(out.serviceAccounts, corev1.ServiceAccount{})
			into = &out.serviceAccounts[len(out.serviceAccounts)-1]
		case "ClusterRole":
			out.clusterRoles = append(out.clusterRoles, rbacv1.ClusterRole{})
			into = &out.clusterRoles[len(out.clusterRoles)-1]
		case "ClusterRoleBinding":
			out.clusterRoleBindings = append(out.clusterRoleBindings, rbacv1.ClusterRoleBinding{})
			into = &out.clusterRoleBindings[len(out.clusterRoleBindings)-1]
		case "Role":
			out.roles = append(out.roles, rbacv1.Role{})
			into = &out.roles[len(out.roles)-1]
		case "ConfigMap":
			out.configMaps = append(out.configMaps, corev1.ConfigMap{})
			into = &out.configMaps[len(out.configMaps)-1]
		case "RoleBinding":
			out.roleBindings = append(out.roleBindings, rbacv1.RoleBinding{})
			into = &out.roleBindings[len(out.roleBindings)-1]
		case "Secret":
			out.secrets = append(out.secrets, corev1.Secret{})
			into = &out.secrets[len(out.secrets)-1]
		case "ValidatingWebhookConfiguration":
			out.webhooks = append(out.webhooks, admissionregistrationv1.ValidatingWebhookConfiguration{})
			into = &out.webhooks[len(out.webhooks)-1]
		case "MutatingWebhookConfiguration":
			out.podWebhooks = append(out.podWebhooks, admissionregistrationv1.MutatingWebhookConfiguration{})
			into = &out.podWebhooks[len(out.podWebhooks)-1]
		case "PodDisruptionBudget":
			out.disruptionBudgets = append(out.disruptionBudgets, policyv1.PodDisruptionBudget{})
			into = &out.disruptionBudgets[len(out.disruptionBudgets)-1]
		case "NetworkPolicy":
			out.networkPolicies = append(out.networkPolicies, networkingv1.NetworkPolicy{})
			into = &out.networkPolicies[len(out.networkPolicies)-1]
		default:
			t.Errorf("config/default renders an unexpected %s %s", r.GetKind(), r.GetName())
			continue
		}
		if err := yaml.UnmarshalStrict(data, into); err != nil {
			t.Fatalf("decoding %s %s: %v", r.GetKind(), r.GetName(), err)
		}
		if ns := r.GetNamespace(); r.GetKind() != "ClusterRole" && r.GetKind() != "ClusterRoleBinding" && r.GetKind() != "ValidatingWebhookConfiguration" && r.GetKind() != "MutatingWebhookConfiguration" && ns != namespace {
			t.Errorf("%s %s is in namespace %q, want %s", r.GetKind(), r.GetName(), ns, namespace)
		}
	}
	return out
}

func TestDefaultDeployment(t *testing.T) {
	r := render(t)
	// An add-on next to Longhorn: the one CRD it owns, no namespace (Longhorn's
	// is Longhorn's), no DaemonSet (Longhorn measures its disks).
	if !reflect.DeepEqual(r.crds, []string{"diskschedules.longhorn.io"}) {
		t.Errorf("CRDs = %v, want only diskschedules.longhorn.io: Longhorn's CRDs are Longhorn's", r.crds)
	}
	if len(r.namespaces) != 0 {
		t.Errorf("namespaces = %v, want none: %s belongs to Longhorn", r.namespaces, namespace)
	}
	if len(r.daemonSets) != 0 {
		t.Errorf("%d DaemonSets, want none", len(r.daemonSets))
	}
	// The manager: a leader-elected Deployment of at least two replicas,
	// bound to the generated manager-role and the leader-election Role.
	if len(r.deployments) != 1 {
		t.Fatalf("%d Deployments, want the manager's", len(r.deployments))
	}
	d := r.deployments[0]
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("the manager Deployment has %v replicas, want at least 2", d.Spec.Replicas)
	}
	mgr := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(mgr.Args, "--leader-elect") {
		t.Errorf("the manager's args %v lack --leader-elect", mgr.Args)
	}
	if mgr.Image != "diskschedule:latest" {
		t.Errorf("the manager's image is %q, want diskschedule:latest (images: in config/default)", mgr.Image)
	}
	checkDisruptions(t, r, d)
	sa := d.Spec.Template.Spec.ServiceAccountName
	generated := readClusterRole(t, "rbac/role.yaml")
	managerRole := clusterRoleNamed(t, r, "longhorn-diskschedule-manager-role")
	if !reflect.DeepEqual(managerRole.Rules, generated.Rules) {
		t.Errorf("the manager's ClusterRole %s rules differ from the generated config/rbac/role.yaml:\n%+v\nwant\n%+v",
			managerRole.Name, managerRole.Rules, generated.Rules)
	}
	if !clusterRoleBound(r, sa, managerRole.Name) {
		t.Errorf("the manager's ServiceAccount %s is not bound to %s", sa, managerRole.Name)
	}
	if !roleBound(r, sa, "coordination.k8s.io", "leases") {
		t.Errorf("no Role in %s lets the manager's ServiceAccount use leases (leader election)", namespace)
	}
	if !slices.ContainsFunc(r.serviceAccounts, func(s corev1.ServiceAccount) bool { return s.Name == sa }) {
		t.Errorf("ServiceAccount %s is not deployed", sa)
	}
	// Nothing the add-on deploys may write a Longhorn kind: on longhorn.io it
	// writes DiskSchedules only.
	roles := slices.Clone(r.clusterRoles)
	for _, role := range r.roles {
		roles = append(roles, rbacv1.ClusterRole{ObjectMeta: role.ObjectMeta, Rules: role.Rules})
	}
	for _, cr := range roles {
		for _, rule := range cr.Rules {
			if !slices.Contains(rule.APIGroups, "longhorn.io") {
				continue
			}
			for _, res := range rule.Resources {
				if strings.HasPrefix(res, "diskschedules") {
					continue
				}
				for _, verb := range rule.Verbs {
					if verb != "get" && verb != "list" && verb != "watch" {
						t.Errorf("Role %s may %s longhorn.io %s: the add-on only reads Longhorn's kinds", cr.Name, verb, res)
					}
				}
			}
		}
	}
	// Metrics behind authentication and authorization, as kubebuilder v4 does.
	if !slices.ContainsFunc(mgr.Args, func(a string) bool { return a == "--metrics-bind-address=:8443" }) {
		t.Errorf("the manager's args %v do not serve metrics on :8443", mgr.Args)
	}
	authRole := clusterRoleNamed(t, r, "longhorn-diskschedule-metrics-auth-role")
	if !clusterRoleBound(r, sa, authRole.Name) {
		t.Errorf("the manager cannot review scrapers' tokens: %s not bound to %s", authRole.Name, sa)
	}
	clusterRoleNamed(t, r, "longhorn-diskschedule-metrics-reader")
	// The extender's Service: fixed name, no selector, port 9504.
	var svc, metricsSvc *corev1.Service
	for i := range r.services {
		switch r.services[i].Name {
		case "longhorn-scheduler-extender":
			svc = &r.services[i]
		case "longhorn-diskschedule-controller-manager-metrics-service":
			metricsSvc = &r.services[i]
		}
	}
	if svc == nil {
		t.Fatalf("no Service longhorn-scheduler-extender (the name prefix must not apply to it); services: %+v", r.services)
	}
	if svc.Namespace != namespace || len(svc.Spec.Selector) != 0 {
		t.Errorf("Service %s/%s selector %v, want namespace %s and no selector", svc.Namespace, svc.Name, svc.Spec.Selector, namespace)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9504 || svc.Spec.Ports[0].TargetPort.IntValue() != 9504 {
		t.Errorf("Service ports = %+v, want 9504", svc.Spec.Ports)
	}
	if metricsSvc == nil || len(metricsSvc.Spec.Ports) != 1 || metricsSvc.Spec.Ports[0].Port != 8443 {
		t.Errorf("metrics Service = %+v, want one on 8443", metricsSvc)
	}
	// The extender's settings ConfigMap, with every key at its default.
	if len(r.configMaps) != 1 || r.configMaps[0].Name != "diskschedule-config" {
		t.Fatalf("ConfigMaps = %+v, want diskschedule-config", r.configMaps)
	}
	for key, want := range map[string]string{
		"scheduler-extender-enabled":                  "true",
		"scheduler-extender-pod-scheduling-timeout":   "5",
		"scheduler-extender-node-reservation-timeout": "5",
	} {
		if got := r.configMaps[0].Data[key]; got != want {
			t.Errorf("diskschedule-config %s = %q, want %q", key, got, want)
		}
	}
}

// checkDisruptions checks what keeps one manager up through drains,
// preemptions and a node's loss: a PodDisruptionBudget that keeps one of
// the Deployment's pods available, pods on distinct nodes (required
// anti-affinity by hostname; the chart's manager.podAntiAffinity relaxes it
// for one-node clusters), and Longhorn's own priority class.
func checkDisruptions(t *testing.T, r *rendered, d appsv1.Deployment) {
	t.Helper()
	pods := labels.Set(d.Spec.Template.Labels)
	if len(r.disruptionBudgets) != 1 {
		t.Fatalf("%d PodDisruptionBudgets, want one for the manager", len(r.disruptionBudgets))
	}
	pdb := r.disruptionBudgets[0]
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(pods) || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget %s: selector %v (%v), minAvailable %v, maxUnavailable %v; want the manager's pods and minAvailable 1",
			pdb.Name, pdb.Spec.Selector, err, pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	}
	spec := d.Spec.Template.Spec
	spread := false
	if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
		for _, term := range spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
			if err == nil && sel.Matches(pods) && term.TopologyKey == corev1.LabelHostname {
				spread = true
			}
		}
	}
	if !spread {
		t.Errorf("the manager's pods have no required anti-affinity by %s among themselves: %+v", corev1.LabelHostname, spec.Affinity)
	}
	if spec.PriorityClassName != "longhorn-critical" {
		t.Errorf("the manager's priority class is %q, want Longhorn's own longhorn-critical", spec.PriorityClassName)
	}
}

// clusterRoleNamed returns the deployed ClusterRole of that name.
func clusterRoleNamed(t *testing.T, r *rendered, name string) rbacv1.ClusterRole {
	t.Helper()
	for _, cr := range r.clusterRoles {
		if cr.Name == name {
			return cr
		}
	}
	t.Fatalf("ClusterRole %s is not deployed", name)
	return rbacv1.ClusterRole{}
}

// clusterRoleBound reports whether a ClusterRoleBinding binds the
// ServiceAccount of the deployment's namespace to the ClusterRole.
func clusterRoleBound(r *rendered, sa, role string) bool {
	for _, b := range r.clusterRoleBindings {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == namespace && b.RoleRef.Name == role {
				return true
			}
		}
	}
	return false
}

// roleBound reports whether a Role bound to the ServiceAccount allows
// every verb of leader election on the group's resource.
func roleBound(r *rendered, sa, group, resource string) bool {
	for _, b := range r.roleBindings {
		for _, s := range b.Subjects {
			if s.Kind != rbacv1.ServiceAccountKind || s.Name != sa || s.Namespace != namespace {
				continue
			}
			for _, role := range r.roles {
				if role.Name != b.RoleRef.Name || b.RoleRef.Kind != "Role" {
					continue
				}
				verbs := map[string]bool{}
				for _, rule := range role.Rules {
					if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) {
						for _, v := range rule.Verbs {
							verbs[v] = true
						}
					}
				}
				if verbs["get"] && verbs["create"] && verbs["update"] {
					return true
				}
			}
		}
	}
	return false
}

func readClusterRole(t *testing.T, path string) rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &cr); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return cr
}

func TestSchedulerConfiguration(t *testing.T) {
	data, err := os.ReadFile("scheduler/kube-scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg schedulerconfigv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("scheduler/kube-scheduler-config.yaml does not decode strictly: %v", err)
	}
	if cfg.APIVersion != "kubescheduler.config.k8s.io/v1" || cfg.Kind != "KubeSchedulerConfiguration" {
		t.Errorf("apiVersion/kind = %s/%s", cfg.APIVersion, cfg.Kind)
	}
	if len(cfg.Extenders) != 1 {
		t.Fatalf("extenders = %+v, want one", cfg.Extenders)
	}
	e := cfg.Extenders[0]
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"urlPrefix", e.URLPrefix, "https://longhorn-scheduler-extender.longhorn-system.svc:9504"},
		{"filterVerb", e.FilterVerb, "filter"},
		{"prioritizeVerb", e.PrioritizeVerb, "prioritize"},
		{"weight", e.Weight, int64(1)},
		{"nodeCacheCapable", e.NodeCacheCapable, true},
		{"enableHTTPS", e.EnableHTTPS, true},
		{"tlsConfig has a client pair and the CA", e.TLSConfig != nil && e.TLSConfig.CertFile != "" && e.TLSConfig.KeyFile != "" && e.TLSConfig.CAFile != "", true},
		{"ignorable", e.Ignorable, false},
		{"httpTimeout", e.HTTPTimeout.Duration, 10 * time.Second},
		{"managedResources", e.ManagedResources, []schedulerconfigv1.ExtenderManagedResource{{Name: "longhorn.io/scheduler-extender", IgnoredByScheduler: true}}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("extender %s = %v, want %v", c.field, c.got, c.want)
		}
	}

	readme, err := os.ReadFile("scheduler/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, note := range []string{"--config=", "dnsPolicy: ClusterFirstWithHostNet", "ignorable", `longhorn.io/scheduler-extender: "1"`,
		"longhorn-scheduler-extender-client-cert", "longhorn-scheduler-extender-cert", "tlsConfig", "https://longhorn-scheduler-extender"} {
		if !strings.Contains(string(readme), note) {
			t.Errorf("scheduler/README.md does not mention %s", note)
		}
	}
}

// TestGateWebhook checks the admission gate as config/default installs it:
// Longhorn's three kinds, in Longhorn's namespace, through the gate's
// Service to the manager's webhook port, NoneOnDryRun, a bounded timeout,
// failure policy Fail, and Ignore through the optional component.
func TestGateWebhook(t *testing.T) {
	r := render(t)
	if len(r.webhooks) != 1 || r.webhooks[0].Name != "diskschedule-gate" {
		t.Fatalf("webhook configurations = %d, want diskschedule-gate alone", len(r.webhooks))
	}
	vwc := r.webhooks[0]
	resources := map[string]bool{}
	for _, wh := range vwc.Webhooks {
		if wh.SideEffects == nil || *wh.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
			t.Errorf("webhook %s: sideEffects %v, want NoneOnDryRun", wh.Name, wh.SideEffects)
		}
		if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("webhook %s: failurePolicy %v, want Fail", wh.Name, wh.FailurePolicy)
		}
		if wh.TimeoutSeconds == nil || *wh.TimeoutSeconds > 15 {
			t.Errorf("webhook %s: timeoutSeconds %v, want at most 15", wh.Name, wh.TimeoutSeconds)
		}
		if wh.NamespaceSelector == nil || wh.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != namespace {
			t.Errorf("webhook %s: namespaceSelector %v, want Longhorn's namespace", wh.Name, wh.NamespaceSelector)
		}
		if len(wh.MatchConditions) == 0 {
			t.Errorf("webhook %s has no matchConditions: every write of Longhorn's would reach the gate", wh.Name)
		}
		svc := wh.ClientConfig.Service
		if svc == nil || svc.Namespace != namespace {
			t.Fatalf("webhook %s: clientConfig %+v, want a Service in %s", wh.Name, wh.ClientConfig, namespace)
		}
		found := false
		for _, s := range r.services {
			if s.Name == svc.Name && len(s.Spec.Ports) == 1 && s.Spec.Ports[0].TargetPort.StrVal == "webhook" {
				found = true
			}
		}
		if !found {
			t.Errorf("webhook %s calls Service %s, which config/default does not render with target port webhook", wh.Name, svc.Name)
		}
		for _, rule := range wh.Rules {
			for _, res := range rule.Resources {
				resources[res] = true
			}
			if !slices.Equal(rule.APIGroups, []string{"longhorn.io"}) {
				t.Errorf("webhook %s: apiGroups %v, want longhorn.io", wh.Name, rule.APIGroups)
			}
		}
	}
	if !reflect.DeepEqual(resources, map[string]bool{"replicas": true, "volumes": true, "backingimages": true}) {
		t.Errorf("the gate covers %v, want replicas, volumes and backingimages", resources)
	}
	port := false
	for _, c := range r.deployments[0].Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			port = port || (p.Name == "webhook" && p.ContainerPort == 9443)
		}
	}
	if !port {
		t.Errorf("the manager container has no port webhook (9443)")
	}
	var secrets []string
	for _, s := range r.secrets {
		if len(s.Data) != 0 || len(s.StringData) != 0 {
			t.Errorf("Secret %s ships data, want it empty for the manager to fill", s.Name)
		}
		secrets = append(secrets, s.Name)
	}
	slices.Sort(secrets)
	if want := []string{"longhorn-diskschedule-webhook-cert", "longhorn-scheduler-extender-cert", "longhorn-scheduler-extender-client-cert"}; !slices.Equal(secrets, want) {
		t.Errorf("secrets = %v, want the gate's and the extender's empty certificate Secrets %v", secrets, want)
	}

	ignore := renderDir(t, "testdata/gate-ignore")
	for _, wh := range ignore.webhooks[0].Webhooks {
		if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("with the component webhook/ignore, webhook %s: failurePolicy %v, want Ignore", wh.Name, wh.FailurePolicy)
		}
	}
}

// TestPodWebhook checks the pod opt-in webhook as config/default installs
// it: pod CREATEs only, in namespaces labelled
// diskschedule.longhorn.io/extender=enabled, not of pods labelled disabled,
// only pods with a claim, through the gate's Service and path, no side
// effects, a short timeout, and failure policy Ignore (a pod is never held
// up by the add-on).
func TestPodWebhook(t *testing.T) {
	r := render(t)
	if len(r.podWebhooks) != 1 || r.podWebhooks[0].Name != "diskschedule-pods" || len(r.podWebhooks[0].Webhooks) != 1 {
		t.Fatalf("mutating webhook configurations = %v, want diskschedule-pods with one webhook", r.podWebhooks)
	}
	wh := r.podWebhooks[0].Webhooks[0]
	if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("failurePolicy %v, want Ignore", wh.FailurePolicy)
	}
	if wh.SideEffects == nil || *wh.SideEffects != admissionregistrationv1.SideEffectClassNone {
		t.Errorf("sideEffects %v, want None", wh.SideEffects)
	}
	if wh.TimeoutSeconds == nil || *wh.TimeoutSeconds > 5 {
		t.Errorf("timeoutSeconds %v, want at most 5", wh.TimeoutSeconds)
	}
	if wh.NamespaceSelector == nil || !reflect.DeepEqual(wh.NamespaceSelector.MatchLabels, map[string]string{"diskschedule.longhorn.io/extender": "enabled"}) {
		t.Errorf("namespaceSelector %v, want diskschedule.longhorn.io/extender=enabled", wh.NamespaceSelector)
	}
	if wh.ObjectSelector == nil || len(wh.ObjectSelector.MatchExpressions) != 1 ||
		!reflect.DeepEqual(wh.ObjectSelector.MatchExpressions[0], metav1.LabelSelectorRequirement{
			Key: "diskschedule.longhorn.io/extender", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled"}}) {
		t.Errorf("objectSelector %v, want diskschedule.longhorn.io/extender not disabled", wh.ObjectSelector)
	}
	if len(wh.Rules) != 1 || !slices.Equal(wh.Rules[0].Resources, []string{"pods"}) ||
		!slices.Equal(wh.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) {
		t.Errorf("rules %v, want pod CREATEs", wh.Rules)
	}
	if len(wh.MatchConditions) != 1 {
		t.Errorf("matchConditions %v, want the one that passes pods with a claim", wh.MatchConditions)
	}
	svc := wh.ClientConfig.Service
	gateSvc := r.webhooks[0].Webhooks[0].ClientConfig.Service
	if svc == nil || gateSvc == nil || svc.Name != gateSvc.Name || svc.Namespace != namespace || svc.Path == nil || *svc.Path != "/mutate-v1-pod" {
		t.Errorf("clientConfig %+v, want the gate's Service in %s, path /mutate-v1-pod", wh.ClientConfig, namespace)
	}
}
