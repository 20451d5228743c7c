package requirement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/scheme"
)

// heldWrites is a fake API server (the point is the order of writes, which
// a real one shows only by chance) whose patches of DiskSchedules wait
// until the test lets each one through, and which counts them.
type heldWrites struct {
	client.Client
	started chan string
	// release lets one patch of the named DiskSchedule through.
	release map[string]chan struct{}

	mu      sync.Mutex
	patches int
}

func newHeldWrites(t *testing.T, objs ...client.Object) *heldWrites {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	h := &heldWrites{started: make(chan string, 100), release: map[string]chan struct{}{}}
	for _, o := range objs {
		h.release[o.GetName()] = make(chan struct{}, 100)
	}
	h.Client = fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			h.mu.Lock()
			h.patches++
			h.mu.Unlock()
			h.started <- obj.GetName()
			<-h.release[obj.GetName()]
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	return h
}

func (h *heldWrites) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.patches
}

// waitStarted waits until the next patch reached the fake API server,
// and checks it is one of the named DiskSchedule.
func (h *heldWrites) waitStarted(t *testing.T, name string) {
	t.Helper()
	select {
	case got := <-h.started:
		if got != name {
			t.Fatalf("a write of DiskSchedule %s started, want one of %s", got, name)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no write of DiskSchedule %s started", name)
	}
}

func emptyLedger(name string) *dsv1.DiskSchedule {
	return &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1"}}
}

// patchOf is the request of a 1Gi replica as the executor writes it.
func patchOf(t *testing.T, replica string) []byte {
	t.Helper()
	p, err := requestPatch(Request{Kind: ledger.Replica, Name: replica, Size: gi})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitQueued waits until n requests wait for disk's next write.
func waitQueued(t *testing.T, b *Batcher, disk string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := 0
		if d := b.disks[disk]; d != nil {
			got = len(d.waiting)
		}
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests wait for disk %s's next write, want %d", got, disk, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRequestsArrivingDuringAWriteGoInTheNextOne: a lone request is
// written at once; the requests that arrive while it is in flight are
// written together in one merge patch once it returns, and each one's
// entry is in the ledger. A request to another disk does not wait for
// either.
func TestRequestsArrivingDuringAWriteGoInTheNextOne(t *testing.T) {
	h := newHeldWrites(t, emptyLedger("uuid-0"), emptyLedger("uuid-1"))
	clk := clocktesting.NewFakeClock(time.Now())
	var sizes []int
	var mu sync.Mutex
	b := NewBatcher(h, clk, func(size int, _ time.Duration) {
		mu.Lock()
		sizes = append(sizes, size)
		mu.Unlock()
	})
	ctx := context.Background()
	const later = 5
	var wg sync.WaitGroup
	results := make([]*dsv1.DiskSchedule, later+1)
	ask := func(i int, disk string) {
		defer wg.Done()
		ds, err := b.Write(ctx, "ns", disk, patchOf(t, fmt.Sprintf("pvc-%d-r-1", i)))
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		results[i] = ds
	}
	wg.Add(1)
	go ask(0, "uuid-0")
	h.waitStarted(t, "uuid-0") // the lone request did not wait for company
	for i := 1; i <= later; i++ {
		wg.Add(1)
		go ask(i, "uuid-0")
	}
	waitQueued(t, b, "uuid-0", later)

	// Another disk's request is written while uuid-0's write is held.
	other := make(chan error, 1)
	go func() {
		_, err := b.Write(ctx, "ns", "uuid-1", patchOf(t, "pvc-x-r-1"))
		other <- err
	}()
	h.waitStarted(t, "uuid-1")
	h.release["uuid-1"] <- struct{}{}
	if err := <-other; err != nil {
		t.Fatalf("the other disk's request: %v", err)
	}

	h.release["uuid-0"] <- struct{}{} // the lone write
	h.waitStarted(t, "uuid-0")        // the batch of the later ones
	h.release["uuid-0"] <- struct{}{}
	wg.Wait()
	if got := h.count(); got != 3 {
		t.Errorf("%d ledger writes, want 3: the lone one, the batch of %d, the other disk's", got, later)
	}
	mu.Lock()
	if fmt.Sprint(sizes) != fmt.Sprint([]int{1, 1, later}) { // uuid-0's lone write, uuid-1's, the batch
		t.Errorf("batch sizes %v, want [1 1 %d]", sizes, later)
	}
	mu.Unlock()
	stored := &dsv1.DiskSchedule{}
	if err := h.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "uuid-0"}, stored); err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= later; i++ {
		name := fmt.Sprintf("pvc-%d-r-1", i)
		if int64(stored.Spec.Replicas[name]) != gi {
			t.Errorf("request %s is not in the ledger: %v", name, stored.Spec.Replicas)
		}
		if results[i] == nil || results[i].Name != "uuid-0" {
			t.Errorf("request %d got no version written: %v", i, results[i])
		}
	}
	if results[1].ResourceVersion != results[later].ResourceVersion {
		t.Errorf("one batch, two versions written: %s and %s", results[1].ResourceVersion, results[later].ResourceVersion)
	}
}

// TestAWaitingRequestLeavesWhenItsAdmissionEnds: a request whose context
// ends while it waits for the write ahead is not written, and the next
// waiting request still writes its batch.
func TestAWaitingRequestLeavesWhenItsAdmissionEnds(t *testing.T) {
	h := newHeldWrites(t, emptyLedger("uuid-0"))
	b := NewBatcher(h, clocktesting.NewFakeClock(time.Now()), nil)
	done := make(chan error, 3)
	go func() {
		_, err := b.Write(context.Background(), "ns", "uuid-0", patchOf(t, "first"))
		done <- err
	}()
	h.waitStarted(t, "uuid-0")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := b.Write(ctx, "ns", "uuid-0", patchOf(t, "gone"))
		done <- err
	}()
	waitQueued(t, b, "uuid-0", 1)
	go func() {
		_, err := b.Write(context.Background(), "ns", "uuid-0", patchOf(t, "last"))
		done <- err
	}()
	waitQueued(t, b, "uuid-0", 2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the request whose admission ended: %v, want it canceled", err)
	}
	h.release["uuid-0"] <- struct{}{}
	h.waitStarted(t, "uuid-0")
	h.release["uuid-0"] <- struct{}{}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	stored := &dsv1.DiskSchedule{}
	if err := h.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "uuid-0"}, stored); err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.Spec.Replicas["gone"]; ok || len(stored.Spec.Replicas) != 2 {
		t.Errorf("ledger holds %v, want first and last only", stored.Spec.Replicas)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.disks) != 0 {
		t.Errorf("the batcher still tracks %d disks with nothing in flight", len(b.disks))
	}
}

// TestRequestPatchWritesWhatWriteDoes: the merge patch the executor sends
// without the lock changes a ledger exactly as the edit Write does for a
// request that takes over no reservation, and leaves the other writers'
// keys alone; written says when there is nothing to send.
func TestRequestPatchWritesWhatWriteDoes(t *testing.T) {
	base := emptyLedger("uuid-0")
	base.Spec.Replicas = map[string]dsv1.RequestedBytes{"other-r-1": dsv1.RequestedBytes(gi), "pvc-1-r-1": dsv1.RequestedBytes(gi)}
	base.Spec.BackingImages = map[string]dsv1.RequestedBytes{"bi-other": dsv1.RequestedBytes(gi)}
	base.Spec.ReplicaVersions = map[string]string{"other-r-1": "3"}
	for _, r := range []Request{
		{Disk: "uuid-0", Kind: ledger.Replica, Name: "pvc-2-r-1", Size: 2 * gi},
		{Disk: "uuid-0", Kind: ledger.Replica, Name: "pvc-2-r-1", Size: 2 * gi, Version: "17"},
		{Disk: "uuid-0", Kind: ledger.Replica, Name: "pvc-1-r-1", Size: 3 * gi},
		{Disk: "uuid-0", Kind: ledger.BackingImage, Name: "bi-1", Size: gi},
	} {
		want := base.DeepCopy()
		if !Write(r)(want) {
			t.Fatalf("%+v: Write changed nothing", r)
		}
		if written(base, r) || !written(want, r) {
			t.Errorf("%+v: written = %v before and %v after the write, want false and true", r, written(base, r), written(want, r))
		}
		patch, err := requestPatch(r)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := json.Marshal(base)
		if err != nil {
			t.Fatal(err)
		}
		if doc, err = jsonpatch.MergePatch(doc, patch); err != nil {
			t.Fatal(err)
		}
		got := &dsv1.DiskSchedule{}
		if err := json.Unmarshal(doc, got); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
			t.Errorf("%+v: the patch %s gives spec %+v, Write gives %+v", r, patch, got.Spec, want.Spec)
		}
	}
}
