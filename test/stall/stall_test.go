package stall_test

import (
	"context"
	"flag"
	"fmt"
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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/scenario"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

const (
	gib = int64(1) << 30

	// resync is longhorn-manager's informer resync, when its volume
	// controller looks again at a volume it dropped from its queue after
	// three quick retries of a refused write, when no Longhorn Node changed.
	resync = 30 * time.Second
	// nextView bounds a stall that Longhorn's next view of the disk ends:
	// the winner of a race is counted in the disk's storageScheduled by
	// Longhorn's node controller within a second, the Node change brings
	// the stalled volume back, and its scheduler looks elsewhere or finds no
	// candidate. Seconds, with room for a loaded machine.
	nextView = 10 * time.Second
	// defaultReservationTimeout is scheduler-extender-node-reservation-timeout's default.
	defaultReservationTimeout = 5 * time.Second
	// reservationBound bounds a stall behind a reservation of the
	// extender, which Longhorn cannot see: the reservation expires after its
	// timeout, and Longhorn looks at the volume again at its next resync (no
	// Longhorn Node changes when a reservation ends), with nextView's room.
	reservationBound = defaultReservationTimeout + resync + nextView
)

// reservationTimeout sets scheduler-extender-node-reservation-timeout for
// the reservation case: raise it far above reservationBound to see the
// test fail.
var reservationTimeout = flag.Duration("reservation-timeout", defaultReservationTimeout,
	"scheduler-extender-node-reservation-timeout for the reservation case (its bound stays at the default's)")

// Disk tags keep each case on its own disks: the volumes' diskSelector.
const (
	tagRace    = "race"
	tagReserve = "reserve"
)

// topology: four nodes with a 400Gi disk each for the race and the full
// cluster, and a 200Gi disk on node-1 for the reservation.
func topology() *sandbox.Topology {
	t := &sandbox.Topology{}
	for i := 1; i <= 4; i++ {
		n := sandbox.Node{Name: fmt.Sprintf("node-%d", i), Disks: []sandbox.Disk{{Name: "disk-1", Size: 400 * gib, Tags: []string{tagRace}}}}
		if i == 1 {
			n.Disks = append(n.Disks, sandbox.Disk{Name: "disk-2", Size: 200 * gib, Tags: []string{tagReserve}})
		}
		t.Nodes = append(t.Nodes, n)
	}
	return t
}

// recorder collects what the stalls are measured from: the refused
// replica writes (the gate's denials, through the sandbox's
// OnRefusedWrite) and, from
// watches, when each volume's replica was first persisted with a disk and
// when its Scheduled=False status was written.
type recorder struct {
	mu       sync.Mutex
	refused  map[string][]time.Time
	errs     map[string]string
	placed   map[string]time.Time
	unsched  map[string][]time.Time
	lastSeen map[string]lhv1.ConditionStatus
	// replicas and limits give each disk's persisted bytes; peak is the
	// largest seen, over is every time one went over its limit.
	replicas map[string]lhv1.Replica
	limits   map[string]int64
	over     []string
}

func newRecorder() *recorder {
	return &recorder{
		refused: map[string][]time.Time{}, errs: map[string]string{}, placed: map[string]time.Time{},
		unsched: map[string][]time.Time{}, lastSeen: map[string]lhv1.ConditionStatus{}, replicas: map[string]lhv1.Replica{},
	}
}

// refusedWrite is the sandbox's OnRefusedWrite.
func (r *recorder) refusedWrite(w sandbox.RefusedWrite) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused[w.Volume] = append(r.refused[w.Volume], w.At)
	r.errs[w.Volume] = w.Err.Error()
}

func (r *recorder) replica(rep *lhv1.Replica, deleted bool, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if deleted {
		delete(r.replicas, rep.Name)
		return
	}
	r.replicas[rep.Name] = *rep
	if rep.Spec.DiskID != "" {
		if _, ok := r.placed[rep.Spec.VolumeName]; !ok {
			r.placed[rep.Spec.VolumeName] = at
		}
	}
	if r.limits == nil {
		return
	}
	now := make([]lhv1.Replica, 0, len(r.replicas))
	for _, x := range r.replicas {
		now = append(now, x)
	}
	for disk, sum := range persistedData(now) {
		if limit, ok := r.limits[disk]; ok && sum > limit {
			r.over = append(r.over, fmt.Sprintf("disk %s: %s persisted, limit %s", disk, ledger.Bytes(sum), ledger.Bytes(limit)))
		}
	}
}

func (r *recorder) volume(v *lhv1.Volume, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Every write that says False: Longhorn's scheduler ran (again) and
	// found no candidate, and nothing of the sync was refused.
	st := scheduled(v)
	if st == lhv1.ConditionStatusFalse {
		r.unsched[v.Name] = append(r.unsched[v.Name], at)
	}
	r.lastSeen[v.Name] = st
}

// scheduled returns the volume's Scheduled condition status ("" when none).
func scheduled(v *lhv1.Volume) lhv1.ConditionStatus {
	for _, c := range v.Status.Conditions {
		if c.Type == lhv1.VolumeConditionTypeScheduled {
			return c.Status
		}
	}
	return ""
}

// watch follows Replica and Volume events until ctx ends.
func (r *recorder) watch(ctx context.Context, t *testing.T, c client.WithWatch) {
	sandboxtest.WatchEach(ctx, t, c, func(obj runtime.Object, deleted bool, at time.Time) {
		switch o := obj.(type) {
		case *lhv1.Replica:
			r.replica(o, deleted, at)
		case *lhv1.Volume:
			r.volume(o, at)
		}
	}, &lhv1.ReplicaList{}, &lhv1.VolumeList{})
}

// stall is one volume's stall.
type stall struct {
	volume  string
	refused int
	d       time.Duration
	// end says what ended it: "placed", "no candidate" (Longhorn's
	// Scheduled=False written after the last refusal) or "last refusal"
	// (Scheduled=False already written before it: the sync after it
	// found no candidate and had nothing new to write).
	end string
}

// stalls returns the stalls of the volumes named.
func (r *recorder) stalls(volumes []string) []stall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []stall
	for _, v := range volumes {
		ref := r.refused[v]
		if len(ref) == 0 {
			continue
		}
		first, last := ref[0], ref[len(ref)-1]
		s := stall{volume: v, refused: len(ref)}
		if at, ok := r.placed[v]; ok && !at.Before(first) {
			s.d, s.end = at.Sub(first), "placed"
		} else {
			s.d, s.end = last.Sub(first), "last refusal"
			for _, at := range r.unsched[v] {
				if !at.Before(last) {
					s.d, s.end = at.Sub(first), "no candidate"
					break
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// settledVolumes reports whether each volume named is placed or says
// Scheduled=False, and how many are placed.
func (r *recorder) settledVolumes(volumes []string) (bool, int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	placed, open := 0, []string{}
	for _, v := range volumes {
		if _, ok := r.placed[v]; ok {
			placed++
			continue
		}
		if r.lastSeen[v] != lhv1.ConditionStatusFalse {
			open = append(open, v)
		}
	}
	return len(open) == 0, placed, strings.Join(open, ", ")
}

// lastRefusal returns the latest refusal of the volumes named.
func (r *recorder) lastRefusal(volumes []string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	for _, v := range volumes {
		if ref := r.refused[v]; len(ref) > 0 && ref[len(ref)-1].After(last) {
			last = ref[len(ref)-1]
		}
	}
	return last
}

// env is the sandbox and the clients one run of the cases share.
type env struct {
	sb  *sandbox.Sandbox
	c   client.WithWatch
	rec *recorder
}

// TestStalls measures, with longhorn-manager v1.12.0's own controllers
// placing (one longhorn-manager per
// node, each with its own datastore, work queues and retries), how long
// the gate's denials stall volumes: in a race for the disks, on a full
// cluster, and behind a reservation on the disk Longhorn picks.
func TestStalls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	e := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lw, err := scenario.WatchLedgers(ctx, e.c, sandbox.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("race", func(t *testing.T) { raceCase(ctx, t, e) })
	t.Run("full cluster", func(t *testing.T) { fullCase(ctx, t, e) })
	t.Run("reservation", func(t *testing.T) { reservationCase(ctx, t, e) })
	finish(ctx, t, e, lw)
}

// finish checks what every run of cases must end with: no ledger version
// broke the invariant, no disk ever held more than its limit, and every
// ledger settles on what is persisted.
func finish(ctx context.Context, t *testing.T, e *env, lw *scenario.LedgerWatch) {
	t.Helper()
	_, versions, violations, err := lw.Stop(ctx)
	if err != nil {
		t.Errorf("the ledger watch: %v", err)
	}
	for _, v := range violations {
		t.Errorf("ledger invariant broken: %s", v)
	}
	e.rec.mu.Lock()
	over := append([]string(nil), e.rec.over...)
	e.rec.mu.Unlock()
	for _, o := range over {
		t.Errorf("persisted over a disk's limit: %s", o)
	}
	t.Logf("%d ledger versions watched, %d broke the invariant; %d times a disk held more than its limit", versions, len(violations), len(over))
	settle(ctx, t, e.c)
}

// start starts the sandbox with the gate registered and Longhorn's own
// controllers placing, the recorder receiving the gate's denials of
// replica writes, and the watches.
func start(t *testing.T) *env {
	t.Helper()
	rec := newRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: sandbox.Options{
		Topology:       topology(),
		OnRefusedWrite: rec.refusedWrite,
	}, KeepLogs: true})
	c := sandboxtest.WatchingClient(t, sb)
	rec.follow(ctx, t, c)
	return &env{sb: sb, c: c, rec: rec}
}

// follow reads the disks' limits from their ledgers and watches Replicas
// and Volumes until the test ends.
func (r *recorder) follow(ctx context.Context, t *testing.T, c client.WithWatch) {
	t.Helper()
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	limits := map[string]int64{}
	for _, ds := range list.Items {
		limits[ds.Name] = ds.Status.StorageLimit
	}
	r.mu.Lock()
	r.limits = limits
	r.mu.Unlock()
	wctx, wcancel := context.WithCancel(context.Background())
	t.Cleanup(wcancel)
	r.watch(wctx, t, c)
}

// createVolumes creates n one-replica Longhorn Volumes of size on the
// disks tagged tag, as the Longhorn CSI driver creates them for claims
// (simcluster.VolumeFor), all at once, and returns their names.
func createVolumes(ctx context.Context, t *testing.T, c client.Client, prefix string, n int, size int64, tag string) []string {
	t.Helper()
	params := map[string]string{simcluster.ParamNumberOfReplicas: "1", simcluster.ParamDiskSelector: tag}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: prefix}, Provisioner: "driver.longhorn.io", Parameters: params}
	vols := make([]*lhv1.Volume, n)
	for i := range vols {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%02d", prefix, i), Namespace: "default", UID: types.UID(fmt.Sprintf("%s-%02d", prefix, i))},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}}},
		}
		v, err := simcluster.VolumeFor(pvc, class, sandbox.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		vols[i] = v
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, v := range vols {
		wg.Go(func() { errs[i] = c.Create(ctx, v) })
	}
	wg.Wait()
	names := make([]string, n)
	for i, v := range vols {
		if errs[i] != nil {
			t.Fatalf("creating volume %s: %v", v.Name, errs[i])
		}
		names[i] = v.Name
	}
	return names
}

// waitSettled waits until every volume named is placed or says
// Scheduled=False, and no refusal of theirs came for quiet; it returns how
// many are placed.
func waitSettled(ctx context.Context, t *testing.T, rec *recorder, volumes []string, timeout time.Duration) int {
	t.Helper()
	const quiet = 3 * time.Second
	var placed int
	testenv.Eventually(t, ctx, timeout, "every volume is placed or Scheduled=False", func(context.Context) (bool, string, error) {
		done, n, open := rec.settledVolumes(volumes)
		placed = n
		return done && time.Since(rec.lastRefusal(volumes)) > quiet, open, nil
	}, testenv.Every(200*time.Millisecond))
	return placed
}

// report logs and checks the stalls of volumes against bound, and returns them.
func report(t *testing.T, rec *recorder, volumes []string, bound time.Duration) []stall {
	t.Helper()
	ss := rec.stalls(volumes)
	denials := 0
	ds := make([]time.Duration, 0, len(ss))
	ends := map[string]int{}
	for _, s := range ss {
		denials += s.refused
		ds = append(ds, s.d)
		ends[s.end]++
		if s.d > bound {
			t.Errorf("volume %s stalled %s (%d refused writes, ended by %s), over the bound %s", s.volume, s.d.Round(time.Millisecond), s.refused, s.end, bound)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	p50, worst := time.Duration(0), time.Duration(0)
	if len(ds) > 0 {
		p50, worst = ds[(len(ds)-1)/2], ds[len(ds)-1]
	}
	t.Logf("%d volumes, %d denials, %d stalled: p50 %s, max %s (bound %s); ended by %v",
		len(volumes), denials, len(ss), p50.Round(time.Millisecond), worst.Round(time.Millisecond), bound, ends)
	return ss
}

// unschedulable checks that each volume not placed says Scheduled=False
// with Longhorn's own reason, not a gate's denial.
func unschedulable(ctx context.Context, t *testing.T, c client.Client, volumes []string) int {
	t.Helper()
	n := 0
	for _, name := range volumes {
		v := &lhv1.Volume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: name}, v); err != nil {
			t.Fatal(err)
		}
		for _, cond := range v.Status.Conditions {
			if cond.Type != lhv1.VolumeConditionTypeScheduled || cond.Status != lhv1.ConditionStatusFalse {
				continue
			}
			n++
			if cond.Reason != lhv1.VolumeConditionReasonReplicaSchedulingFailure {
				t.Errorf("volume %s: Scheduled=False with reason %q, want Longhorn's %s", name, cond.Reason, lhv1.VolumeConditionReasonReplicaSchedulingFailure)
			}
			if strings.Contains(cond.Message, "admission webhook") || strings.Contains(cond.Message, "denied") {
				t.Errorf("volume %s: Scheduled=False says the gate refused it: %s", name, cond.Message)
			}
		}
	}
	return n
}

// raceCase: 32 × 100Gi one-replica volumes created at once on 4 × 400Gi
// disks, twice what fits. Longhorn's three manager pods place them from
// their own views; the gate denies the writes that lost the race. Each
// stall ends at Longhorn's next view of the disk; the 16 that do not fit
// end with Longhorn's own Scheduled=False.
func raceCase(ctx context.Context, t *testing.T, e *env) {
	vols := createVolumes(ctx, t, e.c, "race", 32, 100*gib, tagRace)
	placed := waitSettled(ctx, t, e.rec, vols, 2*time.Minute)
	report(t, e.rec, vols, nextView)
	if placed != 16 {
		t.Errorf("%d volumes placed, want 16: 4 disks of 400Gi hold 4 × 100Gi each", placed)
	}
	if n := unschedulable(ctx, t, e.c, vols); n != 32-placed {
		t.Errorf("%d volumes say Scheduled=False, want the %d not placed", n, 32-placed)
	}
}

// fullCase: the race's disks are full for Longhorn too; 8 more volumes
// find no candidate in Longhorn's own scheduler, which says so in their
// Scheduled condition; the gate refuses nothing (or only transiently).
func fullCase(ctx context.Context, t *testing.T, e *env) {
	vols := createVolumes(ctx, t, e.c, "full", 8, 100*gib, tagRace)
	placed := waitSettled(ctx, t, e.rec, vols, time.Minute)
	report(t, e.rec, vols, nextView)
	if placed != 0 {
		t.Errorf("%d volumes placed on full disks", placed)
	}
	if n := unschedulable(ctx, t, e.c, vols); n != len(vols) {
		t.Errorf("%d volumes say Scheduled=False, want all %d", n, len(vols))
	}
}

// reservationCase: a reservation of the extender (spec.reservations, for
// another volume's pod) holds 150Gi of the 200Gi disk tagged reserve;
// Longhorn cannot see it and picks the disk for a 100Gi volume; the gate
// denies until the reservation expires and Longhorn, at its resync, places
// the replica there.
func reservationCase(ctx context.Context, t *testing.T, e *env) {
	if *reservationTimeout != defaultReservationTimeout {
		setReservationTimeout(ctx, t, e.c, *reservationTimeout)
		t.Cleanup(func() { setReservationTimeout(context.Background(), t, e.c, defaultReservationTimeout) })
	}
	uuid := sandbox.DiskUUID("node-1", "disk-2")
	const holder = "pvc-held-elsewhere"
	ds := &dsv1.DiskSchedule{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: uuid}, ds); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ds.DeepCopy())
	if ds.Spec.Reservations == nil {
		ds.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{}
	}
	ds.Spec.Reservations[holder] = dsv1.DiskScheduleReservation{Size: 150 * gib, Pod: "default/held-0"}
	if err := e.c.Patch(ctx, ds, patch); err != nil {
		t.Fatalf("writing the reservation: %v", err)
	}
	waitReservation(ctx, t, e.c, uuid, holder, dsv1.ReservationStateScheduled)

	vols := createVolumes(ctx, t, e.c, "reserve", 1, 100*gib, tagReserve)
	placed := waitSettled(ctx, t, e.rec, vols, *reservationTimeout+3*resync)
	ss := report(t, e.rec, vols, reservationBound)
	if placed != 1 {
		t.Errorf("the volume was not placed once the reservation ended")
	}
	if len(ss) == 0 {
		t.Errorf("no write was denied: the reservation did not hold the disk Longhorn picked")
	}
	waitReservation(ctx, t, e.c, uuid, holder, dsv1.ReservationStateExpired)
	// The extender drops an expired reservation.
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: uuid}, ds); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(ds.DeepCopy())
	delete(ds.Spec.Reservations, holder)
	if err := e.c.Patch(ctx, ds, patch); err != nil {
		t.Fatalf("removing the reservation: %v", err)
	}
}

// setReservationTimeout sets scheduler-extender-node-reservation-timeout
// in the extender's ConfigMap.
func setReservationTimeout(ctx context.Context, t *testing.T, c client.Client, d time.Duration) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: settings.ConfigMapName}, cm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cm.DeepCopy())
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[settings.SchedulerExtenderNodeReservationTimeout] = fmt.Sprint(int(d.Seconds()))
	if err := c.Patch(ctx, cm, patch); err != nil {
		t.Fatal(err)
	}
}

// waitReservation waits until the ledger's reservation is in state.
func waitReservation(ctx context.Context, t *testing.T, c client.Client, uuid, name string, state dsv1.ReservationState) {
	t.Helper()
	testenv.WaitLedger(t, ctx, c, sandbox.Namespace, uuid, 2*time.Minute, fmt.Sprintf("reservation %s %s", name, state), func(ds *dsv1.DiskSchedule) bool {
		return ds.Status.Reservations[name].State == state
	}, testenv.Every(100*time.Millisecond))
}

// settle waits until every ledger equals what Longhorn persisted on its
// disk (replicas at volumeSize, backing-image copies at realSize), has
// nothing pending, and is Ready, except the ledgers of the down nodes,
// which must say their node is not Ready (rule 8).
func settle(ctx context.Context, t *testing.T, c client.Client, down ...string) {
	t.Helper()
	testenv.Eventually(t, ctx, 90*time.Second, "the ledgers settle on what is persisted", func(ctx context.Context) (bool, string, error) {
		off, err := unsettled(ctx, c, down...)
		return off == "" && err == nil, off, err
	}, testenv.Every(200*time.Millisecond), testenv.RetryErrors())
}

func unsettled(ctx context.Context, c client.Client, down ...string) (string, error) {
	replicas := &lhv1.ReplicaList{}
	if err := c.List(ctx, replicas, client.InNamespace(sandbox.Namespace)); err != nil {
		return "", err
	}
	persisted := persistedData(replicas.Items)
	images := &lhv1.BackingImageList{}
	if err := c.List(ctx, images, client.InNamespace(sandbox.Namespace)); err != nil {
		return "", err
	}
	for _, bi := range images.Items {
		for uuid := range bi.Spec.DiskFileSpecMap {
			persisted[uuid] += bi.Status.RealSize
		}
	}
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		return "", err
	}
	var off []string
	for i := range list.Items {
		ds := &list.Items[i]
		ready := meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady)
		if slices.Contains(down, ds.Spec.NodeID) {
			// A down node's disk takes no new placement; what it holds stays.
			c := meta.FindStatusCondition(ds.Status.Conditions, dsv1.DiskScheduleConditionReady)
			ready = c != nil && c.Status == metav1.ConditionFalse && c.Reason == dsv1.DiskScheduleReasonNodeNotReady
		}
		if ds.Status.StorageScheduled != persisted[ds.Name] || ledger.PendingCount(ds) != 0 || !ready {
			off = append(off, fmt.Sprintf("%s/%s: ledger %s (%d pending, ready %t), persisted %s", ds.Spec.NodeID, ds.Spec.Name,
				ledger.Bytes(ds.Status.StorageScheduled), ledger.PendingCount(ds), ready, ledger.Bytes(persisted[ds.Name])))
		}
	}
	sort.Strings(off)
	return strings.Join(off, "; "), nil
}

// persistedData sums, per disk UUID, the spec.volumeSize of the replicas
// persisted there, one data directory once: a clone Longhorn creates into
// another replica's disk and data directory (v1 live migration, live engine
// upgrade) holds no new data, and the ledger counts the directory once.
func persistedData(replicas []lhv1.Replica) map[string]int64 {
	type dir struct{ disk, name string }
	sizes := map[dir]int64{}
	for _, r := range replicas {
		if r.Spec.DiskID == "" {
			continue
		}
		d := dir{r.Spec.DiskID, r.Spec.DataDirectoryName}
		if r.Spec.DataDirectoryName == "" {
			d.name = "replica " + r.Name
		}
		sizes[d] = max(sizes[d], r.Spec.VolumeSize)
	}
	out := map[string]int64{}
	for d, size := range sizes {
		out[d.disk] += size
	}
	return out
}
