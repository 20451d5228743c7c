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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
}

func render(t *testing.T) *rendered {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "default")
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
		case "RoleBinding":
			out.roleBindings = append(out.roleBindings, rbacv1.RoleBinding{})
			into = &out.roleBindings[len(out.roleBindings)-1]
		default:
			t.Errorf("config/default renders an unexpected %s %s", r.GetKind(), r.GetName())
			continue
		}
		if err := yaml.UnmarshalStrict(data, into); err != nil {
			t.Fatalf("decoding %s %s: %v", r.GetKind(), r.GetName(), err)
		}
		if ns := r.GetNamespace(); r.GetKind() != "ClusterRole" && r.GetKind() != "ClusterRoleBinding" && ns != namespace {
			t.Errorf("%s %s is in namespace %q, want %s", r.GetKind(), r.GetName(), ns, namespace)
		}
	}
	return out
}

func TestDefaultDeployment(t *testing.T) {
	r := render(t)

	wantCRDs := []string{"backingimages.longhorn.io", "diskschedules.longhorn.io", "nodes.longhorn.io",
		"replicas.longhorn.io", "settings.longhorn.io", "volumes.longhorn.io"}
	slices.Sort(r.crds)
	if !reflect.DeepEqual(r.crds, wantCRDs) {
		t.Errorf("CRDs = %v, want %v", r.crds, wantCRDs)
	}
	if !reflect.DeepEqual(r.namespaces, []string{namespace}) {
		t.Errorf("namespaces = %v, want [%s]", r.namespaces, namespace)
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
	generated := readClusterRole(t, "rbac/role.yaml")
	managerRole := clusterRoleBoundTo(t, r, d.Spec.Template.Spec.ServiceAccountName)
	if !reflect.DeepEqual(managerRole.Rules, generated.Rules) {
		t.Errorf("the manager's ClusterRole %s rules differ from the generated config/rbac/role.yaml:\n%+v\nwant\n%+v",
			managerRole.Name, managerRole.Rules, generated.Rules)
	}
	if !roleBound(r, d.Spec.Template.Spec.ServiceAccountName, "coordination.k8s.io", "leases") {
		t.Errorf("no Role in %s lets the manager's ServiceAccount use leases (leader election)", namespace)
	}

	// The disk monitor: a DaemonSet of the same image in disk-monitor mode,
	// measuring /var/lib/longhorn of its own node, with a role of its own.
	if len(r.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets, want the disk monitor's", len(r.daemonSets))
	}
	ds := r.daemonSets[0]
	mon := ds.Spec.Template.Spec.Containers[0]
	if !slices.Contains(mon.Args, "--mode=disk-monitor") {
		t.Errorf("the disk monitor's args %v lack --mode=disk-monitor", mon.Args)
	}
	if mon.Image != mgr.Image {
		t.Errorf("the disk monitor's image %q differs from the manager's %q", mon.Image, mgr.Image)
	}
	nodeName := false
	for _, e := range mon.Env {
		nodeName = nodeName || e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}
	if !nodeName {
		t.Errorf("the disk monitor does not get NODE_NAME from spec.nodeName: %+v", mon.Env)
	}
	hostPath := map[string]string{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			hostPath[v.Name] = v.HostPath.Path
		}
	}
	mounted := false
	for _, m := range mon.VolumeMounts {
		mounted = mounted || hostPath[m.Name] == "/var/lib/longhorn" && m.MountPath == "/var/lib/longhorn"
	}
	if !mounted {
		t.Errorf("the disk monitor does not mount the host's /var/lib/longhorn: %+v, %+v", mon.VolumeMounts, ds.Spec.Template.Spec.Volumes)
	}
	monSA := ds.Spec.Template.Spec.ServiceAccountName
	if monSA == "" || monSA == d.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("the disk monitor's ServiceAccount %q is not its own", monSA)
	}
	wantMonRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"longhorn.io"}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"longhorn.io"}, Resources: []string{"nodes/status"}, Verbs: []string{"patch", "update"}},
	}
	if monRole := clusterRoleBoundTo(t, r, monSA); !reflect.DeepEqual(monRole.Rules, wantMonRules) {
		t.Errorf("the disk monitor's ClusterRole %s rules = %+v, want %+v", monRole.Name, monRole.Rules, wantMonRules)
	}
	for _, sa := range []string{d.Spec.Template.Spec.ServiceAccountName, monSA} {
		if !slices.ContainsFunc(r.serviceAccounts, func(s corev1.ServiceAccount) bool { return s.Name == sa }) {
			t.Errorf("ServiceAccount %s is not deployed", sa)
		}
	}

	// The extender's Service: fixed name, no selector, port 9504.
	var svc *corev1.Service
	for i := range r.services {
		if r.services[i].Name == "longhorn-scheduler-extender" {
			svc = &r.services[i]
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
}

// clusterRoleBoundTo returns the one ClusterRole bound to the
// ServiceAccount in the deployment's namespace.
func clusterRoleBoundTo(t *testing.T, r *rendered, sa string) rbacv1.ClusterRole {
	t.Helper()
	var names []string
	for _, b := range r.clusterRoleBindings {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == namespace {
				names = append(names, b.RoleRef.Name)
			}
		}
	}
	if len(names) != 1 {
		t.Fatalf("ServiceAccount %s is bound to ClusterRoles %v, want exactly one", sa, names)
	}
	for _, cr := range r.clusterRoles {
		if cr.Name == names[0] {
			return cr
		}
	}
	t.Fatalf("ClusterRole %s, bound to %s, is not deployed", names[0], sa)
	return rbacv1.ClusterRole{}
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
				for _, rule := range role.Rules {
					if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) &&
						slices.Contains(rule.Verbs, "get") && slices.Contains(rule.Verbs, "create") && slices.Contains(rule.Verbs, "update") {
						return true
					}
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
		{"urlPrefix", e.URLPrefix, "http://longhorn-scheduler-extender.longhorn-system.svc:9504"},
		{"filterVerb", e.FilterVerb, "filter"},
		{"prioritizeVerb", e.PrioritizeVerb, "prioritize"},
		{"weight", e.Weight, int64(1)},
		{"nodeCacheCapable", e.NodeCacheCapable, true},
		{"enableHTTPS", e.EnableHTTPS, false},
		{"ignorable", e.Ignorable, false},
		{"httpTimeout", e.HTTPTimeout.Duration, 30 * time.Second},
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
	for _, note := range []string{"--config=", "dnsPolicy: ClusterFirstWithHostNet", "ignorable", `longhorn.io/scheduler-extender: "1"`} {
		if !strings.Contains(string(readme), note) {
			t.Errorf("scheduler/README.md does not mention %s", note)
		}
	}
}
