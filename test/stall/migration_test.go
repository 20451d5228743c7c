package stall_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// migrationBound bounds a live migration's stall, from the second
// attachment to the migration confirmed, by Longhorn's own periods. Every
// step is triggered by a watch (the attachment ticket, the volume's
// migrationNodeID, the migration replicas and engine starting, the old
// ticket gone, the old engine and replicas removed) except two: the
// migration engine is available on the new node (its endpoint and its
// replicas' modes, which the volume attachment controller and Longhorn's
// CSI driver wait for) once Longhorn's engine monitor has polled it, every
// EnginePollInterval (5 s) from its start; and the volume attachment
// controller, when the migration engine's snapshots differ from the old
// engine's, looks again after 10 s. 30 s: those 15 s and 15 s more for a
// loaded machine, within the 30 s resync no step waits for.
const migrationBound = 30 * time.Second

// migrationWait is how long the test waits for each step of the
// migration, well beyond migrationBound, so that a stall over the bound is
// measured and reported rather than cut short.
const migrationWait = 2 * time.Minute

// migratableClass is a StorageClass of KubeVirt's live-migratable disks on
// Longhorn, as Longhorn documents it for KubeVirt: three replicas,
// migratable, data locality disabled (its default), immediate binding.
func migratableClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "longhorn-migratable"},
		Provisioner: simcluster.CSIDriver,
		Parameters: map[string]string{
			simcluster.ParamNumberOfReplicas: "3",
			simcluster.ParamDataLocality:     string(lhv1.DataLocalityDisabled),
			simcluster.ParamMigratable:       "true",
		},
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		AllowVolumeExpansion: ptr.To(true),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
	}
}

// launcherPod is a KubeVirt virt-launcher pod on node using claim as a
// block device: the VM's source, or the target a migration creates.
func launcherPod(name, node, claim string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher",
				VolumeDevices: []corev1.VolumeDevice{{Name: "disk", DevicePath: "/dev/vm-disk"}}}},
			Volumes: []corev1.Volume{{Name: "disk", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
}

// diskWatch follows, from watches, what every disk holds at every moment:
// the data Longhorn persisted there (persistedData: one data directory
// once), the ledger's storageScheduled and conditions, and Longhorn's own
// storageScheduled (its node controller's count); and every denial of the
// gate (its DiskScheduleDenied Events).
type diskWatch struct {
	mu       sync.Mutex
	replicas map[string]lhv1.Replica
	limits   map[string]int64
	// over records every moment something went over a disk's limit.
	over []string
	// peakData, peakLedger and peakLonghorn are the largest persisted
	// data, ledger storageScheduled and Longhorn storageScheduled seen per
	// disk UUID.
	peakData, peakLedger, peakLonghorn map[string]int64
	// lowLedger is the smallest ledger storageScheduled seen per disk UUID
	// since track was called.
	lowLedger, lastLedger map[string]int64
	tracking              bool
	trackedAt             time.Time
	// denials are the gate's Events on Longhorn objects it refused a
	// write of; mirror are the mirror's on ledgers.
	denials, mirror []event
}

// event is an Event the watch saw: when it happened, on what, and what it
// says.
type event struct {
	at              time.Time
	object, message string
}

func (e event) String() string { return e.object + ": " + e.message }

// eventTime is when ev happened.
func eventTime(ev *corev1.Event) time.Time {
	for _, t := range []time.Time{ev.EventTime.Time, ev.LastTimestamp.Time, ev.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Now()
}

// track starts recording the smallest storageScheduled of every ledger,
// from the last one seen.
func (w *diskWatch) track() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tracking, w.trackedAt = true, time.Now()
	maps.Copy(w.lowLedger, w.lastLedger)
}

// low returns the smallest storageScheduled seen of disk's ledger since
// track, -1 when none was seen.
func (w *diskWatch) low(disk string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v, ok := w.lowLedger[disk]; ok {
		return v
	}
	return -1
}

func newDiskWatch() *diskWatch {
	return &diskWatch{
		replicas: map[string]lhv1.Replica{}, limits: map[string]int64{},
		peakData: map[string]int64{}, peakLedger: map[string]int64{}, peakLonghorn: map[string]int64{},
		lowLedger: map[string]int64{}, lastLedger: map[string]int64{},
	}
}

// start watches Replicas, DiskSchedules, Longhorn Nodes and Events of
// Longhorn's namespace until ctx ends.
func (w *diskWatch) start(ctx context.Context, t *testing.T, c client.WithWatch) {
	t.Helper()
	sandboxtest.WatchEach(ctx, t, c, func(obj runtime.Object, deleted bool, _ time.Time) { w.see(obj, deleted) },
		&dsv1.DiskScheduleList{}, &lhv1.ReplicaList{}, &lhv1.NodeList{}, &corev1.EventList{})
}

func (w *diskWatch) see(obj any, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch o := obj.(type) {
	case *dsv1.DiskSchedule:
		w.limits[o.Name] = o.Status.StorageLimit
		w.peakLedger[o.Name] = max(w.peakLedger[o.Name], o.Status.StorageScheduled)
		w.lastLedger[o.Name] = o.Status.StorageScheduled
		if low, ok := w.lowLedger[o.Name]; w.tracking && (!ok || o.Status.StorageScheduled < low) {
			w.lowLedger[o.Name] = o.Status.StorageScheduled
		}
		if o.Status.StorageLimit > 0 && o.Status.StorageScheduled > o.Status.StorageLimit {
			w.over = append(w.over, fmt.Sprintf("ledger of %s/%s: %s scheduled, limit %s", o.Spec.NodeID, o.Spec.Name,
				ledger.Bytes(o.Status.StorageScheduled), ledger.Bytes(o.Status.StorageLimit)))
		}
		if meta.IsStatusConditionTrue(o.Status.Conditions, dsv1.DiskScheduleConditionOvercommitted) {
			w.over = append(w.over, fmt.Sprintf("ledger of %s/%s: Overcommitted", o.Spec.NodeID, o.Spec.Name))
		}
		w.checkData()
	case *lhv1.Replica:
		if deleted {
			delete(w.replicas, o.Name)
		} else {
			w.replicas[o.Name] = *o
		}
		w.checkData()
	case *lhv1.Node:
		for _, d := range o.Status.DiskStatus {
			if d != nil && d.DiskUUID != "" {
				w.peakLonghorn[d.DiskUUID] = max(w.peakLonghorn[d.DiskUUID], d.StorageScheduled)
			}
		}
	case *corev1.Event:
		switch {
		case deleted:
		case o.Reason == "DiskScheduleDenied":
			w.denials = append(w.denials, event{eventTime(o), o.InvolvedObject.Kind + " " + o.InvolvedObject.Name, o.Message})
		case o.InvolvedObject.Kind == "DiskSchedule" && (o.Reason == "Adopted" || o.Reason == "Released"):
			w.mirror = append(w.mirror, event{eventTime(o), "ledger " + o.InvolvedObject.Name[:8], o.Reason + ": " + o.Message})
		}
	}
}

// checkData records a disk whose persisted data went over its limit;
// w.mu is held.
func (w *diskWatch) checkData() {
	now := make([]lhv1.Replica, 0, len(w.replicas))
	for _, r := range w.replicas {
		now = append(now, r)
	}
	for disk, sum := range persistedData(now) {
		w.peakData[disk] = max(w.peakData[disk], sum)
		if limit, ok := w.limits[disk]; ok && limit > 0 && sum > limit {
			w.over = append(w.over, fmt.Sprintf("disk %s: %s persisted, limit %s", disk, ledger.Bytes(sum), ledger.Bytes(limit)))
		}
	}
}

// report returns what the watch saw: what went over a limit, the gate's
// denials and the mirror's changes, before track and since, and each
// disk's peaks.
func (w *diskWatch) report() (over []string, denials, mirror [2][]event, peaks string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ps []string
	for disk, limit := range w.limits {
		ps = append(ps, fmt.Sprintf("%s: data %s, ledger %s, Longhorn %s of limit %s", disk[:8],
			ledger.Bytes(w.peakData[disk]), ledger.Bytes(w.peakLedger[disk]), ledger.Bytes(w.peakLonghorn[disk]), ledger.Bytes(limit)))
	}
	sort.Strings(ps)
	split := func(evs []event) (out [2][]event) {
		for _, e := range evs {
			i := 0
			if w.tracking && !e.at.Before(w.trackedAt.Truncate(time.Second)) {
				i = 1
			}
			out[i] = append(out[i], e)
		}
		return out
	}
	return slices.Clone(w.over), split(w.denials), split(w.mirror), strings.Join(ps, "; ")
}

// TestLiveMigrationStall: a migratable volume (a KubeVirt VM's disk: a
// ReadWriteMany block claim of a migratable class, 250Gi with three
// replicas on three 400Gi disks) attached on node-1 is live-migrated to
// node-2 through Longhorn's own code paths, as KubeVirt drives it: the
// target virt-launcher pod on node-2 makes a second csi-attacher ticket
// (VolumeManager.Attach), Longhorn's volume attachment controller starts
// the migration, its volume controller creates the migration engine on
// node-2 and one migration replica per replica, each a clone in the same
// disk and data directory (createAndStartMatchingReplicas); once the
// migration engine is available on node-2 the source pod goes, its ticket
// with it (VolumeManager.Detach), and Longhorn confirms the migration: the
// volume on node-2 alone, the old engine and replicas removed.
//
// No disk could hold a second copy of the volume (150Gi free of 400Gi), so
// a gate that counted a clone as new space would refuse it and stall the
// migration. Asserted: the gate refuses nothing; nothing is over any
// disk's limit at any moment (persisted data, one data directory once, and
// every ledger, which never goes Overcommitted); no ledger counts less than
// the volume's data on its disk while the migration replicas take over the
// replicas' entries; the migration is confirmed within migrationBound;
// every ledger then holds the migration replicas at the volume's size, the
// replicas that went nothing, and settles on what Longhorn persisted.
func TestLiveMigrationStall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel()
	e := startLonghorn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	watch := newDiskWatch()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch.start(wctx, t, e.c)
	reported := false // the gate's denials, at the end
	t.Cleanup(func() {
		if !t.Failed() || reported {
			return
		}
		_, denials, _, _ := watch.report()
		for _, d := range slices.Concat(denials[0], denials[1]) {
			t.Logf("the gate refused a write of Longhorn's: %s", d)
		}
	})

	const source, target = "node-1", "node-2"
	const size = 250 * gib
	class := migratableClass()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-disk"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			VolumeMode:       ptr.To(corev1.PersistentVolumeBlock),
			StorageClassName: ptr.To(class.Name),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}},
		},
	}
	src := launcherPod("virt-launcher-source", source, pvc.Name)
	for _, o := range []client.Object{class, pvc, src} {
		if err := e.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	vol := simcluster.VolumeName(pvc)

	// The VM runs on node-1: its disk attached there, healthy, with three
	// running replicas, each granted on its own disk.
	var originals []lhv1.Replica
	testenv.Eventually(t, ctx, 3*time.Minute, "the source pod running on its migratable volume, attached and healthy, three replicas granted", func(ctx context.Context) (bool, string, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
			return false, "", err
		}
		v := &lhv1.Volume{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, v); err != nil {
			return false, err.Error(), nil
		}
		state := []string{fmt.Sprintf("pod %s; volume %s %s on %q, access %s, migratable %t", src.Status.Phase, v.Status.State, v.Status.Robustness,
			v.Status.CurrentNodeID, v.Spec.AccessMode, v.Spec.Migratable)}
		ok := src.Status.Phase == corev1.PodRunning && v.Status.State == lhv1.VolumeStateAttached &&
			v.Status.Robustness == lhv1.VolumeRobustnessHealthy && v.Status.CurrentNodeID == source && v.Spec.Migratable
		rs, disks := e.replicas(ctx, t, vol), map[string]bool{}
		for _, r := range rs {
			g, err := e.granted(ctx, r.Spec.DiskID, r.Name)
			if err != nil {
				return false, "", err
			}
			state = append(state, fmt.Sprintf("%s on %s %s, granted %s", r.Name, r.Spec.NodeID, r.Status.CurrentState, ledger.Bytes(g)))
			ok = ok && r.Status.CurrentState == lhv1.InstanceStateRunning && g == size
			disks[r.Spec.DiskID] = true
		}
		originals = rs
		return ok && len(rs) == 3 && len(disks) == 3, strings.Join(state, "; "), nil
	})
	before := map[string]int64{}
	for _, r := range originals {
		ds := &dsv1.DiskSchedule{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: r.Spec.DiskID}, ds); err != nil {
			t.Fatal(err)
		}
		if free := ds.Status.StorageLimit - ds.Status.StorageScheduled; free >= size {
			t.Fatalf("disk %s/%s has %s free: it could hold a second copy of the volume", ds.Spec.NodeID, ds.Spec.Name, ledger.Bytes(free))
		}
		before[ds.Name] = ds.Status.StorageScheduled
	}

	// KubeVirt's migration: the target virt-launcher pod on node-2.
	watch.track()
	start := time.Now()
	dst := launcherPod("virt-launcher-target", target, pvc.Name)
	if err := e.c.Create(ctx, dst); err != nil {
		t.Fatal(err)
	}
	// The migration engine available on node-2, as Longhorn's CSI driver's
	// ControllerPublishVolume waits for it (the ticket satisfied, an engine
	// on the node with an endpoint); KubeVirt then moves the VM.
	var clones []lhv1.Replica
	testenv.Eventually(t, ctx, migrationWait, "the migration engine available on "+target, func(ctx context.Context) (bool, string, error) {
		v := &lhv1.Volume{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, v); err != nil {
			return false, "", err
		}
		engine, err := e.engineOn(ctx, vol, target)
		if err != nil {
			return false, "", err
		}
		satisfied, err := e.ticketSatisfied(ctx, vol, target)
		if err != nil {
			return false, "", err
		}
		clones = clones[:0]
		for _, r := range e.replicas(ctx, t, vol) {
			if !slices.ContainsFunc(originals, func(o lhv1.Replica) bool { return o.Name == r.Name }) {
				clones = append(clones, r)
			}
		}
		endpoint := ""
		if engine != nil {
			endpoint = engine.Status.Endpoint
		}
		return v.Status.CurrentMigrationNodeID == target && engine != nil && endpoint != "" && satisfied,
			fmt.Sprintf("migration to %q (spec %q), engine on %s %t endpoint %q, ticket satisfied %t, %d migration replicas",
				v.Status.CurrentMigrationNodeID, v.Spec.MigrationNodeID, target, engine != nil, endpoint, satisfied, len(clones)), nil
	})
	ready := time.Now()

	// What the migration wrote that takes space: one migration replica per
	// replica, on its disk and in its data directory. The ledgers did not
	// change: a directory is counted once.
	if len(clones) != len(originals) {
		t.Errorf("%d migration replicas, want one per replica (%d)", len(clones), len(originals))
	}
	for _, c := range clones {
		if !slices.ContainsFunc(originals, func(o lhv1.Replica) bool { return ledger.SharesData(&o, &c) }) {
			t.Errorf("migration replica %s on %s/%s, directory %s, shares no replica's data directory", c.Name, c.Spec.NodeID, c.Spec.DiskID, c.Spec.DataDirectoryName)
		}
	}
	for disk, was := range before {
		ds := &dsv1.DiskSchedule{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: disk}, ds); err != nil {
			t.Fatal(err)
		}
		if ds.Status.StorageScheduled != was {
			t.Errorf("during the migration the ledger of %s/%s holds %s, was %s", ds.Spec.NodeID, ds.Spec.Name,
				ledger.Bytes(ds.Status.StorageScheduled), ledger.Bytes(was))
		}
	}

	// The VM moved: the source pod goes, and with it node-1's ticket, which
	// confirms the migration.
	if err := e.c.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	detached := time.Now()
	testenv.Eventually(t, ctx, migrationWait, "the migration confirmed: the volume on "+target+" alone, healthy, on the migration replicas", func(ctx context.Context) (bool, string, error) {
		v := &lhv1.Volume{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, v); err != nil {
			return false, "", err
		}
		engines, err := e.engines(ctx, vol)
		if err != nil {
			return false, "", err
		}
		var where []string
		for _, en := range engines {
			where = append(where, en.Spec.NodeID)
		}
		state := []string{fmt.Sprintf("volume %s %s on %q (spec %q), migration %q/%q, engines on %v", v.Status.State, v.Status.Robustness,
			v.Status.CurrentNodeID, v.Spec.NodeID, v.Spec.MigrationNodeID, v.Status.CurrentMigrationNodeID, where)}
		ok := v.Status.State == lhv1.VolumeStateAttached && v.Status.Robustness == lhv1.VolumeRobustnessHealthy &&
			v.Status.CurrentNodeID == target && v.Spec.NodeID == target &&
			v.Spec.MigrationNodeID == "" && v.Status.CurrentMigrationNodeID == "" &&
			len(engines) == 1 && engines[0].Spec.NodeID == target
		rs := e.replicas(ctx, t, vol)
		for _, r := range rs {
			migrated := slices.ContainsFunc(clones, func(c lhv1.Replica) bool { return c.Name == r.Name })
			state = append(state, fmt.Sprintf("%s %s active %t migrated %t", r.Name, r.Status.CurrentState, r.Spec.Active, migrated))
			ok = ok && migrated && r.Spec.Active && r.Status.CurrentState == lhv1.InstanceStateRunning
		}
		return ok && len(rs) == len(originals), strings.Join(state, "; "), nil
	})
	done := time.Now()
	stall := done.Sub(start)
	t.Logf("live migration of %s from %s to %s: migration engine available in %s, confirmed %s after the source detached; %s in all (bound %s)",
		vol, source, target, ready.Sub(start).Round(10*time.Millisecond), done.Sub(detached).Round(10*time.Millisecond),
		stall.Round(10*time.Millisecond), migrationBound)
	if stall > migrationBound {
		t.Errorf("the migrating volume was stalled %s, over its bound %s", stall, migrationBound)
	}

	// Every ledger holds the migration replicas at the volume's size, and
	// nothing of the replicas that went, and settles on what is persisted.
	settle(ctx, t, e.c)
	for _, c := range clones {
		if g, err := e.granted(ctx, c.Spec.DiskID, c.Name); err != nil || g != size {
			t.Errorf("migration replica %s: granted %s on %s (%v), want %s", c.Name, ledger.Bytes(g), c.Spec.DiskID, err, ledger.Bytes(size))
		}
	}
	for _, o := range originals {
		if g, err := e.granted(ctx, o.Spec.DiskID, o.Name); err != nil || g != 0 {
			t.Errorf("replica %s, gone with the migration: still granted %s on %s (%v)", o.Name, ledger.Bytes(g), o.Spec.DiskID, err)
		}
	}
	testenv.Eventually(t, ctx, time.Minute, "the target pod running", func(ctx context.Context) (bool, string, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(dst), dst); err != nil {
			return false, "", err
		}
		return dst.Status.Phase == corev1.PodRunning, string(dst.Status.Phase), nil
	})

	// No ledger ever counted less than the volume's data on its disk while
	// the migration replicas took over the replicas' entries.
	for disk := range before {
		if low := watch.low(disk); low < size {
			t.Errorf("the ledger of disk %s went down to %s during the migration, below the %s Longhorn holds there", disk, ledger.Bytes(low), ledger.Bytes(size))
		}
	}
	over, denials, mirror, peaks := watch.report()
	reported = true
	t.Logf("peaks per disk: %s", peaks)
	for _, m := range mirror[1] {
		t.Logf("the mirror, during the migration: %s", m)
	}
	for _, o := range over {
		t.Errorf("over a limit: %s", o)
	}
	for _, d := range denials[1] {
		t.Errorf("the gate refused a write of Longhorn's during the migration: %s", d)
	}
	// Before the migration, while Longhorn placed the replicas, the one
	// refusal that may come is of a placement that had lost already: its
	// Replica was written while the gate held the write (Longhorn's replica
	// controller claims a new replica's ownership in its status), so the
	// API server answers the held write Conflict whatever the gate says;
	// the mirror released its request at once (rule 10), saying so, and the
	// gate answered the write that its request was withdrawn.
	for _, d := range denials[0] {
		lost := -1
		if strings.Contains(d.message, "the request left the ledger before it was decided") {
			lost = slices.IndexFunc(mirror[0], func(m event) bool {
				return strings.Contains(m.message, strings.TrimPrefix(d.object, "Replica ")+" (") &&
					strings.Contains(m.message, "the write placing it here lost")
			})
		}
		if lost < 0 {
			t.Errorf("the gate refused a write of Longhorn's: %s", d)
			continue
		}
		t.Logf("the gate refused a placement whose write had lost: %s; %s", d, mirror[0][lost])
	}
}

// engines returns the volume's engines.
func (e *longhornEnv) engines(ctx context.Context, vol string) ([]lhv1.Engine, error) {
	list := &lhv1.EngineList{}
	if err := e.c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		return nil, err
	}
	var out []lhv1.Engine
	for _, en := range list.Items {
		if en.Spec.VolumeName == vol {
			out = append(out, en)
		}
	}
	return out, nil
}

// engineOn returns the volume's running engine on node, nil when it has
// none there.
func (e *longhornEnv) engineOn(ctx context.Context, vol, node string) (*lhv1.Engine, error) {
	engines, err := e.engines(ctx, vol)
	if err != nil {
		return nil, err
	}
	for i := range engines {
		if en := &engines[i]; en.Spec.NodeID == node && en.Status.CurrentState == lhv1.InstanceStateRunning {
			return en, nil
		}
	}
	return nil, nil
}

// ticketSatisfied reports whether the volume's csi-attacher ticket for node
// is satisfied in its Longhorn VolumeAttachment's status (Longhorn names
// the VolumeAttachment after its volume).
func (e *longhornEnv) ticketSatisfied(ctx context.Context, vol, node string) (bool, error) {
	va := &lhv1.VolumeAttachment{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, va); err != nil {
		return false, err
	}
	for id, ticket := range va.Spec.AttachmentTickets {
		if ticket == nil || ticket.NodeID != node || ticket.Type != lhv1.AttacherTypeCSIAttacher {
			continue
		}
		if st := va.Status.AttachmentTicketStatuses[id]; st != nil && st.Satisfied {
			return true, nil
		}
	}
	return false, nil
}
