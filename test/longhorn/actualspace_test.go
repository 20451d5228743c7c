package longhorn_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// TestActualSpaceOnADiskThatFills: the ledger's actual-space rule
// (ledger.HasActualSpace, what the gate and the extender apply) and
// Longhorn's own scheduler decide alike on a disk that fills with written
// bytes, Longhorn's own disk monitor measuring it with statfs. On two
// 10Gi disks, a pod writes 6Gi into a volume on node-1's disk, and 2Gi
// into a volume on node-2's; the second volume is then given a second
// replica, which only node-1's disk can take. With 6Gi written there,
// the rule says that disk cannot take a replica of 2Gi of data (its
// available bytes less 2Gi are not above 25% of 10Gi) and Longhorn's
// volume controller refuses the replica for storage; once the first volume is deleted
// (Longhorn's replica cleanup removes its data) and Longhorn measured the
// disk again, the rule says it can, Longhorn places the replica there, the
// ledger grants it and the rebuild copies its 2Gi onto the disk.
func TestActualSpaceOnADiskThatFills(t *testing.T) {
	topo := &sandbox.Topology{}
	for i, tag := range []string{"fill", "other"} {
		topo.Nodes = append(topo.Nodes, sandbox.Node{Name: fmt.Sprintf("node-%d", i+1), Disks: []sandbox.Disk{{Name: "disk-1", Size: 10 * gib, Tags: []string{tag, "any"}}}})
	}
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: sandbox.Options{Topology: topo}, TailLogs: []string{"longhorn-controllers.log"}})
	c := sb.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	for _, tag := range []string{"fill", "other"} {
		class := sandbox.StorageClass()
		class.Name, class.Annotations = tag, nil
		class.Parameters[simcluster.ParamDiskSelector] = tag
		class.Parameters[simcluster.ParamDataLocality] = string(lhv1.DataLocalityDisabled)
		if err := c.Create(ctx, class); err != nil {
			t.Fatal(err)
		}
	}
	setting := &lhv1.Setting{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: string(lhtypes.SettingNameStorageMinimalAvailablePercentage)}, setting); err != nil {
		t.Fatal(err)
	}
	minimal, err := strconv.ParseInt(setting.Value, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", setting.Name, setting.Value, err)
	}

	filler := runWriter(ctx, t, c, "filler", "fill", "8Gi", "6Gi")
	small := runWriter(ctx, t, c, "small", "other", "2Gi", "2Gi")
	disk := func(ctx context.Context) (*lhv1.DiskStatus, error) {
		n := &lhv1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: "node-1"}, n); err != nil {
			return nil, err
		}
		return n.Status.DiskStatus["disk-1"], nil
	}
	var actual int64
	testenv.Eventually(t, ctx, 2*time.Minute, "node-1's disk measured with the 6Gi written, and volume "+small+" holding 2Gi", func(ctx context.Context) (bool, string, error) {
		d, err := disk(ctx)
		if err != nil || d == nil {
			return false, "no disk status", err
		}
		v := &lhv1.Volume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: small}, v); err != nil {
			return false, "", err
		}
		actual = v.Status.ActualSize
		return d.StorageAvailable <= 4*gib && actual == 2*gib, fmt.Sprintf("node-1 disk-1 available %d MiB; %s actualSize %d MiB", d.StorageAvailable/mib, small, actual/mib), nil
	})
	d, err := disk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ledger.HasActualSpace(d.StorageAvailable, actual, d.StorageMaximum, minimal) {
		t.Fatalf("the ledger's rule says node-1's disk (%d MiB available of %d) can take a replica of %d MiB of data; the test needs a disk that cannot",
			d.StorageAvailable/mib, d.StorageMaximum/mib, actual/mib)
	}

	// A second replica for the small volume, on any disk: only node-1's
	// can take it (a volume's replicas go to different nodes).
	setReplicas(ctx, t, c, small, 2, []string{"any"})
	// Longhorn's volume controller checks a new replica against every
	// disk before it creates it (its precheck) and reports the volume not
	// Scheduled, "insufficient storage".
	testenv.Eventually(t, ctx, time.Minute, "Longhorn refuses "+small+"'s second replica for storage, as the rule says", func(ctx context.Context) (bool, string, error) {
		unplaced, placed, err := replicasOf(ctx, c, small)
		if err != nil {
			return false, "", err
		}
		v := &lhv1.Volume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: small}, v); err != nil {
			return false, "", err
		}
		cond := scheduledCondition(v)
		return placed == 1 && cond.Status == lhv1.ConditionStatusFalse && strings.Contains(cond.Message, "insufficient storage"),
			fmt.Sprintf("%d unplaced, %d placed; Scheduled %s: %s", unplaced, placed, cond.Status, cond.Message), nil
	})
	if _, placed, err := replicasOf(ctx, c, small); err != nil || placed != 1 {
		t.Fatalf("after Longhorn's scheduler looked again: %d placed (%v); want the first replica alone placed", placed, err)
	}

	// The filler goes: its replica's data leaves node-1's disk.
	for _, o := range []client.Object{&corev1.Pod{}, &corev1.PersistentVolumeClaim{}} {
		o.SetNamespace("default")
		o.SetName("filler")
		if err := c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, ctx, 3*time.Minute, "node-1's disk measured again, and "+small+"'s second replica placed there, granted, rebuilt and running", func(ctx context.Context) (bool, string, error) {
		d, err := disk(ctx)
		if err != nil || d == nil {
			return false, "no disk status", err
		}
		replicas := &lhv1.ReplicaList{}
		if err := c.List(ctx, replicas, client.InNamespace(sandbox.Namespace), client.MatchingLabels{"longhornvolume": small}); err != nil {
			return false, "", err
		}
		var onNode1 *lhv1.Replica
		for i := range replicas.Items {
			if replicas.Items[i].Spec.NodeID == "node-1" {
				onNode1 = &replicas.Items[i]
			}
		}
		if onNode1 == nil {
			return false, fmt.Sprintf("node-1 disk-1 available %d MiB; %s has no replica on node-1; filler's volume %s", d.StorageAvailable/mib, small, filler), nil
		}
		ds := &dsv1.DiskSchedule{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: onNode1.Spec.DiskID}, ds); err != nil {
			return false, err.Error(), nil
		}
		granted := ds.Status.Replicas[onNode1.Name].State == dsv1.RequestStateScheduled
		v := &lhv1.Volume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: small}, v); err != nil {
			return false, "", err
		}
		return granted && onNode1.Status.CurrentState == lhv1.InstanceStateRunning && v.Status.Robustness == lhv1.VolumeRobustnessHealthy,
			fmt.Sprintf("replica %s on node-1 %s, granted %v; volume %s", onNode1.Name, onNode1.Status.CurrentState, granted, v.Status.Robustness), nil
	})
	if d, err = disk(ctx); err != nil {
		t.Fatal(err)
	}
	// What Longhorn measured before it placed the replica said yes: the
	// rule agrees (the replica's 2Gi are on the disk now, so the disk is
	// read as it is now plus those bytes).
	if !ledger.HasActualSpace(d.StorageAvailable+actual, actual, d.StorageMaximum, minimal) {
		t.Errorf("Longhorn placed a replica of %d MiB of data on node-1's disk (%d MiB available now, of %d) that the ledger's rule refuses", actual/mib, d.StorageAvailable/mib, d.StorageMaximum/mib)
	}
}

// setReplicas sets the volume's replica count and disk selector, as a
// user does through Longhorn's volume spec.
func setReplicas(ctx context.Context, t *testing.T, c client.Client, volume string, n int, selector []string) {
	t.Helper()
	v := &lhv1.Volume{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: volume}, v); err != nil {
		t.Fatal(err)
	}
	base := v.DeepCopy()
	v.Spec.NumberOfReplicas, v.Spec.DiskSelector = n, selector
	if err := c.Patch(ctx, v, client.MergeFrom(base)); err != nil {
		t.Fatalf("volume %s: %d replicas on disks %v: %v", volume, n, selector, err)
	}
}

// replicasOf counts the volume's replicas not placed and placed on a disk.
func replicasOf(ctx context.Context, c client.Client, volume string) (unplaced, placed int, err error) {
	replicas := &lhv1.ReplicaList{}
	if err := c.List(ctx, replicas, client.InNamespace(sandbox.Namespace), client.MatchingLabels{"longhornvolume": volume}); err != nil {
		return 0, 0, err
	}
	for _, r := range replicas.Items {
		if r.Spec.DiskID == "" {
			unplaced++
		} else {
			placed++
		}
	}
	return unplaced, placed, nil
}

// scheduledCondition returns the volume's Scheduled condition.
func scheduledCondition(v *lhv1.Volume) lhv1.Condition {
	for _, c := range v.Status.Conditions {
		if c.Type == lhv1.VolumeConditionTypeScheduled {
			return c
		}
	}
	return lhv1.Condition{}
}
