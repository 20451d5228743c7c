package simlonghorn_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/internal/simlonghorn"
	"github.com/longhorn/diskschedule/internal/testenv"
)

// TestNodesAsLonghornWritesThem checks the Longhorn Nodes and Settings the
// simulated Longhorn creates: every field where longhorn-manager v1.12 puts
// it, nothing pruned by Longhorn's CRDs, and the status following the
// Kubernetes node (cordon) and the settings (disk pressure).
func TestNodesAsLonghornWritesThem(t *testing.T) {
	ns := env.NewNamespace(t)
	n1, n2 := nodeName(ns, "n1"), nodeName(ns, "n2")
	startSim(t, simlonghorn.Options{Namespace: ns, PlaceReplicas: true, Nodes: []simlonghorn.NodeSpec{
		{Name: n1, Zone: "zone-a", Region: "region-1", Tags: []string{"main"}, Disks: []simlonghorn.DiskSpec{
			{Name: "disk-1", UUID: ns + "-uuid-1", Size: 100 * gi, Reserved: 10 * gi, Tags: []string{"ssd"}},
			{Name: "disk-2", Size: 50 * gi},
		}},
		{Name: n2, Disks: []simlonghorn.DiskSpec{{Name: "disk-1", UUID: ns + "-uuid-3", Size: 200 * gi}}},
	}})
	nodesReady(t, ns, n1, n2)
	ctx := context.Background()

	n, err := getNode(ctx, ns, n1)
	if err != nil {
		t.Fatal(err)
	}
	wantSpec := lhv1.NodeSpec{Name: n1, AllowScheduling: true, Tags: []string{"main"}, Disks: map[string]lhv1.DiskSpec{
		"disk-1": {Type: lhv1.DiskTypeFilesystem, Path: "/var/lib/longhorn/" + n1 + "/disk-1/", AllowScheduling: true, StorageReserved: 10 * gi, Tags: []string{"ssd"}},
		"disk-2": {Type: lhv1.DiskTypeFilesystem, Path: "/var/lib/longhorn/" + n1 + "/disk-2/", AllowScheduling: true, Tags: []string{}},
	}}
	if !reflect.DeepEqual(n.Spec, wantSpec) {
		t.Errorf("node spec = %+v, want %+v", n.Spec, wantSpec)
	}
	if n.Status.Zone != "zone-a" || n.Status.Region != "region-1" {
		t.Errorf("zone/region = %q/%q, want zone-a/region-1", n.Status.Zone, n.Status.Region)
	}
	d1, d2 := n.Status.DiskStatus["disk-1"], n.Status.DiskStatus["disk-2"]
	if d1.DiskUUID != ns+"-uuid-1" || d1.StorageMaximum != 100*gi || d1.StorageAvailable != 100*gi || d1.StorageScheduled != 0 ||
		d1.DiskName != "disk-1" || d1.DiskPath != "/var/lib/longhorn/"+n1+"/disk-1/" || d1.Type != lhv1.DiskTypeFilesystem ||
		d1.ScheduledReplica == nil || len(d1.ScheduledReplica) != 0 || d1.ScheduledBackingImage == nil {
		t.Errorf("disk-1 status = %+v", d1)
	}
	if d2.DiskUUID == "" || d2.DiskUUID == d1.DiskUUID || d2.StorageMaximum != 50*gi {
		t.Errorf("disk-2 status = %+v, want a generated UUID and 50Gi", d2)
	}
	for _, c := range append(append([]lhv1.Condition{}, n.Status.Conditions...), d1.Conditions...) {
		if c.LastTransitionTime == "" || c.LastProbeTime != "" {
			t.Errorf("condition %+v: want Longhorn's string lastTransitionTime and an empty lastProbeTime", c)
		}
	}
	assertRoundTrip(t, n)

	// Longhorn's default scheduling settings exist, applied.
	for name, value := range settings.Defaults() {
		if !settings.IsLonghorn(name) {
			continue
		}
		s := &lhv1.Setting{}
		testenv.Eventually(t, t.Context(), 10*time.Second, "setting "+name, func(ctx context.Context) (bool, string, error) {
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
				return false, err.Error(), nil
			}
			return s.Value == value && s.Status.Applied, fmt.Sprintf("value %q applied %v", s.Value, s.Status.Applied), nil
		})
	}

	// Cordoning the Kubernetes node makes the Longhorn node unschedulable.
	setUnschedulable(t, n1, true)
	testenv.Eventually(t, t.Context(), 10*time.Second, "cordoned node unschedulable", func(ctx context.Context) (bool, string, error) {
		n, err := getNode(ctx, ns, n1)
		if err != nil {
			return false, err.Error(), nil
		}
		c := cond(n.Status.Conditions, lhv1.NodeConditionTypeSchedulable)
		return c.Status == lhv1.ConditionStatusFalse && c.Reason == lhv1.NodeConditionReasonKubernetesNodeCordoned, fmt.Sprintf("%+v", c), nil
	})
	// With disable-scheduling-on-cordoned-node false it is schedulable again.
	setSetting(t, ns, settings.DisableSchedulingOnCordonedNode, "false")
	nodesReady(t, ns, n1)
	setUnschedulable(t, n1, false)

	// storage-minimal-available-percentage 100 puts every disk under pressure.
	setSetting(t, ns, settings.StorageMinimalAvailablePercentage, "100")
	testenv.Eventually(t, t.Context(), 10*time.Second, "disk pressure", func(ctx context.Context) (bool, string, error) {
		n, err := getNode(ctx, ns, n2)
		if err != nil {
			return false, err.Error(), nil
		}
		c := cond(n.Status.DiskStatus["disk-1"].Conditions, lhv1.DiskConditionTypeSchedulable)
		return c.Status == lhv1.ConditionStatusFalse && c.Reason == lhv1.DiskConditionReasonDiskPressure &&
			strings.Contains(c.Message, "Actual space usage condition failed"), fmt.Sprintf("%+v", c), nil
	})
	setSetting(t, ns, settings.StorageMinimalAvailablePercentage, "25")
	nodesReady(t, ns, n2)
}

// TestNodesOnly checks PlaceReplicas false: the nodes exist and report
// their disks, and the replicas others write count in storageScheduled,
// but nothing creates or places replicas.
func TestNodesOnly(t *testing.T) {
	ns := env.NewNamespace(t)
	n1 := nodeName(ns, "n1")
	startSim(t, simlonghorn.Options{Namespace: ns, Nodes: []simlonghorn.NodeSpec{
		{Name: n1, Disks: []simlonghorn.DiskSpec{{Name: "disk-1", UUID: ns + "-uuid-1", Size: 100 * gi}}},
	}})
	nodesReady(t, ns, n1)
	ctx := context.Background()

	vol := newVolume(t, ns, "vol-1", 10, nil)
	if err := env.Client.Create(ctx, vol); err != nil {
		t.Fatal(err)
	}
	// A replica written by someone else (as a test playing Longhorn would):
	// created after the volume, so once it is counted the volume has been
	// seen too.
	r := &lhv1.Replica{
		ObjectMeta: metav1.ObjectMeta{Name: "other-r-1", Namespace: ns},
		Spec: lhv1.ReplicaSpec{InstanceSpec: lhv1.InstanceSpec{VolumeName: "other", VolumeSize: 30 * gi, NodeID: n1,
			DataEngine: lhv1.DataEngineTypeV1, DesireState: lhv1.InstanceStateStopped}, DiskID: ns + "-uuid-1", Active: true},
	}
	if err := env.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), 10*time.Second, "the other replica counted", func(ctx context.Context) (bool, string, error) {
		n, err := getNode(ctx, ns, n1)
		if err != nil {
			return false, err.Error(), nil
		}
		st := n.Status.DiskStatus["disk-1"]
		return st.StorageScheduled == 30*gi && st.ScheduledReplica["other-r-1"] == 30*gi, fmt.Sprintf("%+v", st), nil
	})
	rs, err := replicasOf(ctx, ns, vol.Name)
	if err != nil {
		t.Fatal(err)
	}
	got := &lhv1.Volume{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vol), got); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 0 || got.Status.State != "" || len(got.Status.Conditions) != 0 {
		t.Errorf("nodes only: volume has %d replicas and status %+v, want none", len(rs), got.Status)
	}
	other := &lhv1.Replica{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), other); err != nil {
		t.Fatal(err)
	}
	if other.Status.CurrentState != "" {
		t.Errorf("nodes only: the other replica's instance was touched: %+v", other.Status)
	}
}

// setUnschedulable cordons or uncordons a Kubernetes node.
func setUnschedulable(t *testing.T, name string, unschedulable bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Name: name}, n); err != nil {
			return err
		}
		n.Spec.Unschedulable = unschedulable
		return env.Client.Update(context.Background(), n)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setSetting sets a Longhorn setting's value.
func setSetting(t *testing.T, ns, name, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := &lhv1.Setting{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
			return err
		}
		s.Value = value
		return env.Client.Update(context.Background(), s)
	})
	if err != nil {
		t.Fatal(err)
	}
}
