package volume_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/testenv"
)

const gi = int64(1) << 30

// cluster creates nodes with one disk of diskSize each and starts a manager.
func cluster(t *testing.T, ns string, nodes int, diskSize int64) {
	t.Helper()
	ctx := context.Background()
	m, err := env.StartManager(env.Config, manager.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	for i := range nodes {
		f := testenv.NodeFixture{Name: fmt.Sprintf("%s-n%d", ns, i),
			Disks: map[string]testenv.Disk{"disk-1": {UUID: fmt.Sprintf("%s-d%d", ns, i), Size: diskSize}}}
		if err := f.CreateNode(ctx, env.Client, ns); err != nil {
			t.Fatal(err)
		}
	}
}

func newVolume(ns, name string, size int64) *longhornv1.Volume {
	return &longhornv1.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: longhornv1.VolumeSpec{Size: *resource.NewQuantity(size, resource.BinarySI), NumberOfReplicas: 1,
			DataLocality: longhornv1.DataLocalityDisabled},
	}
}

// createConcurrently creates the volumes from one goroutine each.
func createConcurrently(t *testing.T, vols []*longhornv1.Volume) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(vols))
	for _, v := range vols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- env.Client.Create(context.Background(), v)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// scheduledCounts returns how many volumes are Scheduled=True and how many
// are Scheduled=False for lack of space.
func scheduledCounts(ctx context.Context, ns string) (scheduled, failed int, err error) {
	list := &longhornv1.VolumeList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	for _, v := range list.Items {
		c := meta.FindStatusCondition(v.Status.Conditions, longhornv1.VolumeConditionScheduled)
		switch {
		case c == nil:
		case c.Status == metav1.ConditionTrue:
			scheduled++
		case c.Status == metav1.ConditionFalse && c.Reason == longhornv1.VolumeReasonReplicaSchedulingFailure && c.Message != "":
			failed++
		}
	}
	return scheduled, failed, nil
}

// checkLedgers fails when any ledger grants more than its limit, and returns
// the bytes granted in all.
func checkLedgers(t *testing.T, ctx context.Context, ns string) int64 {
	t.Helper()
	list := &longhornv1.DiskScheduleList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, ds := range list.Items {
		if ds.Status.StorageScheduled > ds.Status.StorageLimit {
			t.Errorf("ledger %s grants %d bytes over its limit %d", ds.Name, ds.Status.StorageScheduled, ds.Status.StorageLimit)
		}
		total += ds.Status.StorageScheduled
	}
	return total
}

// TestManyVolumesAtOnce creates 20 volumes of 100Gi with one replica each,
// concurrently, on 4 disks of 400Gi: exactly 16 fit.
func TestManyVolumesAtOnce(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	cluster(t, ns, 4, 400*gi)
	var vols []*longhornv1.Volume
	for i := range 20 {
		vols = append(vols, newVolume(ns, fmt.Sprintf("vol-%02d", i), 100*gi))
	}
	createConcurrently(t, vols)

	waitCounts(t, ctx, ns, 16, 4)
	if total := checkLedgers(t, ctx, ns); total != 1600*gi {
		t.Errorf("ledgers grant %d bytes in all, want 1600Gi", total)
	}

	// Deleting 4 scheduled volumes lets the other 4 schedule with no further action.
	list := &longhornv1.VolumeList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for i := range list.Items {
		v := &list.Items[i]
		if deleted < 4 && meta.IsStatusConditionTrue(v.Status.Conditions, longhornv1.VolumeConditionScheduled) {
			if err := env.Client.Delete(ctx, v); err != nil {
				t.Fatal(err)
			}
			deleted++
		}
	}
	waitCounts(t, ctx, ns, 16, 0)
	if total := checkLedgers(t, ctx, ns); total != 1600*gi {
		t.Errorf("after the deletions, ledgers grant %d bytes in all, want 1600Gi", total)
	}
}

func waitCounts(t *testing.T, ctx context.Context, ns string, wantScheduled, wantFailed int) {
	t.Helper()
	var scheduled, failed int
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		scheduled, failed, err = scheduledCounts(ctx, ns)
		checkLedgers(t, ctx, ns)
		return scheduled == wantScheduled && failed == wantFailed, err
	})
	if err != nil {
		t.Fatalf("want %d Scheduled=True and %d Scheduled=False volumes, have %d and %d: %v",
			wantScheduled, wantFailed, scheduled, failed, err)
	}
}

// TestConcurrentExpansions expands three volumes on one shared disk at once
// when only one expansion fits: it completes, the others keep their size.
func TestConcurrentExpansions(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	cluster(t, ns, 1, 400*gi)
	var vols []*longhornv1.Volume
	for i := range 3 {
		vols = append(vols, newVolume(ns, fmt.Sprintf("vol-%d", i), 100*gi))
	}
	createConcurrently(t, vols)
	waitCounts(t, ctx, ns, 3, 0)

	var wg sync.WaitGroup
	for _, v := range vols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			patch := client.MergeFrom(v.DeepCopy())
			v.Spec.Size = *resource.NewQuantity(200*gi, resource.BinarySI)
			if err := env.Client.Patch(ctx, v, patch); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()

	var done, failed int
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		done, failed = 0, 0
		for _, v := range vols {
			cur := &longhornv1.Volume{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v), cur); err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(cur.Status.Conditions, longhornv1.VolumeConditionExpanding)
			switch {
			case cur.Status.CurrentSize.Value() == 200*gi && c != nil && c.Reason == longhornv1.VolumeReasonExpansionComplete:
				done++
			case cur.Status.CurrentSize.Value() == 100*gi && c != nil && c.Reason == longhornv1.VolumeReasonExpansionFailed && c.Message != "":
				failed++
			}
		}
		checkLedgers(t, ctx, ns)
		return done+failed == 3, nil
	})
	if err != nil || done != 1 || failed != 2 {
		t.Fatalf("want 1 expansion done and 2 refused, have %d and %d: %v", done, failed, err)
	}
	if total := checkLedgers(t, ctx, ns); total != 400*gi {
		t.Errorf("ledger grants %d bytes, want 400Gi (one 200Gi and two 100Gi volumes)", total)
	}
}

// TestSettingChangeSchedules makes an unschedulable volume schedule by
// raising storage-over-provisioning-percentage from 0 to 200.
func TestSettingChangeSchedules(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	cluster(t, ns, 1, 100*gi)
	setSetting(t, ctx, ns, longhornv1.SettingStorageOverProvisioningPercentage, "0")
	if err := env.Client.Create(ctx, newVolume(ns, "vol", 150*gi)); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, ctx, ns, 0, 1)
	setSetting(t, ctx, ns, longhornv1.SettingStorageOverProvisioningPercentage, "200")
	waitCounts(t, ctx, ns, 1, 0)
}

// setSetting waits for the manager's default setting, then sets its value.
func setSetting(t *testing.T, ctx context.Context, ns, name, value string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		s := &longhornv1.Setting{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		s.Value = value
		return env.Client.Update(ctx, s) == nil, nil
	})
	if err != nil {
		t.Fatalf("setting %s to %s: %v", name, value, err)
	}
}

// TestBackingImageCopyOnReplicaDisk checks that a volume built on a backing
// image gets a copy of it on its replica's disk, through the same ledger.
func TestBackingImageCopyOnReplicaDisk(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	cluster(t, ns, 2, 100*gi)
	bi := &longhornv1.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "image", Namespace: ns},
		Spec: longhornv1.BackingImageSpec{MinNumberOfCopies: 1}}
	if err := env.Client.Create(ctx, bi); err != nil {
		t.Fatal(err)
	}
	bi.Status.Size = 2 * gi
	if err := env.Client.Status().Update(ctx, bi); err != nil {
		t.Fatal(err)
	}
	vol := newVolume(ns, "vol", 10*gi)
	vol.Spec.NumberOfReplicas = 2
	vol.Spec.BackingImage = "image"
	if err := env.Client.Create(ctx, vol); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, ctx, ns, 1, 0)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		replicas := &longhornv1.ReplicaList{}
		if err := env.Client.List(ctx, replicas, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if len(replicas.Items) != 2 {
			return false, nil
		}
		for _, rep := range replicas.Items {
			ds := &longhornv1.DiskSchedule{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rep.Spec.DiskID}, ds); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			st, ok := ds.Status.BackingImages["image"]
			if !ok || st.State != longhornv1.RequestStateScheduled || st.ScheduledSize != 2*gi {
				return false, nil
			}
			if ds.Status.StorageScheduled != 12*gi {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("want a granted 2Gi copy of the backing image beside each 10Gi replica: %v", err)
	}
}

// replicaNodes returns the nodes of the volume's replicas that are not being deleted.
func replicaNodes(ctx context.Context, ns, volume string) ([]*longhornv1.Replica, error) {
	list := &longhornv1.ReplicaList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"longhornvolume": volume}); err != nil {
		return nil, err
	}
	var out []*longhornv1.Replica
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// TestBestEffortLocality follows a best-effort volume with one replica: it
// waits unplaced until attached, then goes to the attached node; attached
// elsewhere, a local replica is added and, once it runs, the remote one is
// removed.
func TestBestEffortLocality(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	cluster(t, ns, 2, 400*gi)
	vol := newVolume(ns, "vol", 100*gi)
	vol.Spec.DataLocality = longhornv1.DataLocalityBestEffort
	if err := env.Client.Create(ctx, vol); err != nil {
		t.Fatal(err)
	}
	poll := func(what string, check func([]*longhornv1.Replica) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			reps, err := replicaNodes(ctx, ns, "vol")
			return err == nil && check(reps), err
		})
		if err != nil {
			reps, _ := replicaNodes(ctx, ns, "vol")
			var got []string
			for _, r := range reps {
				got = append(got, r.Name+"@"+r.Spec.NodeID+"/"+string(r.Status.CurrentState))
			}
			t.Fatalf("%s: replicas %v: %v", what, got, err)
		}
	}
	waitScheduled := func(reason string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cur := &longhornv1.Volume{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vol), cur); err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(cur.Status.Conditions, longhornv1.VolumeConditionScheduled)
			return c != nil && c.Reason == reason, nil
		})
		if err != nil {
			t.Fatalf("waiting for Scheduled reason %s: %v", reason, err)
		}
	}
	attach := func(node string) {
		t.Helper()
		cur := &longhornv1.Volume{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vol), cur); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.NodeID = node
		if err := env.Client.Patch(ctx, cur, patch); err != nil {
			t.Fatal(err)
		}
	}
	// run marks the replicas granted on their disks running, as instance managers would.
	run := func(reps []*longhornv1.Replica) {
		t.Helper()
		for _, r := range reps {
			if meta.IsStatusConditionTrue(r.Status.Conditions, longhornv1.ReplicaConditionDiskAllocated) && r.Status.CurrentState != longhornv1.ReplicaStateRunning {
				patch := client.MergeFrom(r.DeepCopy())
				r.Status.CurrentState = longhornv1.ReplicaStateRunning
				if err := env.Client.Status().Patch(ctx, r, patch); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	nodeA, nodeB := ns+"-n0", ns+"-n1"

	waitScheduled(longhornv1.VolumeReasonWaitingForAttachment)
	poll("one unplaced replica while detached", func(reps []*longhornv1.Replica) bool {
		return len(reps) == 1 && reps[0].Spec.NodeID == ""
	})
	attach(nodeB)
	poll("the replica goes to the attached node", func(reps []*longhornv1.Replica) bool {
		return len(reps) == 1 && reps[0].Spec.NodeID == nodeB
	})
	waitScheduled(longhornv1.VolumeReasonReplicasScheduled)
	reps, _ := replicaNodes(ctx, ns, "vol")
	run(reps)

	attach(nodeA)
	poll("a local replica is added on the new node", func(reps []*longhornv1.Replica) bool {
		run(reps)
		local := false
		for _, r := range reps {
			local = local || (r.Spec.NodeID == nodeA && r.Status.CurrentState == longhornv1.ReplicaStateRunning)
		}
		return local
	})
	poll("the remote replica is removed once the local one runs", func(reps []*longhornv1.Replica) bool {
		return len(reps) == 1 && reps[0].Spec.NodeID == nodeA
	})
	var total int64
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		total = checkLedgers(t, ctx, ns)
		return total == 100*gi, nil
	})
	if err != nil {
		t.Errorf("ledgers grant %d bytes, want 100Gi once the remote replica's space is released: %v", total, err)
	}
}
