package config_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// grant is what one of the add-on's roles may do, and why it needs it. A
// Role's grant holds in Longhorn's namespace only; a ClusterRole's in every
// namespace. names empty: any object of the resources.
type grant struct {
	role      string // the role's name without the longhorn-diskschedule- prefix
	cluster   bool   // a ClusterRole, not a Role
	group     string
	resources []string
	names     []string
	verbs     []string
	urls      []string // non-resource URLs
	why       string
}

// allowList is every right the add-on's RBAC may give, with the reason. A
// rule of config/rbac or of the chart that this list does not cover fails
// TestRBACAllowList; so does a grant no rule uses any more.
func allowList() []grant {
	return []grant{
		// The manager's ClusterRole: what lives outside Longhorn's namespace.
		{role: "manager-role", cluster: true, resources: []string{"pods", "persistentvolumeclaims", "persistentvolumes"}, verbs: []string{"get", "list", "watch"},
			why: "the extender follows the pods and claims of every namespace to their Longhorn volumes; the ledger holds a reservation while its pod is bound"},
		{role: "manager-role", cluster: true, group: "storage.k8s.io", resources: []string{"storageclasses"}, verbs: []string{"get", "list", "watch"},
			why: "the extender sizes an unbound claim from its Longhorn StorageClass's parameters"},
		{role: "manager-role", cluster: true, resources: []string{"pods/binding"}, verbs: []string{"create"},
			why: "the extender's optional /bind binds the pods kube-scheduler hands it"},
		{role: "manager-role", cluster: true, group: "admissionregistration.k8s.io", resources: []string{"validatingwebhookconfigurations"},
			names: []string{"diskschedule-gate"}, verbs: []string{"get", "list", "watch", "update"},
			why: "the certificate rotator injects the gate's CA into diskschedule-gate's caBundle, reading it by name only"},
		{role: "manager-role", cluster: true, group: "admissionregistration.k8s.io", resources: []string{"mutatingwebhookconfigurations"},
			names: []string{"diskschedule-pods"}, verbs: []string{"get", "list", "watch", "update"},
			why: "the certificate rotator injects the same CA into the pod opt-in webhook diskschedule-pods' caBundle, reading it by name only"},
		{role: "manager-role", cluster: true, group: "events.k8s.io", resources: []string{"events"}, verbs: []string{"create", "patch"},
			why: "the ledger controller records ReservationYielded on a pod, in the pod's own namespace, when its volume's reservation yields to a Longhorn placement"},
		{role: "manager-role", cluster: true, group: "apiextensions.k8s.io", resources: []string{"customresourcedefinitions"},
			names: []string{"diskschedules.longhorn.io"}, verbs: []string{"get"},
			why: "at start the manager checks that the DiskSchedule CRD on the cluster is the add-on's"},
		// The manager's Role in Longhorn's namespace.
		{role: "manager-role", group: "longhorn.io", resources: []string{"nodes", "volumes", "replicas", "backingimages", "settings"},
			verbs: []string{"get", "list", "watch"},
			why:   "Longhorn's kinds, read and never written: the disks' limits, what Longhorn persisted, the settings, the extender's view"},
		{role: "manager-role", group: "longhorn.io", resources: []string{"diskschedules"}, verbs: []string{"get", "list", "watch", "create", "delete", "patch"},
			why: "the ledger: the node controller creates and deletes one per disk; the gate, the mirror and the extender patch its spec"},
		{role: "manager-role", group: "longhorn.io", resources: []string{"diskschedules/status"}, verbs: []string{"get", "update", "patch"},
			why: "the DiskSchedule controller writes the decisions, with the resourceVersion it read"},
		{role: "manager-role", group: "events.k8s.io", resources: []string{"events"}, verbs: []string{"create", "patch"},
			why: "Events on DiskSchedules, on the ConfigMap and on the Longhorn objects the gate denies"},
		{role: "manager-role", resources: []string{"configmaps"}, names: []string{"diskschedule-config"}, verbs: []string{"get", "list", "watch"},
			why: "the extender's settings, the one ConfigMap the cache watches (by a field selector on its name)"},
		{role: "manager-role", resources: []string{"secrets"}, names: []string{"longhorn-diskschedule-webhook-cert"}, verbs: []string{"get", "list", "watch", "update"},
			why: "the gate's certificate, which the rotator fills and rotates; listed and watched by name only (Longhorn keeps its backup credentials in the same namespace)"},
		{role: "manager-role", resources: []string{"secrets"}, names: []string{"longhorn-scheduler-extender-cert", "longhorn-scheduler-extender-client-cert"}, verbs: []string{"get", "list", "watch", "update"},
			why: "the extender's serving certificate and the schedulers' client certificate, which the leader's rotators fill and rotate; each listed and watched by name only"},
		{role: "manager-role", group: "discovery.k8s.io", resources: []string{"endpointslices"}, verbs: []string{"create"},
			why: "the leader creates the extender Service's EndpointSlice the first time (a create cannot name its object)"},
		{role: "manager-role", group: "discovery.k8s.io", resources: []string{"endpointslices"}, names: []string{"longhorn-scheduler-extender"}, verbs: []string{"get", "update"},
			why: "the leader points the extender Service's EndpointSlice at itself"},
		// Leader election.
		{role: "leader-election-role", group: "coordination.k8s.io", resources: []string{"leases"}, verbs: []string{"create"},
			why: "the first manager creates the leader-election Lease (a create cannot name its object)"},
		{role: "leader-election-role", group: "coordination.k8s.io", resources: []string{"leases"}, names: []string{"longhorn-diskschedule-manager"}, verbs: []string{"get", "list", "watch", "update"},
			why: "the managers read, renew and, on a clean stop, release their Lease; a new leader's extender reads it to fence; every replica's gate lists and watches it (a field selector on its name) to answer at once, denied, while no leader decides"},
		{role: "leader-election-role", resources: []string{"events"}, verbs: []string{"create", "patch"},
			why: "leader election records who took the Lease"},
		// Metrics behind authentication and authorization.
		{role: "metrics-auth-role", cluster: true, group: "authentication.k8s.io", resources: []string{"tokenreviews"}, verbs: []string{"create"},
			why: "the metrics endpoint checks a scraper's token"},
		{role: "metrics-auth-role", cluster: true, group: "authorization.k8s.io", resources: []string{"subjectaccessreviews"}, verbs: []string{"create"},
			why: "the metrics endpoint checks that a scraper may get /metrics"},
		// The chart's pre-delete hook.
		{role: "uninstall", cluster: true, group: "admissionregistration.k8s.io", resources: []string{"validatingwebhookconfigurations"},
			names: []string{"diskschedule-gate"}, verbs: []string{"get", "delete"},
			why: "helm uninstall's pre-delete hook deletes the gate's webhook configuration, and waits until it is gone, before Helm deletes the managers"},
		{role: "uninstall", cluster: true, group: "admissionregistration.k8s.io", resources: []string{"mutatingwebhookconfigurations"},
			names: []string{"diskschedule-pods"}, verbs: []string{"get", "delete"},
			why: "the same hook deletes the pod opt-in webhook's configuration before the managers that serve it"},
		{role: "metrics-reader", cluster: true, urls: []string{"/metrics"}, verbs: []string{"get"},
			why: "bound to the scrapers' service accounts (metrics.readers)"},
		// The second scheduler (config/scheduler/secondary, scheduler.enabled),
		// beside kube-scheduler's own ClusterRoles it is bound to.
		{role: "scheduler-authentication-reader", cluster: true, resources: []string{"configmaps"}, names: []string{"extension-apiserver-authentication"},
			verbs: []string{"get", "list", "watch"},
			why:   "kube-scheduler authenticates the callers of its health and metrics endpoints with it; system:kube-scheduler grants it to kube-scheduler's own user by name only"},
		{role: "scheduler-lease", group: "coordination.k8s.io", resources: []string{"leases"}, names: []string{"longhorn-diskschedule-scheduler"}, verbs: []string{"get", "update"},
			why: "the second scheduler's leader election, on a lease of its own (system:kube-scheduler renews only the lease named kube-scheduler)"},
		{role: "scheduler-plugin", group: "longhorn.io", resources: []string{"diskschedules"}, verbs: []string{"get", "list", "watch", "patch"},
			why: "the diskschedule plugin reads the ledgers and patches their spec with the reservations it writes before it binds a pod"},
		{role: "scheduler-plugin", group: "longhorn.io", resources: []string{"nodes", "volumes", "replicas", "settings"}, verbs: []string{"get", "list", "watch"},
			why: "the plugin's view, as the extender's: the disks' eligibility, the pods' volumes and where their replicas are, Longhorn's scheduling settings; read only"},
		{role: "scheduler-plugin", resources: []string{"configmaps"}, names: []string{"diskschedule-config"}, verbs: []string{"get", "list", "watch"},
			why: "the extender's settings (the reservation timeout), read by the plugin's cache by name only"},
		{role: "scheduler-ledgers", cluster: true, group: "longhorn.io", resources: []string{"diskschedules"}, verbs: []string{"list", "watch"},
			why: "kube-scheduler follows the ledgers for the plugin (EventsToRegister) with an informer of every namespace, and schedules only once it has listed them"},
	}
}

// right is one thing a rule allows: one verb on one resource (or URL),
// perhaps of one object.
type right struct {
	role, scope, group, resource, name, verb, url string
}

func (r right) String() string {
	what := r.url
	if what == "" {
		what = r.resource + "." + r.group
		if r.name != "" {
			what += " " + r.name
		} else {
			what += " (any)"
		}
	}
	return fmt.Sprintf("%s %s: %s %s", r.scope, r.role, r.verb, what)
}

// rights expands a role's rules into what each allows.
func rights(role, scope string, rules []rbacv1.PolicyRule) []right {
	var out []right
	for _, rule := range rules {
		for _, verb := range rule.Verbs {
			for _, url := range rule.NonResourceURLs {
				out = append(out, right{role: role, scope: scope, verb: verb, url: url})
			}
			for _, group := range rule.APIGroups {
				for _, res := range rule.Resources {
					names := rule.ResourceNames
					if len(names) == 0 {
						names = []string{""}
					}
					for _, name := range names {
						out = append(out, right{role: role, scope: scope, group: group, resource: res, name: name, verb: verb})
					}
				}
			}
		}
	}
	return out
}

// covers reports whether g allows r.
func (g grant) covers(r right) bool {
	scope := "Role"
	if g.cluster {
		scope = "ClusterRole"
	}
	if g.role != r.role || scope != r.scope || !slices.Contains(g.verbs, r.verb) {
		return false
	}
	if r.url != "" {
		return slices.Contains(g.urls, r.url)
	}
	if g.group != r.group || !slices.Contains(g.resources, r.resource) {
		return false
	}
	if len(g.names) == 0 {
		return true
	}
	return r.name != "" && slices.Contains(g.names, r.name)
}

// checkAllowed fails the test for every right no grant allows, and returns
// the grants used.
func checkAllowed(t *testing.T, allowed []grant, source string, rs []right) map[int]bool {
	t.Helper()
	used := map[int]bool{}
	for _, r := range rs {
		if r.verb == "*" || r.resource == "*" || r.group == "*" {
			t.Errorf("%s: %s uses a wildcard", source, r)
			continue
		}
		found := false
		for i, g := range allowed {
			if g.covers(r) {
				used[i], found = true, true
			}
		}
		if !found {
			t.Errorf("%s: %s is in no grant of the allow-list (config/rbac_test.go): add it there with why it is needed, or drop the rule", source, r)
		}
	}
	return used
}

// rolesOf returns the rights of the Roles and ClusterRoles among objs,
// named without prefix.
func rolesOf(t *testing.T, objs []*unstructured.Unstructured) []right {
	t.Helper()
	var out []right
	for _, u := range objs {
		if u.GetKind() != "Role" && u.GetKind() != "ClusterRole" {
			continue
		}
		role := decodeAs[rbacv1.ClusterRole](t, u)
		out = append(out, rights(strings.TrimPrefix(u.GetName(), "longhorn-diskschedule-"), u.GetKind(), role.Rules)...)
	}
	return out
}

// TestRBACAllowList reads every Role and ClusterRole of config/rbac (the
// generated manager-role included), of the second scheduler's component and
// of the chart as it renders with the second scheduler, hooks included, and fails on any right that the allow-list above does not give
// with its reason, on any wildcard, and on a grant that nothing uses.
func TestRBACAllowList(t *testing.T) {
	allowed := allowList()
	files, err := filepath.Glob("rbac/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "scheduler/secondary/rbac.yaml")
	used := map[int]bool{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeManifests(data)
		if err != nil {
			t.Fatalf("decoding %s: %v", f, err)
		}
		maps.Copy(used, checkAllowed(t, allowed, "config/"+f, rolesOf(t, objs)))
	}
	vals := map[string]any{"metrics": map[string]any{"readers": []any{map[string]any{"name": "prometheus-k8s", "namespace": "monitoring"}}},
		"scheduler": map[string]any{"enabled": true}}
	chart := mustRenderChart(t, vals)
	hooks, err := renderHooks(namespace, vals)
	if err != nil {
		t.Fatalf("rendering the chart's hooks: %v", err)
	}
	maps.Copy(used, checkAllowed(t, allowed, "the chart", rolesOf(t, append(chart, hooks...))))
	for i, g := range allowed {
		if !used[i] {
			t.Errorf("the allow-list grants %s %v %v of %s (%s), which no rule uses: drop it", g.role, g.verbs, g.resources, g.group, g.why)
		}
	}
}
