package diskschedule_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/config"
	"github.com/longhorn/diskschedule/internal/controller/diskschedule"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/scheme"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// builderIndexer registers the manager's field indexes on a fake client.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// TestPendingCountsUntilDecisionsAreWritten checks that
// longhorn_diskschedule_pending_requests counts a ledger's undecided
// requests while its decisions cannot be written, and drops once they are:
// the alert on requests pending for a minute rests on it.
func TestPendingCountsUntilDecisionsAreWritten(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	ds := &dsv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "longhorn-system", Name: "disk-uuid-1"},
		Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1",
			Replicas: map[string]dsv1.RequestedBytes{"r-1": 1 << 30, "r-2": 1 << 30}},
	}
	writesFail := true
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(ds).WithStatusSubresource(ds).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if writesFail {
					return errors.New("the API server is unavailable")
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		})
	if err := index.Register(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	m := metrics.NewLedger(prometheus.NewRegistry())
	r := diskschedule.NewReconciler(b.Build(), &events.FakeRecorder{}, clocktesting.NewFakePassiveClock(metav1.Now().Time), m, 1, config.NewStore())
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ds)}
	pending := m.Pending.WithLabelValues("node-1", "disk-1")

	if _, err := r.Reconcile(context.Background(), req); err == nil {
		t.Fatal("the status write failed, yet Reconcile returned no error")
	}
	if got := testutil.ToFloat64(pending); got != 2 {
		t.Errorf("with the decisions unwritten, pending = %v, want 2", got)
	}
	writesFail = false
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(pending); got != 0 {
		t.Errorf("with the decisions written, pending = %v, want 0", got)
	}
}

// TestBeyondLonghornIsExported checks that
// longhorn_diskschedule_beyond_longhorn_bytes shows, once a ledger is
// decided, what it grants to replicas Longhorn has not persisted on the
// disk: r-1 is persisted there, r-2 (an admitted write that has not landed)
// is not.
func TestBeyondLonghornIsExported(t *testing.T) {
	const gi = int64(1) << 30
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	const ns = "longhorn-system"
	node := testenv.NodeFixture{Name: "node-1", Disks: map[string]testenv.Disk{"disk-1": {UUID: "disk-uuid-1", Size: 100 * gi}}}
	ds := &dsv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "disk-uuid-1"},
		Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1",
			Replicas: map[string]dsv1.RequestedBytes{"r-1": dsv1.RequestedBytes(10 * gi), "r-2": dsv1.RequestedBytes(20 * gi)}},
	}
	persisted := testenv.Replica(ns, "r-1", testenv.ReplicaFixture{Volume: "v-1", Size: 10 * gi, NodeID: "node-1", DiskName: "disk-1", DiskID: "disk-uuid-1"})
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(ds, node.LonghornNode(ns), persisted).WithStatusSubresource(ds)
	if err := index.Register(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	m := metrics.NewLedger(prometheus.NewRegistry())
	r := diskschedule.NewReconciler(b.Build(), &events.FakeRecorder{}, clocktesting.NewFakePassiveClock(metav1.Now().Time), m, 1, config.NewStore())
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ds)}); err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]int64{"unbacked": 20 * gi, "pending": 0, "reserved": 0} {
		if got := testutil.ToFloat64(m.BeyondLonghorn.WithLabelValues("node-1", "disk-1", kind)); got != float64(want) {
			t.Errorf("beyond Longhorn, %s = %v, want %v", kind, got, want)
		}
	}
}
