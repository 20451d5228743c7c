package ledgerclient

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/scheme"
)

// busyLedger returns a client whose DiskSchedule "uuid-0" holds the request
// r = 5 and whose first conflicts patches lose the optimistic lock, as on
// a ledger other writers change all the time; patches counts the patches.
func busyLedger(t *testing.T, conflicts int, patches *int) (client.Client, *dsv1.DiskSchedule) {
	t.Helper()
	ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "longhorn-system", Name: "uuid-0"},
		Spec: dsv1.DiskScheduleSpec{Name: "disk-0", NodeID: "node-0", Replicas: map[string]dsv1.RequestedBytes{"r": 5}}}
	sch, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(sch).WithObjects(ds).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			*patches++
			if *patches <= conflicts {
				return apierrors.NewConflict(schema.GroupResource{Group: "longhorn.io", Resource: "diskschedules"}, obj.GetName(),
					errors.New("the object has been modified; please apply your changes to the latest version and try again"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	cur := &dsv1.DiskSchedule{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(ds), cur); err != nil {
		t.Fatal(err)
	}
	return c, cur
}

// A put-back never fails on a busy ledger: it outlasts more lost races
// than Edit would try, and ends only with its context.
func TestPutBackOnABusyLedger(t *testing.T) {
	withdraw := func(ds *dsv1.DiskSchedule) bool {
		if _, ok := ds.Spec.Replicas["r"]; !ok {
			return false
		}
		delete(ds.Spec.Replicas, "r")
		return true
	}
	for _, tc := range []struct {
		name      string
		conflicts int
		put       func(context.Context, client.Writer, client.Reader, *dsv1.DiskSchedule, func(*dsv1.DiskSchedule) bool, func()) (*dsv1.DiskSchedule, error)
		timeout   time.Duration
		wantErr   bool
	}{
		{"Edit gives up after MaxEditAttempts lost races", MaxEditAttempts, Edit, time.Minute, true},
		{"PutBack outlasts them", 3 * MaxEditAttempts, PutBack, time.Minute, false},
		{"PutBack ends with its context", 1 << 30, PutBack, 200 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var patches, conflicted int
			c, cur := busyLedger(t, tc.conflicts, &patches)
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			written, err := tc.put(ctx, c, c, cur, withdraw, func() { conflicted++ })
			if (err != nil) != tc.wantErr {
				t.Fatalf("after %d patches: error %v, want error %v", patches, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if _, ok := written.Spec.Replicas["r"]; ok || conflicted != tc.conflicts {
				t.Errorf("written %v after %d conflicts, want r withdrawn after %d", written.Spec.Replicas, conflicted, tc.conflicts)
			}
			stored := &dsv1.DiskSchedule{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cur), stored); err != nil || len(stored.Spec.Replicas) != 0 {
				t.Errorf("stored %v (%v), want r withdrawn", stored.Spec.Replicas, err)
			}
		})
	}
}
