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

// A granted replica entry whose grace period ends while the manager's
// cache has not yet seen the replica Longhorn persisted on the disk is not
// released: the API server shows the replica there, and releasing would
// free the space it holds (the gate would then grant it to another replica
// and the disk would overfill). With the API server showing the replica
// nowhere, the same entry is released. The cache is a client of its own,
// standing still, as an informer lagging behind under load does.
func TestNoReleaseWhileTheCacheIsBehind(t *testing.T) {
	const (
		ns    = "longhorn-system"
		disk  = "d0-uuid"
		gib   = int64(1) << 30
		grace = 3 * time.Second
	)
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	ledgerOf := func() *dsv1.DiskSchedule {
		return &dsv1.DiskSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: disk, Namespace: ns},
			Spec: dsv1.DiskScheduleSpec{Name: "disk-0", NodeID: "node-1",
				Replicas: map[string]dsv1.RequestedBytes{"vol-a-r-1": dsv1.RequestedBytes(10 * gib)}},
		}
	}
	unplaced := testenv.Replica(ns, "vol-a-r-1", testenv.ReplicaFixture{Volume: "vol-a", Size: 10 * gib})
	placed := testenv.Replica(ns, "vol-a-r-1", testenv.ReplicaFixture{Volume: "vol-a", Size: 10 * gib, NodeID: "node-1", DiskName: "disk-0", DiskID: disk})
	withIndexes := func(b *fake.ClientBuilder) *fake.ClientBuilder {
		return b.WithIndex(&lhv1.Replica{}, index.ReplicaByDisk, func(o client.Object) []string {
			if d := o.(*lhv1.Replica).Spec.DiskID; d != "" {
				return []string{d}
			}
			return nil
		}).WithIndex(&lhv1.BackingImage{}, index.BackingImageByDisk, func(client.Object) []string { return nil })
	}

	for _, tc := range []struct {
		name         string
		live         *lhv1.Replica
		wantReleased bool
	}{
		{"the API server shows it placed on the disk", placed, false},
		{"the API server shows it placed nowhere", unplaced, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// The cache: the ledger and the replica as it was before
			// Longhorn's write landed.
			cache := withIndexes(fake.NewClientBuilder().WithScheme(s)).
				WithObjects(ledgerOf(), unplaced.DeepCopy()).Build()
			live := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.live.DeepCopy()).Build()
			clk := clocktesting.NewFakeClock(time.Now())
			r := NewReconciler(cache, live, events.NewFakeRecorder(10), clk, grace, metrics.NewMirror(prometheus.NewRegistry()))
			req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: disk}}
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			clk.Step(grace + time.Second)
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			got := &dsv1.DiskSchedule{}
			if err := cache.Get(ctx, req.NamespacedName, got); err != nil {
				t.Fatal(err)
			}
			_, kept := got.Spec.Replicas["vol-a-r-1"]
			if kept == tc.wantReleased {
				t.Errorf("after the grace period the entry is kept=%v, want released=%v (spec %v)", kept, tc.wantReleased, got.Spec.Replicas)
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
	const (
		ns    = "longhorn-system"
		disk  = "d0-uuid"
		gib   = int64(1) << 30
		grace = 3 * time.Second
	)
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	ledgerOf := &dsv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: disk, Namespace: ns},
		Spec: dsv1.DiskScheduleSpec{Name: "disk-0", NodeID: "node-1", Replicas: map[string]dsv1.RequestedBytes{
			"vol-a-r-1": dsv1.RequestedBytes(10 * gib), "vol-b-r-1": dsv1.RequestedBytes(10 * gib),
		}},
	}
	unplacedA := testenv.Replica(ns, "vol-a-r-1", testenv.ReplicaFixture{Volume: "vol-a", Size: 10 * gib})
	placedA := testenv.Replica(ns, "vol-a-r-1", testenv.ReplicaFixture{Volume: "vol-a", Size: 10 * gib, NodeID: "node-1", DiskName: "disk-0", DiskID: disk})
	unplacedB := testenv.Replica(ns, "vol-b-r-1", testenv.ReplicaFixture{Volume: "vol-b", Size: 10 * gib})
	ctx := context.Background()
	cache := fake.NewClientBuilder().WithScheme(s).
		WithIndex(&lhv1.Replica{}, index.ReplicaByDisk, func(o client.Object) []string {
			if d := o.(*lhv1.Replica).Spec.DiskID; d != "" {
				return []string{d}
			}
			return nil
		}).WithIndex(&lhv1.BackingImage{}, index.BackingImageByDisk, func(client.Object) []string { return nil }).
		WithObjects(ledgerOf, unplacedA, unplacedB.DeepCopy()).Build()
	live := fake.NewClientBuilder().WithScheme(s).WithObjects(placedA, unplacedB).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	r := NewReconciler(cache, live, events.NewFakeRecorder(10), clk, grace, metrics.NewMirror(prometheus.NewRegistry()))
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: disk}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	clk.Step(grace + time.Second)
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := &dsv1.DiskSchedule{}
	if err := cache.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if _, kept := got.Spec.Replicas["vol-a-r-1"]; !kept {
		t.Errorf("the entry of vol-a-r-1, placed on the disk as the API server shows, was released (spec %v)", got.Spec.Replicas)
	}
	if _, kept := got.Spec.Replicas["vol-b-r-1"]; kept {
		t.Errorf("the entry of vol-b-r-1, placed nowhere, was kept because the cache lags on vol-a-r-1 (spec %v)", got.Spec.Replicas)
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("no requeue to look at vol-a-r-1 again (result %+v)", res)
	}
}
