package mirror

import (
	"context"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/scheme"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const (
	behindNS    = "longhorn-system"
	behindDisk  = "d0-uuid"
	behindGiB   = int64(1) << 30
	behindGrace = 3 * time.Second
)

// behindReconcile reconciles the ledger of spec's replicas twice, the
// second time after the grace period, with cacheObjs in the manager's
// cache (standing still, as an informer lagging under load) and liveObjs
// in the API server, and returns the ledger's spec then and the second
// result.
func behindReconcile(t *testing.T, replicas map[string]dsv1.RequestedBytes, cacheObjs, liveObjs []client.Object) (dsv1.DiskScheduleSpec, ctrl.Result) {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	ds := &dsv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: behindDisk, Namespace: behindNS},
		Spec:       dsv1.DiskScheduleSpec{Name: "disk-0", NodeID: "node-1", Replicas: replicas},
	}
	cache := fake.NewClientBuilder().WithScheme(s).
		WithIndex(&lhv1.Replica{}, index.ReplicaByDisk, func(o client.Object) []string {
			if d := o.(*lhv1.Replica).Spec.DiskID; d != "" {
				return []string{d}
			}
			return nil
		}).WithIndex(&lhv1.BackingImage{}, index.BackingImageByDisk, func(client.Object) []string { return nil }).
		WithObjects(append([]client.Object{ds}, cacheObjs...)...).Build()
	live := fake.NewClientBuilder().WithScheme(s).WithObjects(liveObjs...).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	r := NewReconciler(cache, live, events.NewFakeRecorder(10), clk, behindGrace, metrics.NewMirror(prometheus.NewRegistry()))
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: behindNS, Name: behindDisk}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	clk.Step(behindGrace + time.Second)
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := &dsv1.DiskSchedule{}
	if err := cache.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	return got.Spec, res
}

// behindReplica returns replica name of volume, 10Gi, placed on the disk
// or placed nowhere.
func behindReplica(name, volume string, placed bool) *lhv1.Replica {
	f := testenv.ReplicaFixture{Volume: volume, Size: 10 * behindGiB}
	if placed {
		f.NodeID, f.DiskName, f.DiskID = "node-1", "disk-0", behindDisk
	}
	return testenv.Replica(behindNS, name, f)
}

// A granted replica entry whose grace period ends while the manager's
// cache has not yet seen the replica Longhorn persisted on the disk is not
// released: the API server shows the replica there, and releasing would
// free the space it holds (the gate would then grant it to another replica
// and the disk would overfill). With the API server showing the replica
// nowhere, the same entry is released. The cache is a client of its own,
// standing still, as an informer lagging behind under load does.
func TestNoReleaseWhileTheCacheIsBehind(t *testing.T) {
	for _, tc := range []struct {
		name         string
		livePlaced   bool
		wantReleased bool
	}{
		{"the API server shows it placed on the disk", true, false},
		{"the API server shows it placed nowhere", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, _ := behindReconcile(t, map[string]dsv1.RequestedBytes{"vol-a-r-1": dsv1.RequestedBytes(10 * behindGiB)},
				[]client.Object{behindReplica("vol-a-r-1", "vol-a", false)}, []client.Object{behindReplica("vol-a-r-1", "vol-a", tc.livePlaced)})
			_, kept := spec.Replicas["vol-a-r-1"]
			if kept == tc.wantReleased {
				t.Errorf("after the grace period the entry is kept=%v, want released=%v (spec %v)", kept, tc.wantReleased, spec.Replicas)
			}
		})
	}
}

// TestLaggingReplicaHoldsBackNoOtherRelease: of two entries whose grace
// period ended unbacked in the cache, one is a replica the API server
// shows placed on the disk (the cache lags on it) and the other a replica
// placed nowhere: the first entry is kept and the second released in the
// same reconcile. A lag on one replica must not keep the disk's other
// unbacked grants, which the gate would go on counting as taken.
func TestLaggingReplicaHoldsBackNoOtherRelease(t *testing.T) {
	spec, res := behindReconcile(t, map[string]dsv1.RequestedBytes{
		"vol-a-r-1": dsv1.RequestedBytes(10 * behindGiB), "vol-b-r-1": dsv1.RequestedBytes(10 * behindGiB),
	},
		[]client.Object{behindReplica("vol-a-r-1", "vol-a", false), behindReplica("vol-b-r-1", "vol-b", false)},
		[]client.Object{behindReplica("vol-a-r-1", "vol-a", true), behindReplica("vol-b-r-1", "vol-b", false)})
	if _, kept := spec.Replicas["vol-a-r-1"]; !kept {
		t.Errorf("the entry of vol-a-r-1, placed on the disk as the API server shows, was released (spec %v)", spec.Replicas)
	}
	if _, kept := spec.Replicas["vol-b-r-1"]; kept {
		t.Errorf("the entry of vol-b-r-1, placed nowhere, was kept because the cache lags on vol-a-r-1 (spec %v)", spec.Replicas)
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("no requeue to look at vol-a-r-1 again (result %+v)", res)
	}
}
