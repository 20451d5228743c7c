package mirror_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/diskschedule"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestAdoptsWhatLonghornPersisted creates replicas and a backing-image copy
// on two disks before the manager starts, more on one disk than its limit:
// the mirror adopts every one at its size, the ledger grants them all, says
// Overcommitted and rejects new requests and growth until usage falls
// below the limit.
func TestAdoptsWhatLonghornPersisted(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t)
	f, uuids := createNode(t, ctx, ns, 2, 100*gi)
	d0, d1 := uuids[0], uuids[1]
	for _, v := range []struct {
		name string
		size int64
	}{{"vol-1", 60 * gi}, {"vol-2", 60 * gi}, {"vol-3", 10 * gi}} {
		createVolume(t, ctx, ns, v.name, v.size)
	}
	createReplica(t, ctx, ns, "vol-1-r-1", "vol-1", 60*gi, f.Name, "disk-0", d0)
	createReplica(t, ctx, ns, "vol-2-r-1", "vol-2", 60*gi, f.Name, "disk-0", d0)
	stopping := testenv.Replica(ns, "vol-3-r-1", testenv.ReplicaFixture{Volume: "vol-3", Size: 10 * gi, NodeID: f.Name,
		DiskName: "disk-1", DiskID: d1, State: lhv1.InstanceStateStopping})
	if err := testenv.CreateLonghorn(ctx, env.Client, stopping); err != nil {
		t.Fatal(err)
	}
	if err := testenv.CreateLonghorn(ctx, env.Client, testenv.BackingImage(ns, "image", 2*gi, d1)); err != nil {
		t.Fatal(err)
	}

	// The clock stands still: the unbacked request below stays for the
	// ledger to decide.
	startManager(t, ns, 2*time.Second, clocktesting.NewFakeClock(time.Now()))
	ds := testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "both replicas adopted over the limit", func(ds *dsv1.DiskSchedule) bool {
		return settled(ds) && len(ds.Spec.Replicas) == 2 && ds.Status.StorageScheduled == 120*gi
	})
	for _, name := range []string{"vol-1-r-1", "vol-2-r-1"} {
		if got := ds.Spec.Replicas[name]; int64(got) != 60*gi {
			t.Errorf("%s requests %d, want 60Gi", name, got)
		}
		if st := ds.Status.Replicas[name]; st.State != dsv1.RequestStateScheduled || st.ScheduledSize != 60*gi || !strings.Contains(st.Message, "adopted") {
			t.Errorf("%s: %+v, want adopted at 60Gi", name, st)
		}
	}
	over := meta.FindStatusCondition(ds.Status.Conditions, dsv1.DiskScheduleConditionOvercommitted)
	if over == nil || over.Status != metav1.ConditionTrue {
		t.Errorf("disk-0 holds 120Gi of 100Gi: Overcommitted %+v, want True", over)
	}
	ds = testenv.WaitLedger(t, ctx, env.Client, ns, d1, ledgerTimeout, "the stopping replica and the image copy adopted", func(ds *dsv1.DiskSchedule) bool {
		return settled(ds) && ds.Status.StorageScheduled == 12*gi
	})
	if int64(ds.Spec.Replicas["vol-3-r-1"]) != 10*gi || int64(ds.Spec.BackingImages["image"]) != 2*gi {
		t.Errorf("disk-1: %s, want vol-3-r-1 at 10Gi and image at 2Gi", testenv.DescribeLedger(ds))
	}
	if meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionOvercommitted) {
		t.Errorf("disk-1 holds 12Gi of 100Gi and says Overcommitted")
	}
	waitEvent(t, ctx, ns, d0, corev1.EventTypeWarning, diskschedule.ReasonAdoptedOverLimit)

	// Over its limit, disk-0 rejects a new request and the growth of an adopted replica.
	if err := writeSpec(ctx, ns, d0, func(s *dsv1.DiskScheduleSpec) { s.Replicas["vol-4-r-1"] = dsv1.RequestedBytes(gi) }); err != nil {
		t.Fatal(err)
	}
	// Longhorn's volume controller writes a volume's new size into its
	// replicas' volumeSize; the mirror counts that.
	if err := updateLonghorn(ctx, &lhv1.Volume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vol-1"}}, func(v *lhv1.Volume) {
		v.Spec.Size = 70 * gi
	}); err != nil {
		t.Fatal(err)
	}
	if err := updateLonghorn(ctx, &lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vol-1-r-1"}}, func(r *lhv1.Replica) {
		r.Spec.VolumeSize = 70 * gi
	}); err != nil {
		t.Fatal(err)
	}
	ds = testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the growth seen by the mirror and the new request decided", func(ds *dsv1.DiskSchedule) bool {
		return settled(ds) && int64(ds.Spec.Replicas["vol-1-r-1"]) == 70*gi && ds.Status.Replicas["vol-4-r-1"].RequestedSize == gi
	})
	if st := ds.Status.Replicas["vol-1-r-1"]; st.State != dsv1.RequestStateRejected || st.ScheduledSize != 60*gi {
		t.Errorf("growth of vol-1-r-1 over the limit: %+v, want rejected keeping 60Gi", st)
	}
	if st := ds.Status.Replicas["vol-4-r-1"]; st.State != dsv1.RequestStateRejected || st.ScheduledSize != 0 {
		t.Errorf("new request on an overcommitted disk: %+v, want rejected", st)
	}
}

// TestReleases checks rule 10: an entry whose replica is deleted or moved
// to another disk is released at once, and one whose replica write never
// landed, or a growth that never landed, after the grace period and not
// before; a backing image's copy is adopted once its real size is known and
// released when the image no longer lists the disk. The mirror's clock is
// fake and moves only when the test steps it: a release seen while it
// stands still is one that did not wait for the grace period.
func TestReleases(t *testing.T) {
	const grace = 30 * time.Second
	ctx := t.Context()
	ns := env.NewNamespace(t)
	f, uuids := createNode(t, ctx, ns, 2, 1024*gi)
	d0, d1 := uuids[0], uuids[1]
	clk := clocktesting.NewFakeClock(time.Now())
	startManager(t, ns, grace, clk)
	createVolume(t, ctx, ns, "vol-a", 10*gi)
	createVolume(t, ctx, ns, "vol-b", 20*gi)
	ra := createReplica(t, ctx, ns, "vol-a-r-1", "vol-a", 10*gi, f.Name, "disk-0", d0)
	rb := createReplica(t, ctx, ns, "vol-b-r-1", "vol-b", 20*gi, f.Name, "disk-0", d0)
	testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "both replicas granted", func(ds *dsv1.DiskSchedule) bool {
		return settled(ds) && ds.Status.StorageScheduled == 30*gi
	})

	t.Run("deleted replica", func(t *testing.T) {
		if err := deleteLonghorn(ctx, ra); err != nil {
			t.Fatal(err)
		}
		testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "vol-a-r-1 released, the clock standing still", func(ds *dsv1.DiskSchedule) bool {
			_, found := ds.Spec.Replicas["vol-a-r-1"]
			return !found && settled(ds) && ds.Status.StorageScheduled == 20*gi
		})
	})

	t.Run("moved replica", func(t *testing.T) {
		if err := updateLonghorn(ctx, rb, func(r *lhv1.Replica) { r.Spec.DiskID, r.Spec.DiskPath = d1, testenv.DiskPath("disk-1") }); err != nil {
			t.Fatal(err)
		}
		testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "vol-b-r-1 released from disk-0, the clock standing still", func(ds *dsv1.DiskSchedule) bool {
			return len(ds.Spec.Replicas) == 0 && settled(ds) && ds.Status.StorageScheduled == 0
		})
		testenv.WaitLedger(t, ctx, env.Client, ns, d1, ledgerTimeout, "vol-b-r-1 adopted on disk-1", func(ds *dsv1.DiskSchedule) bool {
			return settled(ds) && ds.Status.Replicas["vol-b-r-1"].ScheduledSize == 20*gi
		})
	})

	t.Run("grant whose replica never landed", func(t *testing.T) {
		if err := writeSpec(ctx, ns, d0, func(s *dsv1.DiskScheduleSpec) {
			s.Replicas = map[string]dsv1.RequestedBytes{"vol-c-r-1": dsv1.RequestedBytes(5 * gi)}
		}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the request granted", func(ds *dsv1.DiskSchedule) bool {
			return settled(ds) && ds.Status.Replicas["vol-c-r-1"].ScheduledSize == 5*gi
		})
		// The mirror has seen the grant unbacked: its grace period runs.
		if ds := mirrorPass(t, ctx, ns, "probe-c-1", f.Name, "disk-0", d0); ds.Spec.Replicas["vol-c-r-1"] == 0 {
			t.Fatalf("the unbacked grant was released at once: %s", testenv.DescribeLedger(ds))
		}
		// Just before the grace period ends, the mirror keeps it.
		clk.Step(grace - time.Second)
		if ds := mirrorPass(t, ctx, ns, "probe-c-2", f.Name, "disk-0", d0); ds.Spec.Replicas["vol-c-r-1"] == 0 {
			t.Fatalf("the unbacked grant was released before the grace period ended: %s", testenv.DescribeLedger(ds))
		}
		// Once it has ended, the mirror's next pass releases it.
		clk.Step(time.Second)
		if ds := mirrorPass(t, ctx, ns, "probe-c-3", f.Name, "disk-0", d0); ds.Spec.Replicas["vol-c-r-1"] != 0 {
			t.Fatalf("the unbacked grant outlived its grace period: %s", testenv.DescribeLedger(ds))
		}
		testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the unbacked grant released", func(ds *dsv1.DiskSchedule) bool {
			return len(ds.Spec.Replicas) == 0 && settled(ds) && ds.Status.StorageScheduled == 0
		})
	})

	t.Run("growth that never landed", func(t *testing.T) {
		if err := writeSpec(ctx, ns, d1, func(s *dsv1.DiskScheduleSpec) { s.Replicas["vol-b-r-1"] = dsv1.RequestedBytes(30 * gi) }); err != nil {
			t.Fatal(err)
		}
		testenv.WaitLedger(t, ctx, env.Client, ns, d1, ledgerTimeout, "the growth granted", func(ds *dsv1.DiskSchedule) bool {
			return settled(ds) && ds.Status.Replicas["vol-b-r-1"].ScheduledSize == 30*gi
		})
		if ds := mirrorPass(t, ctx, ns, "probe-b-1", f.Name, "disk-1", d1); int64(ds.Spec.Replicas["vol-b-r-1"]) != 30*gi {
			t.Fatalf("the growth was given back at once: %s", testenv.DescribeLedger(ds))
		}
		clk.Step(grace - time.Second)
		if ds := mirrorPass(t, ctx, ns, "probe-b-2", f.Name, "disk-1", d1); int64(ds.Spec.Replicas["vol-b-r-1"]) != 30*gi {
			t.Fatalf("the growth was given back before the grace period ended: %s", testenv.DescribeLedger(ds))
		}
		clk.Step(time.Second)
		if ds := mirrorPass(t, ctx, ns, "probe-b-3", f.Name, "disk-1", d1); int64(ds.Spec.Replicas["vol-b-r-1"]) != 20*gi {
			t.Fatalf("the growth outlived its grace period: %s", testenv.DescribeLedger(ds))
		}
		testenv.WaitLedger(t, ctx, env.Client, ns, d1, ledgerTimeout, "the growth given back", func(ds *dsv1.DiskSchedule) bool {
			return settled(ds) && int64(ds.Spec.Replicas["vol-b-r-1"]) == 20*gi && ds.Status.StorageScheduled == 20*gi
		})
	})

	t.Run("backing image copy", func(t *testing.T) {
		bi := testenv.BackingImage(ns, "image", 0, d0)
		if err := testenv.CreateLonghorn(ctx, env.Client, bi); err != nil {
			t.Fatal(err)
		}
		// Its real size not known yet, the copy is not requested: not in
		// the version that requests a copy written after it.
		probe := testenv.BackingImage(ns, "probe-image", gi, d0)
		if err := testenv.CreateLonghorn(ctx, env.Client, probe); err != nil {
			t.Fatal(err)
		}
		ds := testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the probe copy requested", func(ds *dsv1.DiskSchedule) bool {
			return int64(ds.Spec.BackingImages["probe-image"]) == gi
		})
		if _, ok := ds.Spec.BackingImages["image"]; ok {
			t.Fatalf("a copy of unknown size was requested: %v", ds.Spec.BackingImages)
		}
		if err := deleteLonghorn(ctx, probe); err != nil {
			t.Fatal(err)
		}
		testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the probe copy released", func(ds *dsv1.DiskSchedule) bool {
			return len(ds.Spec.BackingImages) == 0 && settled(ds) && ds.Status.StorageScheduled == 0
		})
		// A qcow2 image of 5Gi whose file takes 3Gi: Longhorn counts a copy
		// at its realSize.
		if err := updateLonghornStatus(ctx, bi, func(bi *lhv1.BackingImage) { bi.Status.Size, bi.Status.RealSize = 5*gi, 3*gi }); err != nil {
			t.Fatal(err)
		}
		testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the copy adopted at its real size, 3Gi", func(ds *dsv1.DiskSchedule) bool {
			return settled(ds) && ds.Status.BackingImages["image"].ScheduledSize == 3*gi
		})
		if err := updateLonghorn(ctx, bi, func(bi *lhv1.BackingImage) {
			delete(bi.Spec.DiskFileSpecMap, d0)
			bi.Spec.DiskFileSpecMap[d1] = &lhv1.BackingImageDiskFileSpec{DataEngine: lhv1.DataEngineTypeV1}
		}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the copy released from disk-0, the clock standing still", func(ds *dsv1.DiskSchedule) bool {
			return len(ds.Spec.BackingImages) == 0 && settled(ds) && ds.Status.StorageScheduled == 0
		})
		testenv.WaitLedger(t, ctx, env.Client, ns, d1, ledgerTimeout, "the copy adopted on disk-1", func(ds *dsv1.DiskSchedule) bool {
			return settled(ds) && ds.Status.BackingImages["image"].ScheduledSize == 3*gi
		})
	})
}

// TestReleasesWhatNoWriteBacksAtOnce: a grant no write of Longhorn's will
// back goes as soon as the cache shows it, not after the grace period
// (30 s here): one whose replica Longhorn persisted on another disk (two
// datastores placed it at once, the other write won), and one whose
// admitted write lost (the replica's resourceVersion moved past the one
// the gate admitted the write at, without this disk). A grant whose write
// is still in flight stays. The mirror's clock stands still: nothing here
// waits for the grace period.
func TestReleasesWhatNoWriteBacksAtOnce(t *testing.T) {
	const grace = 30 * time.Second
	ctx := t.Context()
	ns := env.NewNamespace(t)
	f, uuids := createNode(t, ctx, ns, 2, 100*gi)
	d0, d1 := uuids[0], uuids[1]
	startManager(t, ns, grace, clocktesting.NewFakeClock(time.Now()))
	// Replicas as Longhorn's volume controller creates them: unscheduled.
	unscheduled := map[string]*lhv1.Replica{}
	for _, v := range []string{"pvc-a", "pvc-b", "pvc-c"} {
		createVolume(t, ctx, ns, v, 10*gi)
		r := testenv.Replica(ns, v+"-r-1", testenv.ReplicaFixture{Volume: v, Size: 10 * gi})
		if err := testenv.CreateLonghorn(ctx, env.Client, r); err != nil {
			t.Fatal(err)
		}
		unscheduled[v] = r
	}
	testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "a limit", func(ds *dsv1.DiskSchedule) bool { return ds.Status.StorageLimit == 100*gi })
	// The gate's requests for placing each on disk-0, with the version
	// each write is admitted at.
	if err := writeSpec(ctx, ns, d0, func(s *dsv1.DiskScheduleSpec) {
		s.Replicas, s.ReplicaVersions = map[string]dsv1.RequestedBytes{}, map[string]string{}
		for _, r := range unscheduled {
			s.Replicas[r.Name] = dsv1.RequestedBytes(10 * gi)
			s.ReplicaVersions[r.Name] = r.ResourceVersion
		}
	}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the three granted", func(ds *dsv1.DiskSchedule) bool {
		return settled(ds) && ds.Status.StorageScheduled == 30*gi
	})

	// pvc-a's write lost to another datastore's, which placed it on disk-1.
	if err := updateLonghorn(ctx, unscheduled["pvc-a"], func(r *lhv1.Replica) {
		r.Spec.NodeID, r.Spec.DiskID, r.Spec.DiskPath = f.Name, d1, testenv.DiskPath("disk-1")
	}); err != nil {
		t.Fatal(err)
	}
	// pvc-b's write lost to a status write of Longhorn's: the replica moved
	// on without the disk.
	if err := updateLonghornStatus(ctx, unscheduled["pvc-b"], func(r *lhv1.Replica) {
		r.Status.CurrentState = lhv1.InstanceStateStopped
		r.Status.Conditions = append(r.Status.Conditions, lhv1.Condition{Type: "Scheduled", Status: lhv1.ConditionStatusFalse})
	}); err != nil {
		t.Fatal(err)
	}
	ds := testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "pvc-a-r-1 and pvc-b-r-1 released", func(ds *dsv1.DiskSchedule) bool {
		_, a := ds.Spec.Replicas["pvc-a-r-1"]
		_, b := ds.Spec.Replicas["pvc-b-r-1"]
		return !a && !b && settled(ds)
	})
	// pvc-c's write is in flight: its grant and version stay.
	if ds.Status.Replicas["pvc-c-r-1"].ScheduledSize != 10*gi || ds.Spec.ReplicaVersions["pvc-c-r-1"] != unscheduled["pvc-c"].ResourceVersion ||
		len(ds.Spec.ReplicaVersions) != 1 || ds.Status.StorageScheduled != 10*gi {
		t.Errorf("after the releases: %s, versions %v; want pvc-c-r-1 alone at 10Gi", testenv.DescribeLedger(ds), ds.Spec.ReplicaVersions)
	}
	testenv.WaitLedger(t, ctx, env.Client, ns, d1, ledgerTimeout, "pvc-a-r-1 adopted on disk-1", func(ds *dsv1.DiskSchedule) bool {
		return settled(ds) && ds.Status.Replicas["pvc-a-r-1"].ScheduledSize == 10*gi
	})
}

// TestMigrationCloneOnAFullDisk: Longhorn's v1 live migration (and live
// engine upgrade) clones a replica into the same disk and data directory.
// On a disk the ledger holds full, the clone takes no entry of its own (one
// data directory is counted once, though Longhorn's own storageScheduled
// counts both); when the migration ends and the original goes, the clone
// takes the directory's entry over in the same write, so the ledger never
// counts the directory twice nor leaves it uncounted.
func TestMigrationCloneOnAFullDisk(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t)
	f, uuids := createNode(t, ctx, ns, 1, 100*gi)
	d0 := uuids[0]
	startManager(t, ns, 30*time.Second, clocktesting.NewFakeClock(time.Now()))
	createVolume(t, ctx, ns, "vol-1", 60*gi)
	createVolume(t, ctx, ns, "vol-2", 40*gi)
	original := createReplica(t, ctx, ns, "vol-1-r-5b6c7d8e", "vol-1", 60*gi, f.Name, "disk-0", d0)
	createReplica(t, ctx, ns, "vol-2-r-1", "vol-2", 40*gi, f.Name, "disk-0", d0)
	testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the disk full at 100Gi", func(ds *dsv1.DiskSchedule) bool {
		return settled(ds) && ds.Status.StorageScheduled == 100*gi
	})

	// The clone: a new name, the original's spec (duplicateReplica).
	clone := testenv.Replica(ns, "vol-1-r-0a1b2c3d", testenv.ReplicaFixture{Volume: "vol-1", Size: 60 * gi, NodeID: f.Name,
		DiskName: "disk-0", DiskID: d0, State: lhv1.InstanceStateRunning})
	clone.Spec.DataDirectoryName, clone.Spec.Active = original.Spec.DataDirectoryName, false
	if err := testenv.CreateLonghorn(ctx, env.Client, clone); err != nil {
		t.Fatal(err)
	}
	// A mirror pass after the clone was written has seen it, and counted
	// it nowhere. (The probe is adopted over the limit, and released.)
	ds := mirrorPass(t, ctx, ns, "probe", f.Name, "disk-0", d0)
	if _, ok := ds.Spec.Replicas[clone.Name]; ok || ds.Spec.Replicas[original.Name] == 0 || len(ds.Spec.Replicas) != 2 {
		t.Fatalf("the clone was counted besides the original: %s", testenv.DescribeLedger(ds))
	}
	testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the disk full at 100Gi again", func(ds *dsv1.DiskSchedule) bool {
		return settled(ds) && ds.Status.StorageScheduled == 100*gi
	})

	// The migration ends: the original goes, the clone stays.
	if err := deleteLonghorn(ctx, original); err != nil {
		t.Fatal(err)
	}
	ds = testenv.WaitLedger(t, ctx, env.Client, ns, d0, ledgerTimeout, "the clone counted instead of the original", func(ds *dsv1.DiskSchedule) bool {
		_, orig := ds.Spec.Replicas[original.Name]
		return !orig && settled(ds) && ds.Status.Replicas[clone.Name].ScheduledSize == 60*gi
	})
	if ds.Status.StorageScheduled != 100*gi || meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionOvercommitted) {
		t.Errorf("after the migration: %s; want 100Gi, not overcommitted", testenv.DescribeLedger(ds))
	}
}

// waitEvent waits until an Event of type and reason regards the DiskSchedule.
func waitEvent(t *testing.T, ctx context.Context, ns, uuid, typ, reason string) {
	t.Helper()
	testenv.Eventually(t, ctx, 20*time.Second, fmt.Sprintf("a %s %s Event on DiskSchedule %s", typ, reason, uuid), func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "DiskSchedule" && ev.Regarding.Name == uuid {
				if ev.Type == typ && ev.Reason == reason {
					return true, "", nil
				}
				seen = append(seen, ev.Type+"/"+ev.Reason)
			}
		}
		return false, fmt.Sprintf("events %v", seen), nil
	})
}
