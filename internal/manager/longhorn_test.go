package manager_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const gi = int64(1) << 30

// longhornKinds are the kinds of testdata/longhorn-v1.12.json, in creation order.
var longhornKinds = []struct{ key, kind string }{
	{"settings", "Setting"}, {"nodes", "Node"}, {"volumes", "Volume"}, {"replicas", "Replica"}, {"backingImages", "BackingImage"},
}

// TestNeverWritesLonghorn creates Longhorn objects exactly as Longhorn
// v1.12 writes them (from raw JSON: volumeSize and size as strings,
// currentState stopping, conditions with empty times, fields this project
// never reads such as engineName, image and instanceManagerName), runs the
// manager under a user bound to the manager's generated ClusterRole
// (config/rbac/role.yaml, which may only read Longhorn's kinds), with every
// request it sends audited, until every disk's ledger has its limit and the
// adopted replicas and copies, and a little longer; then every Longhorn
// object is byte-for-byte what it was, and the manager wrote no Longhorn kind
// and was refused nothing.
func TestNeverWritesLonghorn(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t)
	uuid := map[string]string{"UUID-A": ns + "-uuid-a", "UUID-B": ns + "-uuid-b", "UUID-C": ns + "-uuid-c"}
	objects := createLonghornObjects(t, ctx, ns, uuid)
	before := snapshot(t, ctx, ns)
	if len(before) != len(objects) {
		t.Fatalf("read back %d Longhorn objects, created %d", len(before), len(objects))
	}
	checkStoredAsLonghornWritesThem(t, before)

	user := "system:serviceaccount:" + ns + ":diskschedule-manager"
	grantRole(t, ctx, ns, user)
	cfg, err := env.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	a := &audit{}
	m, err := managertest.Start(env, a.wrap(cfg), manager.Options{Namespace: ns, GateGrace: time.Second, ExtenderBindAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })

	// Every disk's ledger: limit (storageMaximum − storageReserved) × 200%,
	// and what Longhorn persisted there adopted.
	want := map[string]struct {
		limit    int64
		replicas map[string]int64
		images   map[string]int64
		ready    bool
	}{
		uuid["UUID-A"]: {200 * gi, map[string]int64{"pvc-0a1b-r-1f2e3d4c": 10 * gi}, nil, true},
		uuid["UUID-B"]: {90 * gi, map[string]int64{"pvc-9f8e-r-0b1c2d3e": 5 * gi}, map[string]int64{"ubuntu-2404": 2 * gi}, true},
		uuid["UUID-C"]: {360 * gi, map[string]int64{"pvc-0a1b-r-5a6b7c8d": 10 * gi}, nil, false},
	}
	for disk, w := range want {
		testenv.WaitLedger(t, ctx, env.Client, ns, disk, 30*time.Second, "its limit and what Longhorn persisted there", func(ds *dsv1.DiskSchedule) bool {
			var sum int64
			for _, m := range []map[string]int64{w.replicas, w.images} {
				for _, s := range m {
					sum += s
				}
			}
			return ds.Status.StorageLimit == w.limit && ds.Status.StorageScheduled == sum &&
				ds.Status.ObservedGeneration == ds.Generation &&
				equalRequests(ds.Spec.Replicas, ds.Status.Replicas, w.replicas) &&
				equalRequests(ds.Spec.BackingImages, ds.Status.BackingImages, w.images) &&
				meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady) == w.ready
		})
	}
	list := &dsv1.DiskScheduleList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(want) {
		t.Errorf("%d DiskSchedules, want one per disk (%d)", len(list.Items), len(want))
	}

	// A little longer: a request no Longhorn write backs is granted, then
	// released once the grace period is over, so every controller has run
	// through several rounds, timers included.
	ghost := uuid["UUID-A"]
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds := &dsv1.DiskSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ghost}, ds); err != nil {
			return err
		}
		ds.Spec.Replicas["pvc-0a1b-r-ghost"] = dsv1.RequestedBytes(gi)
		return env.Client.Update(ctx, ds)
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitLedger(t, ctx, env.Client, ns, ghost, 30*time.Second, "the ghost request granted", func(ds *dsv1.DiskSchedule) bool {
		return ds.Status.Replicas["pvc-0a1b-r-ghost"].ScheduledSize == gi
	})
	testenv.WaitLedger(t, ctx, env.Client, ns, ghost, 30*time.Second, "the ghost request released", func(ds *dsv1.DiskSchedule) bool {
		_, found := ds.Status.Replicas["pvc-0a1b-r-ghost"]
		return !found && ds.Status.StorageScheduled == 10*gi
	})

	after := snapshot(t, ctx, ns)
	for key, b := range before {
		a, ok := after[key]
		switch {
		case !ok:
			t.Errorf("%s is gone", key)
		case a.GetResourceVersion() != b.GetResourceVersion():
			t.Errorf("%s was written: resourceVersion %s → %s", key, b.GetResourceVersion(), a.GetResourceVersion())
		case !reflect.DeepEqual(a.Object, b.Object):
			t.Errorf("%s changed:\nbefore %v\nafter  %v", key, b.Object, a.Object)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d Longhorn objects after the run, %d before", len(after), len(before))
	}

	written := a.written()
	t.Logf("the manager sent %d requests; writes: %s", a.requests, strings.Join(written, ", "))
	for _, w := range written {
		res := strings.SplitN(w, " ", 2)[1]
		if !strings.HasPrefix(res, "longhorn.io/diskschedules") && !strings.HasPrefix(res, "events.k8s.io/events") &&
			!strings.HasPrefix(res, "/events") && !strings.HasPrefix(res, "coordination.k8s.io/leases") {
			t.Errorf("the manager wrote %s", w)
		}
	}
	for _, r := range a.refused {
		t.Errorf("the manager was refused: %s", r)
	}
}

// createLonghornObjects creates the objects of testdata/longhorn-v1.12.json
// in namespace as Longhorn does: the object, then its status through the
// status subresource. uuids replace the placeholder disk UUIDs.
func createLonghornObjects(t *testing.T, ctx context.Context, namespace string, uuids map[string]string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "longhorn-v1.12.json"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), "NAMESPACE", namespace)
	for placeholder, uuid := range uuids {
		text = strings.ReplaceAll(text, placeholder, uuid)
	}
	var created []*unstructured.Unstructured
	uids := map[string]string{}
	for _, k := range longhornKinds {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(text), &doc); err != nil {
			t.Fatal(err)
		}
		var items []map[string]any
		if err := json.Unmarshal(doc[k.key], &items); err != nil {
			t.Fatalf("%s: %v", k.key, err)
		}
		for _, item := range items {
			obj := &unstructured.Unstructured{Object: item}
			fillVolumeUIDs(obj, uids)
			status, hasStatus := item["status"]
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("creating %s %s: %v", k.kind, obj.GetName(), err)
			}
			if hasStatus {
				obj.Object["status"] = status
				if err := env.Client.Status().Update(ctx, obj); err != nil {
					t.Fatalf("writing the status of %s %s: %v", k.kind, obj.GetName(), err)
				}
			}
			if k.kind == "Volume" {
				uids[obj.GetName()] = string(obj.GetUID())
			}
			created = append(created, obj)
		}
	}
	return created
}

// fillVolumeUIDs sets the UID of each owner reference to a Volume.
func fillVolumeUIDs(obj *unstructured.Unstructured, uids map[string]string) {
	refs := obj.GetOwnerReferences()
	for i := range refs {
		if uid, ok := uids[refs[i].Name]; ok && refs[i].Kind == "Volume" {
			refs[i].UID = types.UID(uid)
		}
	}
	if len(refs) > 0 {
		obj.SetOwnerReferences(refs)
	}
}

// snapshot reads every Longhorn object of namespace, by "Kind/name".
func snapshot(t *testing.T, ctx context.Context, namespace string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, k := range longhornKinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("longhorn.io/v1beta2")
		list.SetKind(k.kind + "List")
		if err := env.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			out[k.kind+"/"+list.Items[i].GetName()] = &list.Items[i]
		}
	}
	return out
}

// checkStoredAsLonghornWritesThem checks that the API server kept what
// Longhorn wrote, fields this project never reads included: Longhorn's own
// CRDs are installed, not a subset.
func checkStoredAsLonghornWritesThem(t *testing.T, objs map[string]*unstructured.Unstructured) {
	t.Helper()
	for _, c := range []struct {
		key   string
		path  []string
		value any
	}{
		{"Replica/pvc-0a1b-r-1f2e3d4c", []string{"spec", "volumeSize"}, "10737418240"},
		{"Replica/pvc-0a1b-r-1f2e3d4c", []string{"status", "currentState"}, "stopping"},
		{"Replica/pvc-0a1b-r-1f2e3d4c", []string{"spec", "engineName"}, "pvc-0a1b-e-0"},
		{"Replica/pvc-0a1b-r-1f2e3d4c", []string{"spec", "image"}, "longhornio/longhorn-engine:v1.12.0"},
		{"Replica/pvc-0a1b-r-1f2e3d4c", []string{"spec", "dataDirectoryName"}, "pvc-0a1b-3c4d5e6f"},
		{"Replica/pvc-0a1b-r-1f2e3d4c", []string{"status", "instanceManagerName"}, "instance-manager-6b9c0b2a5e6b2e4f0a1d2c3b4a5f6e7d"},
		{"Volume/pvc-0a1b", []string{"spec", "size"}, "10737418240"},
		{"Volume/pvc-0a1b", []string{"spec", "backupBlockSize"}, "2097152"},
		{"Volume/pvc-0a1b", []string{"status", "kubernetesStatus", "pvcName"}, "data-web-0"},
		{"Node/worker-1", []string{"status", "snapshotCheckStatus"}, map[string]any{}},
		{"BackingImage/ubuntu-2404", []string{"status", "virtualSize"}, int64(3758096384)},
	} {
		obj, ok := objs[c.key]
		if !ok {
			t.Errorf("%s was not stored", c.key)
			continue
		}
		got, found, err := unstructured.NestedFieldNoCopy(obj.Object, c.path...)
		if err != nil || !found || !reflect.DeepEqual(got, c.value) {
			t.Errorf("%s %s = %#v (found %v, %v), want %#v as Longhorn wrote it", c.key, strings.Join(c.path, "."), got, found, err, c.value)
		}
	}
	conds, _, _ := unstructured.NestedSlice(objs["Replica/pvc-0a1b-r-1f2e3d4c"].Object, "status", "conditions")
	if len(conds) == 0 || conds[0].(map[string]any)["lastTransitionTime"] != "" {
		t.Errorf("the replica's conditions with empty times were not stored as written: %v", conds)
	}
}

// longhornResources are the resources of Longhorn's kinds.
var longhornResources = map[string]bool{"nodes": true, "volumes": true, "replicas": true, "backingimages": true, "settings": true,
	"engines": true, "instancemanagers": true, "engineimages": true, "backingimagemanagers": true, "backingimagedatasources": true,
	"sharemanagers": true, "orphans": true, "snapshots": true, "volumeattachments": true, "backups": true, "backupvolumes": true,
	"backuptargets": true, "backupbackingimages": true, "recurringjobs": true, "supportbundles": true, "systembackups": true,
	"systemrestores": true}

// grantRole binds the manager's generated ClusterRole and Role
// (config/rbac/role.yaml, the Role in ns instead of Longhorn's namespace) to
// user, after checking they let the manager only read Longhorn's kinds.
func grantRole(t *testing.T, ctx context.Context, ns, user string) {
	t.Helper()
	clusterRole, role := generatedRoles(t)
	for _, rules := range [][]rbacv1.PolicyRule{clusterRole.Rules, role.Rules} {
		for _, rule := range rules {
			if !slices.Contains(rule.APIGroups, "longhorn.io") && !slices.Contains(rule.APIGroups, "*") {
				continue
			}
			for _, res := range rule.Resources {
				base := strings.SplitN(res, "/", 2)[0]
				if !longhornResources[base] && res != "*" {
					continue
				}
				for _, verb := range rule.Verbs {
					if verb != "get" && verb != "list" && verb != "watch" {
						t.Errorf("config/rbac/role.yaml lets the manager %s %s.longhorn.io", verb, res)
					}
				}
			}
		}
	}
	clusterRole.ObjectMeta = metav1.ObjectMeta{Name: ns + "-manager"}
	role.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "manager"}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	for _, obj := range []client.Object{
		clusterRole,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-manager"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole.Name},
			Subjects:   subjects,
		},
		role,
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manager"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   subjects,
		},
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
}

// generatedRoles reads the ClusterRole and the Role controller-gen
// generates into config/rbac/role.yaml.
func generatedRoles(t *testing.T) (*rbacv1.ClusterRole, *rbacv1.Role) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.RepoRoot, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var clusterRole *rbacv1.ClusterRole
	var role *rbacv1.Role
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("reading config/rbac/role.yaml: %v", err)
		}
		switch meta.Kind {
		case "ClusterRole":
			clusterRole = &rbacv1.ClusterRole{}
			err = yaml.UnmarshalStrict([]byte(doc), clusterRole)
		case "Role":
			role = &rbacv1.Role{}
			err = yaml.UnmarshalStrict([]byte(doc), role)
		}
		if err != nil {
			t.Fatalf("reading the %s of config/rbac/role.yaml: %v", meta.Kind, err)
		}
	}
	if clusterRole == nil || role == nil {
		t.Fatalf("config/rbac/role.yaml holds no ClusterRole or no Role")
	}
	return clusterRole, role
}

// equalRequests reports whether spec holds exactly want and status granted
// each at its size.
func equalRequests(spec map[string]dsv1.RequestedBytes, status map[string]dsv1.RequestStatus, want map[string]int64) bool {
	if len(spec) != len(want) {
		return false
	}
	for name, size := range want {
		st := status[name]
		if int64(spec[name]) != size || st.State != dsv1.RequestStateScheduled || st.ScheduledSize != size {
			return false
		}
	}
	return true
}
