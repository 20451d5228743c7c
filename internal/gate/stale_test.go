package gate

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/scheme"
)

// staleCache is a manager's client whose reads come from a cache that lags
// behind the API server its writes go to.
type staleCache struct {
	client.Client
	cache client.Reader
}

func (c staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.cache.Get(ctx, key, obj, opts...)
}

func (c staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.cache.List(ctx, list, opts...)
}

// TestAlreadyGrantedIsCheckedAgainstTheAPIServer: a write of a placement
// the gate's cache still shows granted, but whose grant the mirror has
// released on the API server (a write no longer backs it), is not admitted
// at once: a cache that lags behind a release must never let a replica land
// without a grant. Fakes stand in for the cache and the API server here, as
// the point is their disagreement, which a real cache shows only by chance.
func TestAlreadyGrantedIsCheckedAgainstTheAPIServer(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	const ns, disk, replica = "longhorn-system", "uuid-0", "pvc-1-r-1"
	granted := &dsv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: disk, Namespace: ns, Generation: 2},
		Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1",
			Replicas: map[string]dsv1.RequestedBytes{replica: dsv1.RequestedBytes(10 * gi)}, ReplicaVersions: map[string]string{replica: "7"}},
		Status: dsv1.DiskScheduleStatus{ObservedGeneration: 2, Replicas: map[string]dsv1.RequestStatus{
			replica: {State: dsv1.RequestStateScheduled, RequestedSize: 10 * gi, ScheduledSize: 10 * gi}}},
	}
	released := granted.DeepCopy()
	released.Generation, released.Status.ObservedGeneration = 3, 3
	released.Spec.Replicas, released.Spec.ReplicaVersions, released.Status.Replicas = nil, nil, nil

	ask := replicaAsk{replica: replica, size: 10 * gi, version: "7"}
	for _, tc := range []struct {
		name      string
		api       *dsv1.DiskSchedule
		wantAllow bool
	}{
		{"still granted on the API server", granted, true},
		{"released on the API server", released, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := fake.NewClientBuilder().WithScheme(s).WithObjects(granted.DeepCopy()).Build()
			api := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.api.DeepCopy()).Build()
			g := &Gate{client: staleCache{Client: api, cache: cache}, apiReader: api, metrics: metrics.NewGate(prometheus.NewRegistry()), waiter: newWaiter(),
				log: logr.Discard(), namespace: ns, timeout: time.Second}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			v := g.askReplica(ctx, disk, ask, false)
			if v.allowed != tc.wantAllow {
				t.Errorf("askReplica = %+v, want allowed %v", v, tc.wantAllow)
			}
		})
	}
}
