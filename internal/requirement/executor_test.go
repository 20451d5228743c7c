package requirement

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/scheme"
)

const gi = int64(1) << 30

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

// said says each outcome of a request by its name, for tests.
func said() Words {
	return Words{NoLedger: "no ledger (gone false)", Gone: "no ledger (gone true)", Undecided: "undecided", Needs: "refused"}
}

// TestAlreadyGrantedIsCheckedAgainstTheAPIServer: a write of a placement
// the executor's cache still shows granted, but whose grant the mirror has
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

	plan := Plan{Requests: []Request{{Disk: disk, Kind: ledger.Replica, Name: replica, Size: 10 * gi, Version: "7", Confirm: true, Words: said()}},
		KeepUndecided: true, Admitted: "admitted (asked true)", AlreadyGranted: "admitted (asked false)"}
	for _, tc := range []struct {
		name      string
		api       *dsv1.DiskSchedule
		want      string
		roundTrip bool
	}{
		{"still granted on the API server", granted, "admitted (asked false)", false},
		// Asked afresh from the API server's version, and, with no
		// controller to decide here, left undecided.
		{"released on the API server", released, "undecided: the ledger gave no decision in time; retry", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := fake.NewClientBuilder().WithScheme(s).WithObjects(granted.DeepCopy()).Build()
			api := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.api.DeepCopy()).Build()
			e := NewExecutor(staleCache{Client: api, cache: cache}, api, NewWaiter(nil), nil, nil, nil, logr.Discard(), ns)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if got := e.Execute(ctx, plan, false); got.Message != tc.want || got.RoundTrip != tc.roundTrip {
				t.Errorf("Execute = %+v, want %q with a ledger round trip %v", got, tc.want, tc.roundTrip)
			}
			if tc.api == released {
				stored := &dsv1.DiskSchedule{}
				if err := api.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: disk}, stored); err != nil {
					t.Fatal(err)
				}
				if stored.Spec.Replicas[replica] != dsv1.RequestedBytes(10*gi) || stored.Spec.ReplicaVersions[replica] != "7" {
					t.Errorf("the request was not written again from the API server's version: %+v", stored.Spec)
				}
			}
		})
	}
}

// A dry run writes nothing, and a plan's own answer asks nothing.
func TestExecuteWritesNothingForADryRun(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: "uuid-0", Namespace: "ns"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(ds).Build()
	e := NewExecutor(c, c, NewWaiter(nil), nil, nil, nil, logr.Discard(), "ns")
	plan := Plan{Requests: []Request{{Disk: "uuid-0", Kind: ledger.BackingImage, Name: "image", Size: gi, Words: said()}},
		DryRun: AllowWithWarning("dry run", "not asked"), Admitted: "admitted"}
	if got := e.Execute(context.Background(), plan, true); !got.Allowed || got.Warning != "not asked" || got.RoundTrip {
		t.Errorf("dry run answered %+v", got)
	}
	admit := Admit("takes no space")
	admit.Requests = plan.Requests
	if got := e.Execute(context.Background(), admit, false); !got.Allowed || got.Message != "takes no space" || got.RoundTrip {
		t.Errorf("a plan's own answer: %+v", got)
	}
	stored := &dsv1.DiskSchedule{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ds), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.BackingImages != nil || stored.ResourceVersion != "999" {
		t.Errorf("the ledger was written: %+v (resourceVersion %s)", stored.Spec, stored.ResourceVersion)
	}
}

// Putting back a refused request restores what was there, and leaves
// alone a request someone else changed since; withdrawing acts on a
// rejection alone.
func TestPutBackAndWithdraw(t *testing.T) {
	m := map[string]dsv1.RequestedBytes{"new": 100, "grown": 200, "changed": 300}
	if !restoreRequest(m, "new", 100, 0) {
		t.Error("a new request was not removed")
	}
	if !restoreRequest(m, "grown", 200, 50) || m["grown"] != 50 {
		t.Errorf("a growth was not put back to 50: %v", m)
	}
	if restoreRequest(m, "changed", 999, 0) || m["changed"] != 300 {
		t.Errorf("a request changed by someone else was touched: %v", m)
	}
	if _, ok := m["new"]; ok {
		t.Errorf("removed request still there: %v", m)
	}
	var nilMap map[string]dsv1.RequestedBytes
	if !setRequest(&nilMap, "r", 10) || nilMap["r"] != 10 || setRequest(&nilMap, "r", 10) {
		t.Errorf("setRequest on a nil map: %v", nilMap)
	}

	r := Request{Disk: "uuid-0", Kind: ledger.Replica, Name: "pvc-a-r-1", Size: 20 * gi, Version: "9"}
	ledgerAt := func(state dsv1.RequestState) *dsv1.DiskSchedule {
		return &dsv1.DiskSchedule{
			Spec: dsv1.DiskScheduleSpec{Replicas: map[string]dsv1.RequestedBytes{r.Name: dsv1.RequestedBytes(20 * gi)},
				ReplicaVersions: map[string]string{r.Name: "9"}},
			Status: dsv1.DiskScheduleStatus{Replicas: map[string]dsv1.RequestStatus{r.Name: {
				State: state, RequestedSize: 20 * gi, ScheduledSize: 10 * gi}}}}
	}
	rejected := ledgerAt(dsv1.RequestStateRejected)
	if !Withdraw(r)(rejected) || rejected.Spec.Replicas[r.Name] != dsv1.RequestedBytes(10*gi) {
		t.Errorf("a rejected growth was not withdrawn to what was granted: %+v", rejected.Spec)
	}
	granted := ledgerAt(dsv1.RequestStateScheduled)
	granted.Status.Replicas[r.Name] = dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: 20 * gi, ScheduledSize: 20 * gi}
	if Withdraw(r)(granted) {
		t.Errorf("a request not rejected was withdrawn: %+v", granted.Spec)
	}
	placed := ledgerAt(dsv1.RequestStateRejected)
	if !PutBack(r, 0)(placed) || len(placed.Spec.Replicas) != 0 || len(placed.Spec.ReplicaVersions) != 0 {
		t.Errorf("a refused placement left its request or version behind: %+v", placed.Spec)
	}
	if got := before(ledgerAt(dsv1.RequestStateRejected), r); got != 10*gi {
		t.Errorf("a request already in the ledger is put back to %d, want what was granted, %d", got, 10*gi)
	}
}

// A write with requests on two disks, one granted and one refused, is
// denied with the refusal's words and the ledger's numbers (worded here as
// a volume's growth, which says how many bytes it asked beyond what the
// entry held); what was granted is put back, and the new request the
// ledger rejected is left as decided, holding nothing.
// The ledgers' statuses hold the decisions already (as the controller
// would write them), so the fakes need no controller.
func TestExecutePutsBackWhatARefusedWriteWasGranted(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	const ns, image = "longhorn-system", "default-image-x7k2p"
	decided := func(disk string, state dsv1.RequestState, scheduled int64) *dsv1.DiskSchedule {
		return &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: disk, Namespace: ns},
			Spec: dsv1.DiskScheduleSpec{Name: "disk", NodeID: "node"},
			Status: dsv1.DiskScheduleStatus{ObservedGeneration: 100, BackingImages: map[string]dsv1.RequestStatus{image: {
				State: state, RequestedSize: 3 * gi, ScheduledSize: scheduled, Message: "requested 3Gi, 1Gi free of limit 100Gi"}}}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		decided("uuid-0", dsv1.RequestStateScheduled, 3*gi), decided("uuid-1", dsv1.RequestStateRejected, 0)).Build()
	e := NewExecutor(c, c, NewWaiter(nil), nil, nil, nil, logr.Discard(), ns)
	w := said()
	w.Growth = "the write grows"
	plan := Plan{Admitted: "admitted", Requests: []Request{
		{Disk: "uuid-0", Kind: ledger.BackingImage, Name: image, Size: 3 * gi, Words: w},
		{Disk: "uuid-1", Kind: ledger.BackingImage, Name: image, Size: 3 * gi, Words: w},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := e.Execute(ctx, plan, false)
	want := "failed to schedule 3221225472 more bytes to disk uuid-1: the write grows, but refused on disk disk of node node: requested 3Gi, 1Gi free of limit 100Gi"
	if got.Allowed || got.Result != ResultDenied || got.Message != want || !got.RoundTrip {
		t.Errorf("Execute = %+v, want denied: %q, after a ledger round trip", got, want)
	}
	stored := func(disk string) *dsv1.DiskSchedule {
		ds := &dsv1.DiskSchedule{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: disk}, ds); err != nil {
			t.Fatal(err)
		}
		return ds
	}
	if granted := stored("uuid-0"); len(granted.Spec.BackingImages) != 0 {
		t.Errorf("the granted request on uuid-0 was not put back: %v", granted.Spec.BackingImages)
	}
	rejected := stored("uuid-1")
	if rejected.Spec.BackingImages[image] != dsv1.RequestedBytes(3*gi) {
		t.Errorf("the rejected request on uuid-1 was written away: %v", rejected.Spec.BackingImages)
	}
	if d, _ := Decision(rejected, plan.Requests[1]); d != ledger.Rejected || rejected.Status.BackingImages[image].ScheduledSize != 0 {
		t.Errorf("the request left on uuid-1 is %s, holding %d bytes; want rejected, holding nothing",
			d, rejected.Status.BackingImages[image].ScheduledSize)
	}
}

// TestALedgerAtItsBoundDeniesNewReplicas: a disk whose ledger holds
// dsv1.MaxReplicaEntries replica entries denies a new placement with the
// numbers and the bound named, writes nothing, and still admits a replica
// already among its entries.
func TestALedgerAtItsBoundDeniesNewReplicas(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: "uuid-0", Namespace: "ns"},
		Spec:   dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1", Replicas: map[string]dsv1.RequestedBytes{}},
		Status: dsv1.DiskScheduleStatus{Replicas: map[string]dsv1.RequestStatus{}}}
	for i := range dsv1.MaxReplicaEntries {
		name := fmt.Sprintf("pvc-%d-r-1", i)
		ds.Spec.Replicas[name] = dsv1.RequestedBytes(gi)
		ds.Status.Replicas[name] = dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: gi, ScheduledSize: gi}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(ds).WithStatusSubresource(ds).Build()
	e := NewExecutor(c, c, NewWaiter(nil), nil, nil, nil, logr.Discard(), "ns")
	plan := Plan{Requests: []Request{{Disk: "uuid-0", Kind: ledger.Replica, Name: "pvc-new-r-1", Size: gi, Words: said()}}, Admitted: "admitted"}
	got := e.Execute(context.Background(), plan, false)
	if got.Allowed || got.Result != ResultDenied || !strings.Contains(got.Message, fmt.Sprintf("already holds %d replica entries", dsv1.MaxReplicaEntries)) ||
		!strings.Contains(got.Message, "maxProperties") || got.RoundTrip {
		t.Errorf("a new replica on a full ledger: %+v, want a denial naming the bound", got)
	}
	stored := &dsv1.DiskSchedule{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ds), stored); err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.Spec.Replicas["pvc-new-r-1"]; ok {
		t.Error("the denied replica was written into the full ledger")
	}
	plan.Requests[0].Name = "pvc-7-r-1"
	if got := e.Execute(context.Background(), plan, false); !got.Allowed || got.RoundTrip {
		t.Errorf("a replica already granted on the full ledger: %+v, want it admitted without a ledger round trip", got)
	}
}
