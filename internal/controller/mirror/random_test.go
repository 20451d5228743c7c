package mirror_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestRandomizedMirror plays Longhorn at random against the manager:
// replicas created (placed at once, or created unscheduled and placed
// later), moved and deleted, volumes grown (replicas following or not),
// backing-image copies added and removed, and requests written to ledgers
// whose replica never lands; the manager is stopped mid-run, more writes
// land while none runs, and a new one starts. Afterwards every ledger's
// spec equals what Longhorn persisted on its disk and its storageScheduled
// is the sum of it.
func TestRandomizedMirror(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			w := newWorld(t, seed)
			w.populate(8)
			w.start()
			w.run(30)
			if err := w.manager.Stop(); err != nil {
				t.Fatalf("stopping the manager: %v", err)
			}
			w.run(15)
			w.start()
			w.run(30)
			w.waitMirrored()
		})
	}
}

// world is the Longhorn a randomized run plays.
type world struct {
	t        *testing.T
	ctx      context.Context
	ns       string
	rng      *rand.Rand
	nodes    []testenv.NodeFixture
	disks    []diskRef
	volumes  []string
	replicas []string
	images   []string
	next     int
	manager  *testenv.RunningManager
	log      []string
	// clock is the managers' clock: it moves with the workload's pace, and
	// past the grace period before the final check.
	clock *clocktesting.FakeClock
}

type diskRef struct {
	node, name, uuid string
}

const randomGrace = time.Second

func newWorld(t *testing.T, seed uint64) *world {
	w := &world{t: t, ctx: t.Context(), ns: env.NewNamespace(t), rng: rand.New(rand.NewPCG(seed, 42)),
		clock: clocktesting.NewFakeClock(time.Now())}
	for n := range 3 {
		f := testenv.NodeFixture{Name: fmt.Sprintf("%s-node-%d", w.ns, n), Disks: map[string]testenv.Disk{}}
		for d := range 2 {
			name, uuid := fmt.Sprintf("disk-%d", d), fmt.Sprintf("%s-uuid-%d-%d", w.ns, n, d)
			f.Disks[name] = testenv.Disk{UUID: uuid, Size: 4096 * gi}
			w.disks = append(w.disks, diskRef{node: f.Name, name: name, uuid: uuid})
		}
		if err := f.CreateNode(w.ctx, env.Client, w.ns); err != nil {
			t.Fatal(err)
		}
		w.nodes = append(w.nodes, f)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range w.log {
				t.Log(l)
			}
		}
	})
	return w
}

// start starts a manager and waits until every disk has its ledger.
func (w *world) start() {
	w.manager = startManager(w.t, w.ns, randomGrace, w.clock)
	for _, d := range w.disks {
		testenv.WaitLedger(w.t, w.ctx, env.Client, w.ns, d.uuid, ledgerTimeout, "exists", func(*dsv1.DiskSchedule) bool { return true })
	}
}

func (w *world) name(prefix string) string {
	w.next++
	return fmt.Sprintf("%s-%d", prefix, w.next)
}

func (w *world) disk() diskRef { return w.disks[w.rng.IntN(len(w.disks))] }

func (w *world) pick(names []string) (string, bool) {
	if len(names) == 0 {
		return "", false
	}
	return names[w.rng.IntN(len(names))], true
}

func (w *world) must(err error, what string) {
	w.t.Helper()
	if err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

// populate creates n replicas (and one backing image) before any manager runs.
func (w *world) populate(n int) {
	for range n {
		w.createReplica(true)
	}
	w.addCopy()
}

// run makes n random writes.
func (w *world) run(n int) {
	for range n {
		switch op := w.rng.IntN(10); {
		case op < 2:
			w.createReplica(true)
		case op < 3:
			w.createReplica(false)
		case op < 4:
			w.moveReplica()
		case op < 5:
			w.deleteReplica()
		case op < 6:
			w.growVolume()
		case op < 7:
			w.addCopy()
		case op < 8:
			w.removeCopy()
		default:
			w.ghostRequest()
		}
		// Jitter paces the writes (it synchronises nothing); the
		// managers' clock moves with it, ten times as fast, so some
		// requests outlive the grace period during the run.
		jitter := time.Duration(w.rng.IntN(30)) * time.Millisecond
		time.Sleep(jitter)
		w.clock.Step(10 * jitter)
	}
}

// createReplica creates a replica of a new or existing volume: placed at
// once, or created unscheduled and placed with a later update, as
// longhorn-manager does.
func (w *world) createReplica(placed bool) {
	volume, ok := w.pick(w.volumes)
	if !ok || w.rng.IntN(3) == 0 {
		volume = w.name("vol")
		createVolume(w.t, w.ctx, w.ns, volume, int64(w.rng.IntN(8)+1)*gi)
		w.volumes = append(w.volumes, volume)
	}
	v := &lhv1.Volume{}
	w.must(env.Client.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: volume}, v), "reading volume "+volume)
	name := w.name(volume + "-r")
	d := w.disk()
	fixture := testenv.ReplicaFixture{Volume: volume, Size: v.Spec.Size, State: lhv1.InstanceStateRunning}
	if placed {
		fixture.NodeID, fixture.DiskName, fixture.DiskID = d.node, d.name, d.uuid
	}
	r := testenv.Replica(w.ns, name, fixture)
	w.must(testenv.CreateLonghorn(w.ctx, env.Client, r), "creating replica "+name)
	if !placed {
		w.must(updateLonghorn(w.ctx, r, func(r *lhv1.Replica) {
			r.Spec.NodeID, r.Spec.DiskID, r.Spec.DiskPath = d.node, d.uuid, testenv.DiskPath(d.name)
		}), "placing replica "+name)
	}
	w.replicas = append(w.replicas, name)
	w.log = append(w.log, fmt.Sprintf("create %s of %s (%d) on %s", name, volume, v.Spec.Size, d.uuid))
}

func (w *world) moveReplica() {
	name, ok := w.pick(w.replicas)
	if !ok {
		return
	}
	d := w.disk()
	r := &lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
	w.must(updateLonghorn(w.ctx, r, func(r *lhv1.Replica) {
		r.Spec.NodeID, r.Spec.DiskID, r.Spec.DiskPath = d.node, d.uuid, testenv.DiskPath(d.name)
	}), "moving replica "+name)
	w.log = append(w.log, fmt.Sprintf("move %s to %s", name, d.uuid))
}

func (w *world) deleteReplica() {
	name, ok := w.pick(w.replicas)
	if !ok {
		return
	}
	w.must(deleteLonghorn(w.ctx, &lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}), "deleting replica "+name)
	for i, n := range w.replicas {
		if n == name {
			w.replicas = append(w.replicas[:i], w.replicas[i+1:]...)
			break
		}
	}
	w.log = append(w.log, "delete "+name)
}

// growVolume grows a volume; its replicas' volumeSize follows or not (the
// mirror requests each replica's volumeSize, as Longhorn counts it).
func (w *world) growVolume() {
	volume, ok := w.pick(w.volumes)
	if !ok {
		return
	}
	v := &lhv1.Volume{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: volume}}
	var size int64
	w.must(updateLonghorn(w.ctx, v, func(v *lhv1.Volume) {
		v.Spec.Size += int64(w.rng.IntN(4)+1) * gi
		size = v.Spec.Size
	}), "growing volume "+volume)
	follow := w.rng.IntN(2) == 0
	if follow {
		for _, name := range w.replicas {
			r := &lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
			w.must(updateLonghorn(w.ctx, r, func(r *lhv1.Replica) {
				if r.Spec.VolumeName == volume {
					r.Spec.VolumeSize = size
				}
			}), "expanding replica "+name)
		}
	}
	w.log = append(w.log, fmt.Sprintf("grow %s to %d (replicas follow: %v)", volume, size, follow))
}

func (w *world) addCopy() {
	image, ok := w.pick(w.images)
	d := w.disk()
	if !ok || (len(w.images) < 3 && w.rng.IntN(2) == 0) {
		image = w.name("image")
		w.must(testenv.CreateLonghorn(w.ctx, env.Client, testenv.BackingImage(w.ns, image, int64(w.rng.IntN(3)+1)*gi, d.uuid)),
			"creating backing image "+image)
		w.images = append(w.images, image)
	} else {
		bi := &lhv1.BackingImage{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: image}}
		w.must(updateLonghorn(w.ctx, bi, func(bi *lhv1.BackingImage) {
			bi.Spec.DiskFileSpecMap[d.uuid] = &lhv1.BackingImageDiskFileSpec{DataEngine: lhv1.DataEngineTypeV1}
		}), "adding a copy of "+image)
	}
	w.log = append(w.log, fmt.Sprintf("copy %s to %s", image, d.uuid))
}

func (w *world) removeCopy() {
	image, ok := w.pick(w.images)
	if !ok {
		return
	}
	bi := &lhv1.BackingImage{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: image}}
	var removed string
	w.must(updateLonghorn(w.ctx, bi, func(bi *lhv1.BackingImage) {
		removed = ""
		for uuid := range bi.Spec.DiskFileSpecMap {
			removed = uuid
			delete(bi.Spec.DiskFileSpecMap, uuid)
			return
		}
	}), "removing a copy of "+image)
	w.log = append(w.log, fmt.Sprintf("uncopy %s from %s", image, removed))
}

// ghostRequest writes a request the way the gate does before Longhorn's
// write lands, for a replica that never comes.
func (w *world) ghostRequest() {
	d := w.disk()
	name := w.name("ghost")
	size := int64(w.rng.IntN(4)+1) * gi
	w.must(writeSpec(w.ctx, w.ns, d.uuid, func(s *dsv1.DiskScheduleSpec) {
		if s.Replicas == nil {
			s.Replicas = map[string]dsv1.RequestedBytes{}
		}
		s.Replicas[name] = dsv1.RequestedBytes(size)
	}), "requesting "+name)
	w.log = append(w.log, fmt.Sprintf("ghost %s (%d) on %s", name, size, d.uuid))
}

// persistedOn reads from the API server what Longhorn persisted on each disk
// (ledger.PersistedByDisk).
func (w *world) persistedOn(ctx context.Context) (map[string]ledger.Persisted, error) {
	rl := &lhv1.ReplicaList{}
	if err := env.Client.List(ctx, rl, client.InNamespace(w.ns)); err != nil {
		return nil, err
	}
	bl := &lhv1.BackingImageList{}
	if err := env.Client.List(ctx, bl, client.InNamespace(w.ns)); err != nil {
		return nil, err
	}
	return ledger.PersistedByDisk(rl.Items, bl.Items, nil), nil
}

// waitMirrored waits until every ledger's spec is what Longhorn persisted on
// its disk, decided, with storageScheduled its sum.
func (w *world) waitMirrored() {
	// Every request that nothing backs is past its grace period.
	w.clock.Step(randomGrace)
	var checked int
	testenv.Eventually(w.t, w.ctx, 60*time.Second, "every ledger mirrors what Longhorn persisted", func(ctx context.Context) (bool, string, error) {
		persisted, err := w.persistedOn(ctx)
		if err != nil {
			return false, "", err
		}
		checked = 0
		for _, d := range w.disks {
			ds, err := getLedger(ctx, w.ns, d.uuid)
			if err != nil {
				return false, err.Error(), client.IgnoreNotFound(err)
			}
			on := persisted[d.uuid]
			// A copy whose size Longhorn has not reported yet has no entry.
			images := maps.Clone(on.BackingImages)
			maps.DeleteFunc(images, func(_ string, size int64) bool { return size == 0 })
			switch {
			case !maps.Equal(requested(ds.Spec.Replicas), on.Replicas):
				return false, fmt.Sprintf("%s: replicas %v, persisted %v", d.uuid, ds.Spec.Replicas, on.Replicas), nil
			case !maps.Equal(requested(ds.Spec.BackingImages), images):
				return false, fmt.Sprintf("%s: backing images %v, persisted %v", d.uuid, ds.Spec.BackingImages, images), nil
			case !settled(ds) || ds.Status.StorageScheduled != on.Total():
				return false, fmt.Sprintf("%s: %s; persisted sum %d", d.uuid, testenv.DescribeLedger(ds), on.Total()), nil
			}
			checked += len(on.Replicas) + len(images)
		}
		return true, "", nil
	})
	w.t.Logf("%d writes, %d persisted replicas and copies mirrored on %d disks", len(w.log), checked, len(w.disks))
}

func requested(m map[string]dsv1.RequestedBytes) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = int64(v)
	}
	return out
}
