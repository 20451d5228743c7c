package simcluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

func TestNodeCapacity(t *testing.T) {
	cond := func(typ string, ok bool) lhv1.Condition {
		s := lhv1.ConditionStatusTrue
		if !ok {
			s = lhv1.ConditionStatusFalse
		}
		return lhv1.Condition{Type: typ, Status: s}
	}
	type disk struct {
		max, reserved, scheduled int64
		tags                     []string
		typ                      lhv1.DiskType
		unschedulable, noSched   bool
		evicting                 bool
	}
	node := func(mod func(*lhv1.Node), disks ...disk) *lhv1.Node {
		n := &lhv1.Node{
			Spec: lhv1.NodeSpec{AllowScheduling: true, Tags: []string{}, Disks: map[string]lhv1.DiskSpec{}},
			Status: lhv1.NodeStatus{
				Conditions: []lhv1.Condition{cond(lhv1.NodeConditionTypeReady, true), cond(lhv1.NodeConditionTypeSchedulable, true)},
				DiskStatus: map[string]*lhv1.DiskStatus{},
			},
		}
		for i, d := range disks {
			name := fmt.Sprintf("disk-%d", i+1)
			typ := d.typ
			if typ == "" {
				typ = lhv1.DiskTypeFilesystem
			}
			n.Spec.Disks[name] = lhv1.DiskSpec{Type: typ, AllowScheduling: !d.noSched, EvictionRequested: d.evicting,
				StorageReserved: d.reserved, Tags: d.tags}
			n.Status.DiskStatus[name] = &lhv1.DiskStatus{Type: typ, StorageMaximum: d.max, StorageScheduled: d.scheduled,
				Conditions: []lhv1.Condition{cond(lhv1.DiskConditionTypeSchedulable, !d.unschedulable)}}
		}
		if mod != nil {
			mod(n)
		}
		return n
	}
	v1 := simcluster.CapacityQuery{DataEngine: lhv1.DataEngineTypeV1, OverProvisioningPercentage: 100,
		AllowEmptyNodeSelectorVolume: true, AllowEmptyDiskSelectorVolume: true}
	with := func(mod func(*simcluster.CapacityQuery)) simcluster.CapacityQuery {
		q := v1
		mod(&q)
		return q
	}
	tests := []struct {
		name          string
		node          *lhv1.Node
		q             simcluster.CapacityQuery
		wantMax, want int64
	}{
		{"one empty disk", node(nil, disk{max: 400 * gi}), v1, 400 * gi, 400 * gi},
		{"reserved and scheduled space are not free", node(nil, disk{max: 400 * gi, reserved: 40 * gi, scheduled: 100 * gi}), v1, 260 * gi, 260 * gi},
		{"the sum of the disks, the largest as the maximum", node(nil, disk{max: 100 * gi, reserved: 10 * gi}, disk{max: 200 * gi, scheduled: 50 * gi}), v1, 150 * gi, 240 * gi},
		{"over-provisioning scales the limit", node(nil, disk{max: 400 * gi, reserved: 100 * gi, scheduled: 100 * gi}),
			with(func(q *simcluster.CapacityQuery) { q.OverProvisioningPercentage = 200 }), 500 * gi, 500 * gi},
		{"the limit truncates", node(nil, disk{max: 3}), with(func(q *simcluster.CapacityQuery) { q.OverProvisioningPercentage = 50 }), 1, 1},
		{"an overcommitted disk offers nothing, never less", node(nil, disk{max: 100 * gi, scheduled: 150 * gi}, disk{max: 10 * gi}), v1, 10 * gi, 10 * gi},
		{"node not ready", node(func(n *lhv1.Node) { n.Status.Conditions[0].Status = lhv1.ConditionStatusFalse }, disk{max: 400 * gi}), v1, 0, 0},
		{"node not schedulable (cordoned)", node(func(n *lhv1.Node) { n.Status.Conditions[1].Status = lhv1.ConditionStatusFalse }, disk{max: 400 * gi}), v1, 0, 0},
		{"node without conditions", node(func(n *lhv1.Node) { n.Status.Conditions = nil }, disk{max: 400 * gi}), v1, 0, 0},
		{"node scheduling disabled", node(func(n *lhv1.Node) { n.Spec.AllowScheduling = false }, disk{max: 400 * gi}), v1, 0, 0},
		{"node evicting", node(func(n *lhv1.Node) { n.Spec.EvictionRequested = true }, disk{max: 400 * gi}), v1, 0, 0},
		{"node tags lack the selector", node(func(n *lhv1.Node) { n.Spec.Tags = []string{"a"} }, disk{max: 400 * gi}),
			with(func(q *simcluster.CapacityQuery) { q.NodeSelector = []string{"a", "b"} }), 0, 0},
		{"node tags hold the selector", node(func(n *lhv1.Node) { n.Spec.Tags = []string{"b", "a", "c"} }, disk{max: 400 * gi}),
			with(func(q *simcluster.CapacityQuery) { q.NodeSelector = []string{"a", "b"} }), 400 * gi, 400 * gi},
		{"tagged node, no selector, empty selector not allowed", node(func(n *lhv1.Node) { n.Spec.Tags = []string{"a"} }, disk{max: 400 * gi}),
			with(func(q *simcluster.CapacityQuery) { q.AllowEmptyNodeSelectorVolume = false }), 0, 0},
		{"disk scheduling disabled", node(nil, disk{max: 400 * gi, noSched: true}, disk{max: 10 * gi}), v1, 10 * gi, 10 * gi},
		{"disk evicting", node(nil, disk{max: 400 * gi, evicting: true}, disk{max: 10 * gi}), v1, 10 * gi, 10 * gi},
		{"disk not schedulable", node(nil, disk{max: 400 * gi, unschedulable: true}, disk{max: 10 * gi}), v1, 10 * gi, 10 * gi},
		{"disk selector", node(nil, disk{max: 400 * gi}, disk{max: 10 * gi, tags: []string{"ssd"}}),
			with(func(q *simcluster.CapacityQuery) { q.DiskSelector = []string{"ssd"} }), 10 * gi, 10 * gi},
		{"tagged disk, no selector, empty selector not allowed", node(nil, disk{max: 400 * gi}, disk{max: 10 * gi, tags: []string{"ssd"}}),
			with(func(q *simcluster.CapacityQuery) { q.AllowEmptyDiskSelectorVolume = false }), 400 * gi, 400 * gi},
		{"v1 volumes live on filesystem disks", node(nil, disk{max: 400 * gi, typ: lhv1.DiskTypeBlock}, disk{max: 10 * gi}), v1, 10 * gi, 10 * gi},
		{"v2 volumes live on block disks", node(nil, disk{max: 400 * gi, typ: lhv1.DiskTypeBlock}, disk{max: 10 * gi}),
			with(func(q *simcluster.CapacityQuery) { q.DataEngine = lhv1.DataEngineTypeV2 }), 400 * gi, 400 * gi},
		{"a disk only in the status", node(func(n *lhv1.Node) { delete(n.Spec.Disks, "disk-1") }, disk{max: 400 * gi}, disk{max: 10 * gi}), v1, 10 * gi, 10 * gi},
		{"no disks", node(nil), v1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotMax, got := simcluster.NodeCapacity(tt.node, tt.q)
			if gotMax != tt.wantMax || got != tt.want {
				t.Errorf("NodeCapacity = maximum %d, available %d; want %d, %d", gotMax, got, tt.wantMax, tt.want)
			}
		})
	}
}

func TestTopologyKeys(t *testing.T) {
	labels := map[string]string{corev1.LabelHostname: "n1", corev1.LabelTopologyZone: "z", corev1.LabelTopologyRegion: "r", "rack": "7"}
	if got, want := simcluster.TopologyKeys(labels, nil), []string{corev1.LabelHostname, corev1.LabelTopologyZone}; !reflect.DeepEqual(got, want) {
		t.Errorf("no allowed keys: %v, want %v", got, want)
	}
	if got, want := simcluster.TopologyKeys(labels, map[string]bool{"rack": true, "missing": true}), []string{corev1.LabelHostname, "rack", corev1.LabelTopologyZone}; !reflect.DeepEqual(got, want) {
		t.Errorf("rack allowed: %v, want %v", got, want)
	}
	if got, want := simcluster.TopologyKeys(map[string]string{corev1.LabelHostname: "n1"}, nil), []string{corev1.LabelHostname}; !reflect.DeepEqual(got, want) {
		t.Errorf("no zone label: %v, want %v", got, want)
	}
}

// TestStorageCapacity checks Longhorn's storage capacity tracking against
// the API server: the CSIDriver follows the csi-storage-capacity-tracking
// setting, each node's CSINode registers the driver with its hostname and
// zone, and the external-provisioner's capacity controller publishes one
// CSIStorageCapacity per node and WaitForFirstConsumer class (none for an
// Immediate class), owned by the csi-provisioner Deployment, with the
// capacity and maximum volume size of Longhorn's GetCapacity formula; a
// change of a disk's status (a replica placed on it) or of a setting shows
// within the poll interval, without a provisioning to trigger it.
func TestStorageCapacity(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	n1, n2 := nodeName(ns, "n1"), nodeName(ns, "n2")
	const poll = 2 * time.Second
	tracking := &lhv1.Setting{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: simcluster.SettingCSIStorageCapacityTracking}, Value: "true"}
	if err := env.Client.Create(ctx, tracking); err != nil {
		t.Fatal(err)
	}
	wffc, ssd, immediate := ns+"-wffc", ns+"-ssd", ns+"-immediate"
	for _, c := range []struct {
		name    string
		mode    storagev1.VolumeBindingMode
		selects string
	}{{wffc, storagev1.VolumeBindingWaitForFirstConsumer, ""}, {ssd, storagev1.VolumeBindingWaitForFirstConsumer, "ssd"}, {immediate, storagev1.VolumeBindingImmediate, ""}} {
		class := &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: c.name}, Provisioner: simcluster.CSIDriver, VolumeBindingMode: ptr.To(c.mode),
			Parameters: map[string]string{simcluster.ParamNumberOfReplicas: "1"},
		}
		if c.selects != "" {
			class.Parameters[simcluster.ParamDiskSelector] = c.selects
		}
		if err := env.Client.Create(ctx, class); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
	}
	// Nothing here provisions or expands (Longhorn's CSI driver is not there):
	// the CSI driver's capacity alone is under test. The sidecars are made
	// before the simulation starts, as before anything else of a process
	// of their own (CSISidecars).
	sidecars, err := simcluster.NewCSISidecars(t.Context(), env.Config, env.Scheme, simcluster.CSISidecarOptions{
		Namespace: ns, CSIEndpoint: filepath.Join(t.TempDir(), "no-csi-driver.sock"), CapacityPollInterval: poll,
	})
	if err != nil {
		t.Fatal(err)
	}
	startSim(t, simcluster.Options{Namespace: ns, CSI: true,
		NodeIPs: map[string]string{n1: "127.0.0.1", n2: "127.0.0.1"}, Nodes: []simcluster.NodeSpec{
			{Name: n1, Zone: "zone-a", Disks: []simcluster.DiskSpec{disk("disk-1")}},
			{Name: n2, Disks: []simcluster.DiskSpec{
				{Name: "disk-1", Reserved: 10 * gi, Tags: []string{"ssd"}},
				disk("disk-2"),
			}},
		}})
	runUntilCleanup(t, "the CSI sidecars", sidecars.Run)
	// The nodes' status as Longhorn's node controller writes it.
	nodes := []testenv.NodeFixture{
		{Name: n1, Zone: "zone-a", Disks: map[string]testenv.Disk{"disk-1": {UUID: ns + "-n1-1", Size: 400 * gi}}},
		{Name: n2, Disks: map[string]testenv.Disk{
			"disk-1": {UUID: ns + "-n2-1", Size: 100 * gi, Reserved: 10 * gi, Tags: []string{"ssd"}},
			"disk-2": {UUID: ns + "-n2-2", Size: 200 * gi},
		}},
	}
	testenv.Eventually(t, t.Context(), 30*time.Second, "the nodes' status written", func(ctx context.Context) (bool, string, error) {
		for _, n := range nodes {
			if err := n.Apply(ctx, env.Client, ns); err != nil {
				return false, err.Error(), nil
			}
		}
		return true, "", nil
	})
	nodesReady(t, ns, n1, n2)

	testenv.Eventually(t, t.Context(), 10*time.Second, "CSIDriver "+simcluster.CSIDriver+" tracks storage capacity", func(ctx context.Context) (bool, string, error) {
		d := &storagev1.CSIDriver{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: simcluster.CSIDriver}, d); err != nil {
			return false, err.Error(), nil
		}
		return ptr.Deref(d.Spec.StorageCapacity, false) && ptr.Deref(d.Spec.PodInfoOnMount, false),
			fmt.Sprintf("storageCapacity %v, podInfoOnMount %v", ptr.Deref(d.Spec.StorageCapacity, false), ptr.Deref(d.Spec.PodInfoOnMount, false)), nil
	})
	for node, keys := range map[string][]string{n1: {corev1.LabelHostname, corev1.LabelTopologyZone}, n2: {corev1.LabelHostname}} {
		testenv.Eventually(t, t.Context(), 10*time.Second, "CSINode "+node, func(ctx context.Context) (bool, string, error) {
			c := &storagev1.CSINode{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, c); err != nil {
				return false, err.Error(), nil
			}
			for _, d := range c.Spec.Drivers {
				if d.Name == simcluster.CSIDriver {
					return d.NodeID == node && reflect.DeepEqual(d.TopologyKeys, keys), fmt.Sprintf("driver %+v", d), nil
				}
			}
			return false, fmt.Sprintf("drivers %+v", c.Spec.Drivers), nil
		})
	}
	deployment := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "csi-provisioner"}, deployment); err != nil {
		t.Fatalf("the csi-provisioner Deployment: %v", err)
	}

	type key struct{ class, node string }
	want := map[key][2]int64{ // capacity, maximumVolumeSize
		{wffc, n1}: {400 * gi, 400 * gi}, {wffc, n2}: {290 * gi, 200 * gi},
		{ssd, n1}: {0, 0}, {ssd, n2}: {90 * gi, 90 * gi},
	}
	topology := map[string]map[string]string{
		n1: {corev1.LabelHostname: n1, corev1.LabelTopologyZone: "zone-a"},
		n2: {corev1.LabelHostname: n2},
	}
	published := func(what string, timeout time.Duration) {
		t.Helper()
		testenv.Eventually(t, t.Context(), timeout, what, func(ctx context.Context) (bool, string, error) {
			list := &storagev1.CSIStorageCapacityList{}
			if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return false, err.Error(), nil
			}
			got := map[key][2]int64{}
			var problems []string
			for _, c := range list.Items {
				node := ""
				for n, labels := range topology {
					if c.NodeTopology != nil && reflect.DeepEqual(c.NodeTopology.MatchLabels, labels) && len(c.NodeTopology.MatchExpressions) == 0 {
						node = n
					}
				}
				k := key{c.StorageClassName, node}
				if _, dup := got[k]; dup || node == "" {
					problems = append(problems, fmt.Sprintf("%s: class %s, topology %v is not wanted or twice", c.Name, c.StorageClassName, c.NodeTopology))
				}
				if c.Capacity == nil || c.MaximumVolumeSize == nil {
					problems = append(problems, c.Name+": no capacity or maximumVolumeSize")
					continue
				}
				got[k] = [2]int64{c.Capacity.Value(), c.MaximumVolumeSize.Value()}
				if c.Labels["csi.storage.k8s.io/drivername"] != simcluster.CSIDriver || c.Labels["csi.storage.k8s.io/managed-by"] != "external-provisioner" {
					problems = append(problems, fmt.Sprintf("%s: labels %v", c.Name, c.Labels))
				}
				if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].Kind != "Deployment" || c.OwnerReferences[0].UID != deployment.UID ||
					!ptr.Deref(c.OwnerReferences[0].Controller, false) || !strings.HasPrefix(c.Name, "csisc-") {
					problems = append(problems, fmt.Sprintf("%s: owner references %+v", c.Name, c.OwnerReferences))
				}
			}
			if !reflect.DeepEqual(got, want) {
				var lines []string
				for k, v := range got {
					lines = append(lines, fmt.Sprintf("%s/%s %d/%d", k.class, k.node, v[0]/gi, v[1]/gi))
				}
				sort.Strings(lines)
				problems = append(problems, "capacity/maximum (Gi): "+strings.Join(lines, ", "))
			}
			return len(problems) == 0, strings.Join(problems, "; "), nil
		})
	}
	published("the CSIStorageCapacity objects", 30*time.Second)

	// A 50Gi replica placed on n2's ssd disk: once Longhorn's node
	// controller wrote the disk's storageScheduled, the next poll
	// publishes it.
	scheduled := nodes[1].Disks["disk-1"]
	scheduled.Scheduled = 50 * gi
	nodes[1].Disks["disk-1"] = scheduled
	if err := nodes[1].Apply(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	want[key{wffc, n2}] = [2]int64{240 * gi, 200 * gi}
	want[key{ssd, n2}] = [2]int64{40 * gi, 40 * gi}
	published("the capacity after a replica was placed", poll+5*time.Second)
	t.Logf("the disk's new storageScheduled was published %s after it was written (poll interval %s)",
		time.Since(changed).Round(10*time.Millisecond), poll)

	// Over-provisioning 200%: every limit doubles.
	setting := &lhv1.Setting{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "storage-over-provisioning-percentage"}, setting); err != nil {
		t.Fatal(err)
	}
	base := setting.DeepCopy()
	setting.Value = "200"
	if err := env.Client.Patch(ctx, setting, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	want[key{wffc, n1}] = [2]int64{800 * gi, 800 * gi}
	want[key{wffc, n2}] = [2]int64{130*gi + 400*gi, 400 * gi}
	want[key{ssd, n2}] = [2]int64{130 * gi, 130 * gi}
	published("the capacity after over-provisioning became 200%", poll+5*time.Second)

	// Tracking off: the CSIDriver tells kube-scheduler to ignore the objects.
	base = tracking.DeepCopy()
	tracking.Value = "false"
	if err := env.Client.Patch(ctx, tracking, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), 10*time.Second, "CSIDriver without storage capacity tracking", func(ctx context.Context) (bool, string, error) {
		d := &storagev1.CSIDriver{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: simcluster.CSIDriver}, d); err != nil {
			return false, err.Error(), nil
		}
		return !ptr.Deref(d.Spec.StorageCapacity, true), fmt.Sprintf("storageCapacity %v", d.Spec.StorageCapacity), nil
	})
}
