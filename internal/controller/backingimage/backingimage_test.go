package backingimage_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/backingimage"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/testenv"
)

const (
	gi = int64(1) << 30
	// settleTimeout bounds every wait for the controllers to converge.
	settleTimeout = 90 * time.Second
	pollInterval  = 100 * time.Millisecond
)

// startControllers starts the project's manager (ledgers, nodes, settings,
// backing images); it stops when the test ends.
func startControllers(t *testing.T, ns string) {
	t.Helper()
	m, err := env.StartManager(env.Config, manager.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("stopping the manager: %v", err)
		}
	})
}

// disk returns a disk fixture of size bytes with the given tags.
func disk(uuid string, size int64, tags ...string) testenv.Disk {
	return testenv.Disk{UUID: uuid, Size: size, Tags: tags}
}

// createNodes creates the node fixtures and waits until every node is Ready
// and Schedulable and every disk's ledger accepts requests up to the disk's
// full size (no reserve, 100% over-provisioning).
func createNodes(t *testing.T, ns string, fixtures ...testenv.NodeFixture) {
	t.Helper()
	ctx := context.Background()
	limits := map[string]int64{}
	for _, f := range fixtures {
		if err := f.CreateNode(ctx, env.Client, ns); err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Disks {
			limits[d.UUID] = d.Size
		}
	}
	var why string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, settleTimeout, true, func(ctx context.Context) (bool, error) {
		nodes := &longhornv1.NodeList{}
		if err := env.Client.List(ctx, nodes, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, n := range nodes.Items {
			if !meta.IsStatusConditionTrue(n.Status.Conditions, longhornv1.NodeConditionReady) ||
				!meta.IsStatusConditionTrue(n.Status.Conditions, longhornv1.NodeConditionSchedulable) {
				why = fmt.Sprintf("node %s is not Ready and Schedulable", n.Name)
				return false, nil
			}
			for name, d := range n.Status.DiskStatus {
				if !meta.IsStatusConditionTrue(d.Conditions, longhornv1.DiskConditionSchedulable) {
					why = fmt.Sprintf("disk %s/%s is not Schedulable", n.Name, name)
					return false, nil
				}
			}
		}
		for uuid, limit := range limits {
			ds := &longhornv1.DiskSchedule{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds); err != nil {
				why = fmt.Sprintf("DiskSchedule %s: %v", uuid, err)
				return false, nil
			}
			if ds.Status.StorageLimit != limit || !meta.IsStatusConditionTrue(ds.Status.Conditions, longhornv1.DiskScheduleConditionReady) {
				why = fmt.Sprintf("DiskSchedule %s has limit %d (want %d) and is not Ready yet", uuid, ds.Status.StorageLimit, limit)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the nodes did not become schedulable: %s: %v", why, err)
	}
}

// newImage returns a backing image asking for copies copies.
func newImage(ns, name string, copies int) *longhornv1.BackingImage {
	return &longhornv1.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       longhornv1.BackingImageSpec{MinNumberOfCopies: copies},
	}
}

// setSize writes status.size, as whatever reads the image's source would.
func setSize(ctx context.Context, bi *longhornv1.BackingImage, size int64) error {
	base := bi.DeepCopy()
	bi.Status.Size = size
	return env.Client.Status().Patch(ctx, bi, client.MergeFrom(base))
}

// createImages creates the images and sets their size, each from its own
// goroutine, so their copies are placed at the same time.
func createImages(t *testing.T, images []*longhornv1.BackingImage, size int64) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(images))
	for _, bi := range images {
		wg.Go(func() {
			ctx := context.Background()
			if err := env.Client.Create(ctx, bi); err != nil {
				errs <- err
				return
			}
			errs <- setSize(ctx, bi, size)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// watchLedgers checks every version of every ledger of ns the API server
// stores, not only those a poll happens to see: none may grant more than
// its limit. The returned function reports what the watch found.
func watchLedgers(t *testing.T, ns string) (report func()) {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &longhornv1.DiskScheduleList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var (
		mu         sync.Mutex
		versions   int
		violations []string
		stopped    bool
		endedEarly bool
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			ds, ok := ev.Object.(*longhornv1.DiskSchedule)
			if !ok {
				continue
			}
			mu.Lock()
			versions++
			if ds.Status.StorageScheduled > ds.Status.StorageLimit {
				violations = append(violations, fmt.Sprintf("ledger %s at resourceVersion %s grants %d bytes over its limit %d",
					ds.Name, ds.ResourceVersion, ds.Status.StorageScheduled, ds.Status.StorageLimit))
			}
			mu.Unlock()
		}
		mu.Lock()
		endedEarly = !stopped
		mu.Unlock()
	}()
	t.Cleanup(func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		w.Stop()
		cancel()
		<-done
	})
	return func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, v := range violations {
			t.Error(v)
		}
		if endedEarly {
			t.Error("the ledger watch ended before the test did; some ledger versions went unchecked")
		}
		t.Logf("checked %d ledger versions from the watch", versions)
	}
}

// holdFinalizer keeps a deleted image in the tests after the controller is done with it.
const holdFinalizer = "test.longhorn.io/hold"

// editFinalizers applies edit to the latest version of bi and writes it.
func editFinalizers(ctx context.Context, bi *longhornv1.BackingImage, edit func(client.Object) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bi), bi); err != nil {
			return err
		}
		if !edit(bi) {
			return nil
		}
		return env.Client.Update(ctx, bi)
	})
}

func addHold(obj client.Object) bool    { return controllerutil.AddFinalizer(obj, holdFinalizer) }
func removeHold(obj client.Object) bool { return controllerutil.RemoveFinalizer(obj, holdFinalizer) }

// snapshot is the images and ledgers of a namespace at one moment.
type snapshot struct {
	images  []longhornv1.BackingImage
	ledgers []longhornv1.DiskSchedule
}

func takeSnapshot(ctx context.Context, ns string) (snapshot, error) {
	var s snapshot
	images := &longhornv1.BackingImageList{}
	if err := env.Client.List(ctx, images, client.InNamespace(ns)); err != nil {
		return s, err
	}
	ledgers := &longhornv1.DiskScheduleList{}
	if err := env.Client.List(ctx, ledgers, client.InNamespace(ns)); err != nil {
		return s, err
	}
	s.images, s.ledgers = images.Items, ledgers.Items
	return s, nil
}

// checkLimits fails the test for every ledger over its limit.
func (s snapshot) checkLimits(t *testing.T) {
	t.Helper()
	for _, ds := range s.ledgers {
		if ds.Status.StorageScheduled > ds.Status.StorageLimit {
			t.Errorf("ledger %s grants %d bytes over its limit %d", ds.Name, ds.Status.StorageScheduled, ds.Status.StorageLimit)
		}
	}
}

// undecided returns what a ledger has not decided yet, or "".
func undecided(ds *longhornv1.DiskSchedule) string {
	if ds.Status.ObservedGeneration != ds.Generation {
		return fmt.Sprintf("ledger %s has not decided generation %d", ds.Name, ds.Generation)
	}
	for name, size := range ds.Spec.BackingImages {
		if st, ok := ds.Status.BackingImages[name]; !ok || st.RequestedSize != int64(size) {
			return fmt.Sprintf("ledger %s has not decided %s", ds.Name, name)
		}
	}
	for name := range ds.Status.BackingImages {
		if _, ok := ds.Spec.BackingImages[name]; !ok {
			return fmt.Sprintf("ledger %s still shows a decision on released %s", ds.Name, name)
		}
	}
	return ""
}

// unsettled returns "" once the ledgers have decided every request and every
// image is in a final state consistent with them: its disks are exactly the
// ledgers holding its request, each granted and ready, and the image is
// either CopiesScheduled or short of disks. With everyDiskEligible, an image
// short of disks must also have no ledger without a copy of it that could
// grant size more bytes.
func (s snapshot) unsettled(size int64, everyDiskEligible bool) string {
	for i := range s.ledgers {
		if why := undecided(&s.ledgers[i]); why != "" {
			return why
		}
	}
	for _, bi := range s.images {
		c := meta.FindStatusCondition(bi.Status.Conditions, longhornv1.BackingImageConditionCopiesScheduled)
		if c == nil || c.ObservedGeneration != bi.Generation {
			return fmt.Sprintf("image %s has no CopiesScheduled condition for generation %d", bi.Name, bi.Generation)
		}
		if c.Status != metav1.ConditionTrue && c.Reason != longhornv1.BackingImageReasonInsufficientDisks {
			return fmt.Sprintf("image %s is %s: %s", bi.Name, c.Reason, c.Message)
		}
		for _, ds := range s.ledgers {
			_, requested := ds.Spec.BackingImages[bi.Name]
			_, holds := bi.Spec.DiskFileSpecMap[ds.Name]
			if requested != holds {
				return fmt.Sprintf("image %s: disk %s in diskFileSpecMap %t, requested in its ledger %t", bi.Name, ds.Name, holds, requested)
			}
			if holds {
				if st := ds.Status.BackingImages[bi.Name]; st.State != longhornv1.RequestStateScheduled || st.ScheduledSize != size {
					return fmt.Sprintf("image %s: disk %s decided %+v", bi.Name, ds.Name, st)
				}
				if st := bi.Status.DiskFileStatusMap[ds.Name]; st.State != longhornv1.BackingImageFileReady {
					return fmt.Sprintf("image %s: copy on disk %s is %q", bi.Name, ds.Name, st.State)
				}
				continue
			}
			if free := ds.Status.StorageLimit - ds.Status.StorageScheduled; everyDiskEligible && c.Status != metav1.ConditionTrue && free >= size {
				return fmt.Sprintf("image %s lacks copies while disk %s has %d bytes free", bi.Name, ds.Name, free)
			}
		}
	}
	return ""
}

// waitSettled polls until the namespace is settled (see unsettled), checking
// every ledger's limit at each poll, and returns the settled snapshot.
func waitSettled(t *testing.T, ns string, size int64, everyDiskEligible bool) snapshot {
	t.Helper()
	var s snapshot
	var why string
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, settleTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if s, err = takeSnapshot(ctx, ns); err != nil {
			return false, err
		}
		s.checkLimits(t)
		why = s.unsettled(size, everyDiskEligible)
		return why == "", nil
	})
	if err != nil {
		t.Fatalf("the backing images did not settle: %s: %v", why, err)
	}
	return s
}

// waitImage polls until the named image satisfies ok, and returns it.
func waitImage(t *testing.T, ns, name string, what string, ok func(*longhornv1.BackingImage) bool) *longhornv1.BackingImage {
	t.Helper()
	bi := &longhornv1.BackingImage{}
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, settleTimeout, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, bi); err != nil {
			return false, err
		}
		return ok(bi), nil
	})
	if err != nil {
		t.Fatalf("backing image %s is not %s: status %+v: %v", name, what, bi.Status, err)
	}
	return bi
}

// hasCondition returns a check that the image's CopiesScheduled condition
// has the given status and reason for its current generation.
func hasCondition(status metav1.ConditionStatus, reason string) func(*longhornv1.BackingImage) bool {
	return func(bi *longhornv1.BackingImage) bool {
		c := meta.FindStatusCondition(bi.Status.Conditions, longhornv1.BackingImageConditionCopiesScheduled)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == bi.Generation
	}
}

// grantedDisks returns the disks whose ledger granted image size bytes, sorted.
func grantedDisks(ledgers []longhornv1.DiskSchedule, image string, size int64) []string {
	var out []string
	for _, ds := range ledgers {
		if st, ok := ds.Status.BackingImages[image]; ok && st.State == longhornv1.RequestStateScheduled && st.ScheduledSize == size {
			out = append(out, ds.Name)
		}
	}
	sort.Strings(out)
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestConcurrentCopies creates 6 images of 4Gi with 2 copies each at once
// on 4 disks of 10Gi, which hold 2 copies each: 8 of the 12 copies at most.
// No ledger ever grants over its limit, copies rejected by a disk land
// elsewhere, and the images end either with their copies or short of disks
// while no disk could take one more. Deleting every image then frees every
// disk.
func TestConcurrentCopies(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startControllers(t, ns)
	createNodes(t, ns,
		testenv.NodeFixture{Name: ns + "-n0", Disks: map[string]testenv.Disk{"disk-a": disk(ns+"-d0", 10*gi), "disk-b": disk(ns+"-d1", 10*gi)}},
		testenv.NodeFixture{Name: ns + "-n1", Disks: map[string]testenv.Disk{"disk-a": disk(ns+"-d2", 10*gi), "disk-b": disk(ns+"-d3", 10*gi)}},
	)
	report := watchLedgers(t, ns)

	const size = 4 * gi
	var images []*longhornv1.BackingImage
	for i := range 6 {
		images = append(images, newImage(ns, fmt.Sprintf("image-%d", i), 2))
	}
	createImages(t, images, size)

	s := waitSettled(t, ns, size, true)
	s.checkLimits(t)
	var scheduled, short, copies, failures int
	for _, bi := range s.images {
		granted := grantedDisks(s.ledgers, bi.Name, size)
		if got := keys(bi.Spec.DiskFileSpecMap); !slices.Equal(got, granted) {
			t.Errorf("image %s: diskFileSpecMap %v, granted on %v", bi.Name, got, granted)
		}
		copies += len(granted)
		c := meta.FindStatusCondition(bi.Status.Conditions, longhornv1.BackingImageConditionCopiesScheduled)
		switch {
		case c.Status == metav1.ConditionTrue:
			scheduled++
			if len(granted) < 2 {
				t.Errorf("image %s is CopiesScheduled with %d copies granted", bi.Name, len(granted))
			}
		case c.Reason == longhornv1.BackingImageReasonInsufficientDisks:
			short++
			if len(granted) >= 2 {
				t.Errorf("image %s is short of disks with %d copies granted", bi.Name, len(granted))
			}
			if !strings.Contains(c.Message, "free of limit 10Gi, needs 4Gi") && !strings.Contains(c.Message, "hold a copy") {
				t.Errorf("image %s: InsufficientDisks message %q gives no numbers", bi.Name, c.Message)
			}
		}
		for uuid, st := range bi.Status.DiskFileStatusMap {
			if st.State == longhornv1.BackingImageFileFailed {
				failures++
				if _, held := bi.Spec.DiskFileSpecMap[uuid]; held || !strings.Contains(st.Message, "rejected") {
					t.Errorf("image %s: failed copy on disk %s: %q, still in diskFileSpecMap: %t", bi.Name, uuid, st.Message, held)
				}
			}
		}
	}
	var total, limit int64
	for _, ds := range s.ledgers {
		total += ds.Status.StorageScheduled
		limit += ds.Status.StorageLimit
	}
	if total != int64(copies)*size || total > limit {
		t.Errorf("ledgers grant %d bytes for %d copies of %d bytes, capacity %d", total, copies, size, limit)
	}
	if scheduled == 0 || short == 0 || scheduled+short != len(images) {
		t.Errorf("%d images CopiesScheduled and %d short of disks, want at least one of each and %d in all", scheduled, short, len(images))
	}
	t.Logf("%d images scheduled, %d short of disks, %d copies granted (%d bytes of %d), %d copies rejected and placed again",
		scheduled, short, copies, total, limit, failures)

	// Deletion releases every disk of every image. A second finalizer holds
	// the deleted images, so their requests cannot be garbage-collected by
	// the ledgers (which release only entries whose owner is gone): the
	// backing-image controller must release them itself.
	for _, bi := range s.images {
		if err := editFinalizers(ctx, &bi, addHold); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, &bi); err != nil {
			t.Fatal(err)
		}
	}
	var why string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, settleTimeout, true, func(ctx context.Context) (bool, error) {
		s, err := takeSnapshot(ctx, ns)
		if err != nil {
			return false, err
		}
		s.checkLimits(t)
		for _, bi := range s.images {
			if !slices.Equal(bi.Finalizers, []string{holdFinalizer}) {
				why = fmt.Sprintf("deleted image %s has finalizers %v", bi.Name, bi.Finalizers)
				return false, nil
			}
		}
		for _, ds := range s.ledgers {
			if len(ds.Spec.BackingImages) > 0 || len(ds.Status.BackingImages) > 0 || ds.Status.StorageScheduled != 0 {
				why = fmt.Sprintf("ledger %s still holds %v, %d bytes", ds.Name, keys(ds.Spec.BackingImages), ds.Status.StorageScheduled)
				return false, nil
			}
		}
		return len(s.images) == len(images), nil
	})
	if err != nil {
		t.Fatalf("deleting the images did not free every disk: %s: %v", why, err)
	}
	for _, bi := range s.images {
		if err := editFinalizers(ctx, &bi, removeHold); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, pollInterval, settleTimeout, true, func(ctx context.Context) (bool, error) {
		list := &longhornv1.BackingImageList{}
		err := env.Client.List(ctx, list, client.InNamespace(ns))
		return err == nil && len(list.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("the deleted images are not gone: %v", err)
	}
	report()
}

// TestSizeUnknown shows that no ledger is asked anything before the image's
// size is known, and that copies follow once it is.
func TestSizeUnknown(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startControllers(t, ns)
	createNodes(t, ns, testenv.NodeFixture{Name: ns + "-n0", Disks: map[string]testenv.Disk{"disk-a": disk(ns+"-d0", 10*gi)}})

	bi := newImage(ns, "image", 1)
	if err := env.Client.Create(ctx, bi); err != nil {
		t.Fatal(err)
	}
	bi = waitImage(t, ns, bi.Name, "SizeUnknown", hasCondition(metav1.ConditionFalse, longhornv1.BackingImageReasonSizeUnknown))
	if len(bi.Spec.DiskFileSpecMap) > 0 || len(bi.Status.DiskFileStatusMap) > 0 {
		t.Errorf("image of unknown size has disks: spec %v, status %v", bi.Spec.DiskFileSpecMap, bi.Status.DiskFileStatusMap)
	}
	if !slices.Contains(bi.Finalizers, longhornv1.ReplicaFinalizer) {
		t.Errorf("image has finalizers %v, want %s", bi.Finalizers, longhornv1.ReplicaFinalizer)
	}
	s, err := takeSnapshot(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, ds := range s.ledgers {
		if _, ok := ds.Spec.BackingImages[bi.Name]; ok {
			t.Errorf("ledger %s holds a request of an image of unknown size", ds.Name)
		}
	}

	// Once the size is known, the copy is requested and granted.
	if err := setSize(ctx, bi, gi); err != nil {
		t.Fatal(err)
	}
	bi = waitImage(t, ns, bi.Name, "CopiesScheduled", hasCondition(metav1.ConditionTrue, longhornv1.BackingImageReasonCopiesScheduled))
	s = waitSettled(t, ns, gi, true)
	if got := grantedDisks(s.ledgers, bi.Name, gi); !slices.Equal(got, []string{ns + "-d0"}) {
		t.Errorf("copy granted on %v, want the only disk", got)
	}
}

// TestSelectors shows that node and disk selectors restrict where copies
// go, and that an image whose selector matches too few disks is short of
// disks with the reason of every other disk.
func TestSelectors(t *testing.T) {
	ns := env.NewNamespace(t)
	startControllers(t, ns)
	// The untagged disks are the biggest: without the selectors they would be chosen first.
	createNodes(t, ns,
		testenv.NodeFixture{Name: ns + "-n0", Disks: map[string]testenv.Disk{
			"disk-a": disk(ns+"-d0", 10*gi, "ssd"), "disk-b": disk(ns+"-d1", 40*gi)}},
		testenv.NodeFixture{Name: ns + "-n1", Tags: []string{"rack-a"}, Disks: map[string]testenv.Disk{
			"disk-a": disk(ns+"-d2", 10*gi, "nvme", "ssd"), "disk-b": disk(ns+"-d3", 10*gi, "hdd"), "disk-c": disk(ns+"-d4", 40*gi)}},
	)
	const size = gi
	ssd := newImage(ns, "ssd", 2)
	ssd.Spec.DiskSelector = []string{"ssd"}
	rack := newImage(ns, "rack-a-ssd", 1)
	rack.Spec.NodeSelector = []string{"rack-a"}
	rack.Spec.DiskSelector = []string{"ssd"}
	hdd := newImage(ns, "hdd", 2)
	hdd.Spec.DiskSelector = []string{"hdd"}
	createImages(t, []*longhornv1.BackingImage{ssd, rack, hdd}, size)

	s := waitSettled(t, ns, size, false)
	want := map[string][]string{
		ssd.Name:  {ns + "-d0", ns + "-d2"},
		rack.Name: {ns + "-d2"},
		hdd.Name:  {ns + "-d3"},
	}
	for name, disks := range want {
		if got := grantedDisks(s.ledgers, name, size); !slices.Equal(got, disks) {
			t.Errorf("image %s: copies granted on %v, want %v", name, got, disks)
		}
	}
	got := waitImage(t, ns, hdd.Name, "short of disks", hasCondition(metav1.ConditionFalse, longhornv1.BackingImageReasonInsufficientDisks))
	msg := meta.FindStatusCondition(got.Status.Conditions, longhornv1.BackingImageConditionCopiesScheduled).Message
	for _, part := range []string{"2 copies of 1Gi wanted, 1 granted", "(" + ns + "-d1): tags [] do not match selector [hdd]",
		"(" + ns + "-d2): tags [nvme ssd] do not match selector [hdd]"} {
		if !strings.Contains(msg, part) {
			t.Errorf("InsufficientDisks message %q does not contain %q", msg, part)
		}
	}
	for _, bi := range []*longhornv1.BackingImage{ssd, rack} {
		waitImage(t, ns, bi.Name, "CopiesScheduled", hasCondition(metav1.ConditionTrue, longhornv1.BackingImageReasonCopiesScheduled))
	}
}

// TestRejectedCopyPlacedElsewhere asks for a copy on a disk too small for
// it: the disk's ledger rejects it, and the controller releases the request,
// removes the disk from diskFileSpecMap, records the failure with the
// ledger's numbers and places the copy on another disk.
func TestRejectedCopyPlacedElsewhere(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startControllers(t, ns)
	small, big := ns+"-small", ns+"-big"
	createNodes(t, ns, testenv.NodeFixture{Name: ns + "-n0", Disks: map[string]testenv.Disk{
		"disk-a": disk(small, 2*gi), "disk-b": disk(big, 10*gi)}})

	bi := newImage(ns, "image", 1)
	bi.Spec.DiskFileSpecMap = map[string]longhornv1.BackingImageDiskFileSpec{small: {}}
	createImages(t, []*longhornv1.BackingImage{bi}, 4*gi)

	bi = waitImage(t, ns, bi.Name, "CopiesScheduled", hasCondition(metav1.ConditionTrue, longhornv1.BackingImageReasonCopiesScheduled))
	s := waitSettled(t, ns, 4*gi, true)
	if got := keys(bi.Spec.DiskFileSpecMap); !slices.Equal(got, []string{big}) {
		t.Errorf("diskFileSpecMap %v, want only %s", got, big)
	}
	if got := grantedDisks(s.ledgers, bi.Name, 4*gi); !slices.Equal(got, []string{big}) {
		t.Errorf("copy granted on %v, want %s", got, big)
	}
	failed := bi.Status.DiskFileStatusMap[small]
	if failed.State != longhornv1.BackingImageFileFailed || !strings.Contains(failed.Message, "requested 4Gi, 2Gi free of limit 2Gi") {
		t.Errorf("copy on the small disk is %+v, want failed with the ledger's numbers", failed)
	}
	if ready := bi.Status.DiskFileStatusMap[big]; ready.State != longhornv1.BackingImageFileReady {
		t.Errorf("copy on the big disk is %+v, want ready", ready)
	}
	for _, ds := range s.ledgers {
		if _, ok := ds.Spec.BackingImages[bi.Name]; ok && ds.Name == small {
			t.Errorf("the small disk's ledger still holds the rejected request")
		}
	}
	err := wait.PollUntilContextTimeout(ctx, pollInterval, settleTimeout, true, func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == backingimage.EventReasonCopyRejected && ev.Regarding.Name == bi.Name && strings.Contains(ev.Note, small) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no %s Event for the rejected copy: %v", backingimage.EventReasonCopyRejected, err)
	}
}
