package extender

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/events"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/config"
	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/extendertls"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// controlPlane is the test API server, started by the first test that
// needs one, so the tests and fuzzers of pure functions run without it.
var controlPlane struct {
	once sync.Once
	env  *testenv.Env
	err  error
}

// apiServer returns the test API server, starting it on first use.
func apiServer(t *testing.T) *testenv.Env {
	t.Helper()
	controlPlane.once.Do(func() { controlPlane.env, controlPlane.err = testenv.Start() })
	if controlPlane.err != nil {
		t.Fatalf("starting the test control plane: %v", controlPlane.err)
	}
	return controlPlane.env
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := controlPlane.env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// fixture is one test's namespace on the test API server, with an Extender
// reading it through a cache as the manager's does. The test plays
// Longhorn (it writes Longhorn's objects as longhorn-manager v1.12 does) and
// the DiskSchedule controller (it decides reservations).
type fixture struct {
	t       *testing.T
	env     *testenv.Env
	ctx     context.Context
	ns      string
	cached  client.Client
	metrics *metrics.Extender
	ext     *Extender
	// clock is the extender's clock, which only the test moves.
	clock *clocktesting.FakeClock
	// storageClass is the test's own Longhorn StorageClass: one replica,
	// best-effort data locality.
	storageClass string
	// config keeps the extender's Store equal to the namespace's ConfigMap,
	// as the manager's config controller does; setConfig runs it.
	config *config.Reconciler
	// events records the config controller's Events.
	events *events.FakeRecorder
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

// withWatch lets the cached client, which does not watch, be intercepted.
type withWatch struct{ client.Client }

// Watch is not used by the extender.
func (withWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("the extender's client does not watch")
}

// newFixtureWith is newFixture with the extender's client wrapped by
// intercept (when not nil), to hold or count its writes.
func newFixtureWith(t *testing.T, intercept *interceptor.Funcs) *fixture {
	t.Helper()
	env := apiServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := env.NewNamespace(t)
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Register(ctx, c); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	cached, err := client.New(env.Config, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		t.Fatal(err)
	}
	var extClient client.Client = cached
	if intercept != nil {
		extClient = interceptor.NewClient(withWatch{cached}, *intercept)
	}
	m := metrics.NewExtender(prometheus.NewRegistry())
	clk := clocktesting.NewFakeClock(time.Now())
	store := config.NewStore()
	recorder := events.NewFakeRecorder(8)
	reconciler := config.NewReconciler(env.Client, recorder, store, ns, metrics.NewConfig(prometheus.NewRegistry()))
	ext := New(Options{Client: extClient, APIReader: env.Client, Informers: c, Namespace: ns, Config: store, Clock: clk,
		Metrics: m, Budget: packing.DefaultBudget})
	if err := ext.Start(ctx); err != nil {
		t.Fatalf("starting the extender: %v", err)
	}
	f := &fixture{t: t, env: env, ctx: ctx, ns: ns, cached: cached, metrics: m, ext: ext, clock: clk, storageClass: "longhorn-" + ns,
		config: reconciler, events: recorder}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: f.storageClass}, Provisioner: CSIDriver,
		Parameters: map[string]string{"numberOfReplicas": "1", "dataLocality": "best-effort"}}
	f.create(sc)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
	return f
}

// filterResult is one answer of Filter.
type filterResult struct {
	passed []string
	failed map[string]string
	err    error
}

// filterOnClock filters pod on candidates with the fixture's extender and,
// whenever the filter waits on the clock for the pods in flight, moves the
// clock by step (the pod-scheduling timeout in effect), until it answers.
func (f *fixture) filterOnClock(ctx context.Context, pod *corev1.Pod, candidates []string, step time.Duration) ([]string, map[string]string, error) {
	f.t.Helper()
	waiters := f.clock.Waiters()
	done := make(chan filterResult, 1)
	go func() {
		p, fl, err := f.ext.Filter(ctx, pod, candidates)
		done <- filterResult{p, fl, err}
	}()
	var r filterResult
	_, err := testenv.Poll(ctx, 20*time.Second, func(context.Context) (bool, string, error) {
		select {
		case r = <-done:
			return true, "", nil
		default:
		}
		if f.clock.Waiters() > waiters {
			f.clock.Step(step)
		}
		return false, "", nil
	}, testenv.Every(time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("waiting for the filter of pod %s: %w", pod.Name, err)
	}
	return r.passed, r.failed, r.err
}

// waitWaiters waits until at least n timers and tickers wait on clk.
func (f *fixture) waitWaiters(clk *clocktesting.FakeClock, n int) {
	f.t.Helper()
	_, err := testenv.Poll(f.ctx, 10*time.Second, func(context.Context) (bool, string, error) {
		return clk.Waiters() >= n, "", nil
	}, testenv.Every(time.Millisecond))
	if err != nil {
		f.t.Fatalf("waiting for %d waiters on the fake clock, %d are: %v", n, clk.Waiters(), err)
	}
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := f.env.Client.Create(f.ctx, obj); err != nil {
		f.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// node creates a Longhorn node with disks of the given sizes, as
// longhorn-manager writes it, and each disk's Ready ledger with limit = size
// and used bytes scheduled.
func (f *fixture) node(name string, sizes []int64, used []int64) {
	f.t.Helper()
	n := longhornNode(f.ns, name, sizes)
	if err := testenv.CreateLonghorn(f.ctx, f.env.Client, n); err != nil {
		f.t.Fatal(err)
	}
	for i, size := range sizes {
		disk := fmt.Sprintf("disk-%d", i+1)
		var scheduled int64
		if used != nil {
			scheduled = used[i]
		}
		ledger := readyLedger(n.Status.DiskStatus[disk].DiskUUID, disk, name, size, scheduled)
		ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: ledger.Name, Namespace: f.ns}, Spec: ledger.Spec}
		f.create(ds)
		ds.Status = ledger.Status
		ds.Status.Conditions[0].Reason, ds.Status.Conditions[0].LastTransitionTime = dsv1.DiskScheduleReasonSchedulable, metav1.Now()
		if err := f.env.Client.Status().Update(f.ctx, ds); err != nil {
			f.t.Fatalf("writing the status of DiskSchedule %s: %v", ds.Name, err)
		}
	}
}

// volume creates a best-effort Longhorn volume of size bytes with a
// stopped replica on disk-1 of each of nodes, as longhorn-manager writes
// them (volumeSize a string in JSON, the replica labelled with its volume,
// fields this project does not read filled in), and a PV and bound PVC for
// it. It returns the claim's name.
func (f *fixture) volume(name string, size int64, nodes ...string) string {
	f.t.Helper()
	return f.volumeOf(name, size, lhv1.DataLocalityBestEffort, len(nodes), nodes...)
}

// volumeOf is volume with data locality locality and numberOfReplicas
// replicas (0: Longhorn's default).
func (f *fixture) volumeOf(name string, size int64, locality lhv1.DataLocality, replicas int, nodes ...string) string {
	f.t.Helper()
	return f.volumeShaped(name, size, locality, replicas, nil, nodes...)
}

// volumeShaped is volumeOf with the Longhorn Volume changed by shape (nil:
// as it is) before it is created; a ReadWriteMany volume gets a
// ReadWriteMany PV and claim.
func (f *fixture) volumeShaped(name string, size int64, locality lhv1.DataLocality, replicas int, shape func(*lhv1.Volume), nodes ...string) string {
	f.t.Helper()
	v := testenv.Volume(f.ns, name, testenv.VolumeFixture{Size: size, Replicas: replicas, DataLocality: locality})
	if shape != nil {
		shape(v)
	}
	mode := corev1.ReadWriteOnce
	if v.Spec.AccessMode == lhv1.AccessModeReadWriteMany {
		mode = corev1.ReadWriteMany
	}
	if err := testenv.CreateLonghorn(f.ctx, f.env.Client, v); err != nil {
		f.t.Fatal(err)
	}
	for i, node := range nodes {
		r := testenv.Replica(f.ns, fmt.Sprintf("%s-r-%d", name, i), testenv.ReplicaFixture{Volume: name, Size: size,
			NodeID: node, DiskName: "disk-1", DiskID: node + "-uuid-1", State: lhv1.InstanceStateStopping})
		r.Spec.HealthyAt, r.Spec.LastHealthyAt = "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z" // it served the pod before
		if err := testenv.CreateLonghorn(f.ctx, f.env.Client, r); err != nil {
			f.t.Fatal(err)
		}
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + f.ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			AccessModes: []corev1.PersistentVolumeAccessMode{mode},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: CSIDriver, VolumeHandle: name}},
			StorageClassName: f.storageClass,
		}}
	f.create(pv)
	f.t.Cleanup(func() { _ = f.env.Client.Delete(context.Background(), pv) })
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + name, Namespace: f.ns},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &f.storageClass, VolumeName: pv.Name,
			AccessModes: []corev1.PersistentVolumeAccessMode{mode},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}}}}
	f.create(pvc)
	return pvc.Name
}

// claim creates an unbound claim of the test's Longhorn StorageClass and
// returns its name and the name the provisioner will give its volume.
func (f *fixture) claim(name string, size int64) (string, string) {
	f.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &f.storageClass,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}}}}
	f.create(pvc)
	return pvc.Name, "pvc-" + string(pvc.UID)
}

// pod creates a pod using the claims.
func (f *fixture) pod(name string, claims ...string) *corev1.Pod {
	f.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	f.create(p)
	return p
}

// setConfig writes the extender's ConfigMap and runs the config controller
// on it, as the manager does on each change; it returns the Events that
// controller recorded.
func (f *fixture) setConfig(data map[string]string) []string {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	key := types.NamespacedName{Namespace: f.ns, Name: settings.ConfigMapName}
	err := f.env.Client.Get(f.ctx, key, cm)
	switch {
	case client.IgnoreNotFound(err) != nil:
		f.t.Fatal(err)
	case err != nil:
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}, Data: data}
		err = f.env.Client.Create(f.ctx, cm)
	default:
		cm.Data = data
		err = f.env.Client.Update(f.ctx, cm)
	}
	if err != nil {
		f.t.Fatalf("writing ConfigMap %s: %v", key.Name, err)
	}
	if _, err := f.config.Reconcile(f.ctx, ctrl.Request{NamespacedName: key}); err != nil {
		f.t.Fatalf("reading ConfigMap %s: %v", key.Name, err)
	}
	var recorded []string
	for {
		select {
		case e := <-f.events.Events:
			recorded = append(recorded, e)
		default:
			return recorded
		}
	}
}

// waitCached waits until the cache holds obj at its resourceVersion.
func (f *fixture) waitCached(obj client.Object) {
	f.t.Helper()
	_, err := testenv.Poll(f.ctx, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		cur := obj.DeepCopyObject().(client.Object)
		if err := f.cached.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			return false, "", client.IgnoreNotFound(err)
		}
		return cur.GetResourceVersion() == obj.GetResourceVersion(), "", nil
	}, testenv.Every(5*time.Millisecond))
	if err != nil {
		f.t.Fatalf("the cache never saw %T %s at resourceVersion %s: %v", obj, obj.GetName(), obj.GetResourceVersion(), err)
	}
}

// longhornVersions returns the resourceVersion of every Longhorn object of
// the namespace, by kind and name.
func (f *fixture) longhornVersions() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	for _, list := range []client.ObjectList{&lhv1.NodeList{}, &lhv1.VolumeList{}, &lhv1.ReplicaList{}, &lhv1.SettingList{}} {
		if err := f.env.Client.List(f.ctx, list, client.InNamespace(f.ns)); err != nil {
			f.t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, item := range items {
			o := item.(client.Object)
			out[fmt.Sprintf("%T/%s", o, o.GetName())] = o.GetResourceVersion()
		}
	}
	return out
}

// assertLonghornUnchanged fails unless every Longhorn object still has the
// resourceVersion in before and none was added or removed.
func (f *fixture) assertLonghornUnchanged(before map[string]string) {
	f.t.Helper()
	after := f.longhornVersions()
	if len(before) == 0 {
		f.t.Fatal("no Longhorn object to compare")
	}
	for k, v := range before {
		if after[k] != v {
			f.t.Errorf("%s changed: resourceVersion %s, was %s", k, after[k], v)
		}
	}
	if len(after) != len(before) {
		f.t.Errorf("Longhorn objects were added or removed: %d before, %d after", len(before), len(after))
	}
}

// metricValue returns the value of a gauge or counter.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	out := &dto.Metric{}
	if err := m.Write(out); err != nil {
		t.Fatal(err)
	}
	switch {
	case out.Gauge != nil:
		return out.Gauge.GetValue()
	case out.Counter != nil:
		return out.Counter.GetValue()
	}
	t.Fatalf("metric %v is neither a gauge nor a counter", m.Desc())
	return 0
}

// TestFilterKeepsARestartedPodWithItsReplicas reads Longhorn volumes and
// replicas as Longhorn writes them: the node holding a replica of every
// volume of the pod is the only node returned, and scores highest.
func TestFilterKeepsARestartedPodWithItsReplicas(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		f.node(n, []int64{400 * gi}, nil)
	}
	c1 := f.volume("vol-1", 10*gi, "node-a", "node-b")
	c2 := f.volume("vol-2", 20*gi, "node-b", "node-c")
	pod := f.pod("restarted", c1, c2)
	before := f.longhornVersions()

	candidates := []string{"node-a", "node-b", "node-c"}
	_, err := testenv.Poll(f.ctx, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		passed, failed, err := f.ext.Filter(ctx, pod, candidates)
		if err != nil {
			return false, "", err
		}
		// The cache may not show every replica yet; once it does, the answer is node-b alone.
		return slices.Equal(passed, []string{"node-b"}) && len(failed) == 2 &&
			strings.Contains(failed["node-a"], "node node-b already holds a replica of every volume"), "", nil
	}, testenv.Every(10*time.Millisecond))
	if err != nil {
		passed, failed, ferr := f.ext.Filter(f.ctx, pod, candidates)
		t.Fatalf("want node-b alone, got %v, failed %v, error %v (%v)", passed, failed, ferr, err)
	}
	scores, err := f.ext.Prioritize(f.ctx, pod, candidates)
	if err != nil {
		t.Fatal(err)
	}
	if scores["node-b"] != 10 || scores["node-a"] != 0 || scores["node-c"] != 0 {
		t.Errorf("scores = %v, want node-b 10 and the others 0", scores)
	}
	f.assertLonghornUnchanged(before)
}

// TestFilterPassesPodsWithoutLonghornVolumes checks that a pod with no
// Longhorn volume passes every node untouched.
func TestFilterPassesPodsWithoutLonghornVolumes(t *testing.T) {
	f := newFixture(t)
	f.node("node-a", []int64{gi}, []int64{gi})
	pod := f.pod("plain")
	passed, failed, err := f.ext.Filter(f.ctx, pod, []string{"node-a", "elsewhere"})
	if err != nil || !slices.Equal(passed, []string{"node-a", "elsewhere"}) || len(failed) != 0 {
		t.Errorf("Filter = %v, %v, %v; want every node", passed, failed, err)
	}
}

// TestFilterPacksUnboundClaims is the seed's multi-PVC case through the API:
// four unbound 100Gi claims fit only the node with four 100Gi disks.
func TestFilterPacksUnboundClaims(t *testing.T) {
	f := newFixture(t)
	f.setConfig(map[string]string{settings.SchedulerExtenderPodSchedulingTimeout: "0"})
	var candidates []string
	for disks := 1; disks <= 4; disks++ {
		name := fmt.Sprintf("node-%d", disks)
		candidates = append(candidates, name)
		sizes := make([]int64, disks)
		for i := range sizes {
			sizes[i] = 100 * gi
		}
		f.node(name, sizes, nil)
	}
	var claims []string
	for i := range 4 {
		c, _ := f.claim(fmt.Sprintf("data-%d", i), 100*gi)
		claims = append(claims, c)
	}
	pod := f.pod("multi", claims...)
	before := f.longhornVersions()
	_, err := testenv.Poll(f.ctx, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		passed, failed, err := f.ext.Filter(ctx, pod, candidates)
		if err != nil {
			return false, "", nil // the cache may not hold every claim yet
		}
		return slices.Equal(passed, []string{"node-4"}) && len(failed) == 3 &&
			strings.Contains(failed["node-3"], "volumes need 400Gi together, disks hold 300Gi free in all"), "", nil
	}, testenv.Every(10*time.Millisecond))
	if err != nil {
		passed, failed, ferr := f.ext.Filter(f.ctx, pod, candidates)
		t.Fatalf("want node-4 alone, got %v, failed %v, error %v", passed, failed, ferr)
	}
	f.ext.flight.mu.Lock()
	inFlight := f.ext.flight.overlay.len()
	f.ext.flight.mu.Unlock()
	if inFlight != 0 {
		t.Errorf("pod-scheduling-timeout 0 in the ConfigMap: no pod may be tracked in flight, %d are", inFlight)
	}
	f.assertLonghornUnchanged(before)
}

// TestInFlightPodIsReservedOnItsNode follows the in-flight overlay: while
// the first pod's node is not known its 60Gi count on the node, so the
// second pod, which the ledger alone would let through, waits; once the
// first pod is bound the extender writes its reservation on that node's
// ledger with one write and no wait for the decision, and the second filter
// goes on only once the cache shows the reservation, failing with the
// numbers (a pending reservation counts as taken).
func TestInFlightPodIsReservedOnItsNode(t *testing.T) {
	f := newFixture(t)
	ext, m, clk := f.ext, f.metrics, f.clock
	waiters := clk.Waiters() // the sweep's ticker
	f.node("node-a", []int64{100 * gi}, nil)
	claimA, volA := f.claim("data-a", 60*gi)
	claimB, _ := f.claim("data-b", 60*gi)
	podA, podB := f.pod("a", claimA), f.pod("b", claimB)
	before := f.longhornVersions()
	var passed []string
	_, err := testenv.Poll(f.ctx, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		var err error
		passed, _, err = ext.Filter(ctx, podA, []string{"node-a"})
		return err == nil, "", nil // the cache may not hold the claim yet
	}, testenv.Every(10*time.Millisecond))
	if err != nil || !slices.Equal(passed, []string{"node-a"}) {
		t.Fatalf("pod a: want node-a, got %v (%v)", passed, err)
	}
	if got := metricValue(t, m.InFlight); got != 1 {
		t.Errorf("pods in flight = %v, want 1", got)
	}

	type result struct {
		passed []string
		failed map[string]string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		p, fl, err := ext.Filter(f.ctx, podB, []string{"node-a"})
		done <- result{p, fl, err}
	}()
	// The fake clock never moves: pod b's filter, once it waits on its
	// timer, can return only when the pods in flight change.
	f.waitWaiters(clk, waiters+1)
	select {
	case r := <-done:
		t.Fatalf("pod b's filter returned while pod a's 60Gi were in flight: %+v", r)
	default:
	}

	// kube-scheduler binds pod a to node-a.
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: podA.Name, Namespace: f.ns},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}}
	if err := f.env.Client.SubResource("binding").Create(f.ctx, podA, binding); err != nil {
		t.Fatalf("binding pod a: %v", err)
	}

	// It returns once the view shows pod a's reservation: its own wait
	// (scheduler-extender-pod-scheduling-timeout) cannot run out on a
	// clock that does not move.
	var r result
	select {
	case r = <-done:
	case <-f.ctx.Done():
		t.Fatal("the test ended before pod b's filter returned")
	case <-time.After(30 * time.Second):
		t.Fatal("pod b's filter never returned after pod a was bound")
	}
	if r.err != nil {
		t.Fatalf("pod b's filter: %v", r.err)
	}
	// The filter went on only once the cache showed the reservation, so the
	// API server has it.
	ds := &dsv1.DiskSchedule{}
	if err := f.env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "node-a-uuid-1"}, ds); err != nil {
		t.Fatal(err)
	}
	if res := ds.Spec.Reservations[volA]; res.Size != 60*gi || res.Pod != f.ns+"/a" {
		t.Fatalf("reservation of %s = %+v, want 60Gi for %s/a", volA, res, f.ns)
	}
	if len(r.passed) != 0 || !strings.Contains(r.failed["node-a"], "40Gi") {
		t.Errorf("pod b: node-a has 40Gi left after pod a's 60Gi, want it failed with the numbers; got %v, %v", r.passed, r.failed)
	}
	if got := metricValue(t, m.InFlight); got != 0 {
		t.Errorf("pods in flight = %v after pod a's reservation showed, want 0", got)
	}
	f.assertLonghornUnchanged(before)
}

// TestServerFollowsTheConfigMap checks that the extender serves by default
// (no ConfigMap), stops when scheduler-extender-enabled is false, keeps the
// previous value over an invalid one, and serves again when it is true; and
// that it points its Service's EndpointSlice at itself.
func TestServerFollowsTheConfigMap(t *testing.T) {
	f := newFixture(t)
	clk := clocktesting.NewFakeClock(time.Now())
	opts := f.ext.opts
	opts.Clock = clk
	certs, err := extendertls.Write(t.TempDir(), ServiceDNSName(f.ns))
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(New(opts), ServerOptions{Addr: "127.0.0.1:0", AdvertiseIP: "10.1.2.3", NodeName: "manager-0",
		CertDir: certs.CertDir, ClientCAFile: certs.CAFile})
	ctx, cancel := context.WithCancel(f.ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	heartbeat := f.metrics.Heartbeat.WithLabelValues("manager-0")
	// waitServing moves the clock a poll at a time, so the server reads
	// the settings again, until it serves or not as wanted.
	waitServing := func(want bool) {
		t.Helper()
		_, err := testenv.Poll(f.ctx, 10*time.Second, func(context.Context) (bool, string, error) {
			if (metricValue(t, heartbeat) == 1) == want {
				return true, "", nil
			}
			clk.Step(s.poll)
			return false, "", nil
		}, testenv.Every(5*time.Millisecond))
		if err != nil {
			t.Fatalf("serving should be %v, heartbeat %v", want, metricValue(t, heartbeat))
		}
	}

	waitServing(true)
	es := &discoveryv1.EndpointSlice{}
	_, err = testenv.Poll(f.ctx, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		err := f.env.Client.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: ServiceName}, es)
		return err == nil, "", client.IgnoreNotFound(err)
	}, testenv.Every(5*time.Millisecond))
	if err != nil {
		t.Fatalf("the extender never published its EndpointSlice: %v", err)
	}
	if es.Labels[discoveryv1.LabelServiceName] != ServiceName || len(es.Endpoints) != 1 ||
		!slices.Equal(es.Endpoints[0].Addresses, []string{"10.1.2.3"}) || len(es.Ports) != 1 || *es.Ports[0].Port != Port || *es.Ports[0].Name != PortName {
		t.Errorf("EndpointSlice %+v does not point at 10.1.2.3:%d", es, Port)
	}

	f.setConfig(map[string]string{settings.SchedulerExtenderEnabled: "false"})
	waitServing(false)

	recorded := f.setConfig(map[string]string{settings.SchedulerExtenderEnabled: "maybe"})
	if on, err := s.enabled(f.ctx); err != nil || on {
		t.Errorf("an invalid value must keep the previous false, got %v, %v", on, err)
	}
	if !slices.ContainsFunc(recorded, func(e string) bool {
		return strings.HasPrefix(e, corev1.EventTypeWarning+" "+config.ReasonInvalidSetting+" ")
	}) {
		t.Errorf("an invalid value must record a Warning %s Event, recorded %q", config.ReasonInvalidSetting, recorded)
	}

	f.setConfig(map[string]string{settings.SchedulerExtenderEnabled: "true"})
	waitServing(true)
}

// TestBindWritesTheReservationThenBinds is kube-scheduler's bindVerb path:
// the reservation is in the ledger before the pod is bound, and a pod whose
// space the ledger no longer has is not bound and gets the numbers.
func TestBindWritesTheReservationThenBinds(t *testing.T) {
	f := newFixture(t)
	f.node("node-a", []int64{100 * gi}, nil)
	claimA, volA := f.claim("data-a", 60*gi)
	claimB, volB := f.claim("data-b", 30*gi)
	podA, podB := f.pod("a", claimA), f.pod("b", claimB)
	before := f.longhornVersions()
	for _, pod := range []*corev1.Pod{podA, podB} {
		_, err := testenv.Poll(f.ctx, 10*time.Second, func(ctx context.Context) (bool, string, error) {
			passed, _, err := f.ext.Filter(ctx, pod, []string{"node-a"})
			return err == nil && slices.Equal(passed, []string{"node-a"}), "", nil
		}, testenv.Every(10*time.Millisecond))
		if err != nil {
			t.Fatalf("pod %s: want node-a to pass: %v", pod.Name, err)
		}
	}

	if err := f.ext.Bind(f.ctx, &extenderv1.ExtenderBindingArgs{PodName: "a", PodNamespace: f.ns, PodUID: podA.UID, Node: "node-a"}); err != nil {
		t.Fatalf("binding pod a: %v", err)
	}
	ds := &dsv1.DiskSchedule{}
	key := types.NamespacedName{Namespace: f.ns, Name: "node-a-uuid-1"}
	if err := f.env.Client.Get(f.ctx, key, ds); err != nil {
		t.Fatal(err)
	}
	if res := ds.Spec.Reservations[volA]; res.Size != 60*gi || res.Pod != f.ns+"/a" {
		t.Fatalf("after bind, reservation of %s = %+v, want 60Gi for pod a", volA, res)
	}
	bound := &corev1.Pod{}
	if err := f.env.Client.Get(f.ctx, client.ObjectKeyFromObject(podA), bound); err != nil || bound.Spec.NodeName != "node-a" {
		t.Fatalf("pod a is not bound to node-a: %q, %v", bound.Spec.NodeName, err)
	}

	// Something else takes the rest of the disk before pod b binds: the
	// ledger grants 30Gi more, leaving 10Gi.
	ds.Status.StorageScheduled += 30 * gi
	if err := f.env.Client.Status().Update(f.ctx, ds); err != nil {
		t.Fatal(err)
	}
	f.waitCached(ds)
	f.waitViewed(ds)
	err := f.ext.Bind(f.ctx, &extenderv1.ExtenderBindingArgs{PodName: "b", PodNamespace: f.ns, PodUID: podB.UID, Node: "node-a"})
	if err == nil || !strings.Contains(err.Error(), "30Gi") || !strings.Contains(err.Error(), "10Gi free") {
		t.Fatalf("binding pod b must fail with the numbers (needs 30Gi, 10Gi free), got %v", err)
	}
	if err := f.env.Client.Get(f.ctx, client.ObjectKeyFromObject(podB), bound); err != nil || bound.Spec.NodeName != "" {
		t.Fatalf("pod b must stay unbound, is on %q (%v)", bound.Spec.NodeName, err)
	}
	if err := f.env.Client.Get(f.ctx, key, ds); err != nil {
		t.Fatal(err)
	}
	if _, ok := ds.Spec.Reservations[volB]; ok {
		t.Errorf("a refused reservation must not be written: %+v", ds.Spec.Reservations)
	}
	if got := metricValue(t, f.metrics.Reservations.WithLabelValues("refused")); got != 1 {
		t.Errorf("refused reservations = %v, want 1", got)
	}
	f.assertLonghornUnchanged(before)
}

// TestNewLeaderFencesThenRebuilds takes over from a previous leader (the
// Lease records a transition): filters are refused for the fence and the
// metric shows it; then the pod the old leader let through, bound but
// without a reservation, is reserved on its node.
func TestNewLeaderFencesThenRebuilds(t *testing.T) {
	f := newFixture(t)
	f.node("node-a", []int64{100 * gi}, nil)
	claimA, volA := f.claim("data-a", 60*gi)
	podA := f.pod("a", claimA)
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: podA.Name, Namespace: f.ns},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}}
	if err := f.env.Client.SubResource("binding").Create(f.ctx, podA, binding); err != nil {
		t.Fatalf("binding pod a: %v", err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader", Namespace: f.ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("new"), LeaseTransitions: ptr.To(int32(1)),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}}}
	f.create(lease)
	// The fixture's extender was never leader; this one takes over, on a
	// clock the test moves.
	clk := clocktesting.NewFakeClock(time.Now())
	opts := f.ext.opts
	opts.Clock, opts.Metrics = clk, metrics.NewExtender(prometheus.NewRegistry())
	opts.Fence, opts.Lease = 2*time.Second, client.ObjectKeyFromObject(lease)
	ext := New(opts)
	if err := ext.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	// The sweep's ticker and the fence's timer.
	f.waitWaiters(clk, 2)
	if _, _, err := ext.Filter(f.ctx, f.pod("b"), []string{"node-a"}); err == nil || !strings.Contains(err.Error(), "took over") {
		t.Errorf("a filter during the fence must be refused, got %v", err)
	}
	if metricValue(t, opts.Metrics.Fenced) != 1 || metricValue(t, opts.Metrics.FencedFilters) != 1 {
		t.Errorf("fenced = %v, fenced filters = %v, want 1 and 1", metricValue(t, opts.Metrics.Fenced), metricValue(t, opts.Metrics.FencedFilters))
	}
	clk.Step(opts.Fence)
	key := types.NamespacedName{Namespace: f.ns, Name: "node-a-uuid-1"}
	_, err := testenv.Poll(f.ctx, 20*time.Second, func(ctx context.Context) (bool, string, error) {
		ds := &dsv1.DiskSchedule{}
		if err := f.env.Client.Get(ctx, key, ds); err != nil {
			return false, "", err
		}
		res, ok := ds.Spec.Reservations[volA]
		return ok && res.Pod == f.ns+"/a" && res.Size == 60*gi && metricValue(t, opts.Metrics.Fenced) == 0, "", nil
	}, testenv.Every(20*time.Millisecond))
	if err != nil {
		t.Fatalf("after the fence the old leader's pod a must be reserved on node-a and the fence lifted: %v", err)
	}
	if _, _, err := ext.Filter(f.ctx, f.pod("c"), []string{"node-a"}); err != nil {
		t.Errorf("after the fence filters are answered, got %v", err)
	}
}

// waitViewed waits until the extender's view holds ledger ds at its resourceVersion.
func (f *fixture) waitViewed(ds *dsv1.DiskSchedule) {
	f.t.Helper()
	_, err := testenv.Poll(f.ctx, 10*time.Second, func(context.Context) (bool, string, error) {
		f.ext.flight.mu.Lock()
		defer f.ext.flight.mu.Unlock()
		cur := f.ext.flight.view.ledger(ds.Name)
		return cur != nil && cur.ResourceVersion == ds.ResourceVersion, "", nil
	}, testenv.Every(5*time.Millisecond))
	if err != nil {
		f.t.Fatalf("the extender never saw DiskSchedule %s at resourceVersion %s", ds.Name, ds.ResourceVersion)
	}
}

// TestExpiredReservationOfABoundPodIsWrittenAgain: a pod bound to its node
// whose volume waits for Longhorn to attach it and place its replica keeps
// its space: when its reservation expires (the ledger holds a bound pod's
// reservation, so this happens only when the pod bound after the decision
// that expired it), the extender counts it in flight at once, removes the
// spent entry and, once the ledger has dropped its decision, reserves again.
func TestExpiredReservationOfABoundPodIsWrittenAgain(t *testing.T) {
	f := newFixture(t)
	f.node("node-a", []int64{100 * gi}, nil)
	claimA, volA := f.claim("data-a", 60*gi)
	podA := f.pod("a", claimA)
	f.filterAndBind(podA, "node-a")
	if err := f.env.Client.Get(f.ctx, client.ObjectKeyFromObject(podA), podA); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: f.ns, Name: "node-a-uuid-1"}
	ledgerWhere := func(what string, cond func(*dsv1.DiskSchedule) bool) *dsv1.DiskSchedule {
		t.Helper()
		return f.ledgerWhere(key, what, cond)
	}
	reserved := func(ds *dsv1.DiskSchedule) bool {
		res, ok := ds.Spec.Reservations[volA]
		return ok && res.Pod == f.ns+"/a" && res.Size == 60*gi
	}
	ds := ledgerWhere("pod a's reservation is written", reserved)

	// The ledger (played by the test) lets it expire: no replica came.
	ds.Status.Reservations = map[string]dsv1.ReservationStatus{volA: {State: dsv1.ReservationStateExpired,
		RequestedSize: 60 * gi, Pod: f.ns + "/a", Message: "expired"}}
	if err := f.env.Client.Status().Update(f.ctx, ds); err != nil {
		t.Fatal(err)
	}
	ds = ledgerWhere("the extender removes the spent reservation", func(ds *dsv1.DiskSchedule) bool { return !reserved(ds) })
	// Meanwhile the space stays taken for other pods.
	claimB, _ := f.claim("data-b", 60*gi)
	podB := f.pod("b", claimB)
	_, err := testenv.Poll(f.ctx, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		_, failed, err := f.filterOnClock(ctx, podB, []string{"node-a"}, settings.Default().PodSchedulingTimeout)
		return err == nil && strings.Contains(failed["node-a"], "40Gi"), "", nil
	}, testenv.Every(10*time.Millisecond))
	if err != nil {
		t.Errorf("while pod a's reservation is written again, node-a must keep only 40Gi for pod b: %v", err)
	}
	// The ledger drops its decision on the removed entry (rule 4).
	ds.Status.Reservations = nil
	if err := f.env.Client.Status().Update(f.ctx, ds); err != nil {
		t.Fatal(err)
	}
	ledgerWhere("pod a is reserved again", reserved)
}

// TestReservationThatExpiredBeforeItsPodBoundIsWrittenAgain is
// kube-scheduler's volume binding outlasting the node-reservation timeout
// (a slow CreateVolume): pod a's reservation expired before the pod was
// bound, and the ledger shows no change when it binds. The binding holds
// the space again and the reservation is written again.
func TestReservationThatExpiredBeforeItsPodBoundIsWrittenAgain(t *testing.T) {
	f := newFixture(t)
	f.node("node-a", []int64{100 * gi}, nil)
	claimA, volA := f.claim("data-a", 60*gi)
	podA := f.pod("a", claimA)
	key := types.NamespacedName{Namespace: f.ns, Name: "node-a-uuid-1"}
	reserved := func(ds *dsv1.DiskSchedule) bool {
		res, ok := ds.Spec.Reservations[volA]
		return ok && res.Pod == f.ns+"/a" && res.Size == 60*gi
	}
	// The ledger as the extender and the DiskSchedule controller (played
	// by the test) left it: pod a's reservation, expired while it was not
	// bound.
	ds := f.ledgerWhere(key, "node-a's ledger exists", func(*dsv1.DiskSchedule) bool { return true })
	ds.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{volA: {Size: 60 * gi, Pod: f.ns + "/a"}}
	if err := f.env.Client.Update(f.ctx, ds); err != nil {
		t.Fatal(err)
	}
	ds.Status.Reservations = map[string]dsv1.ReservationStatus{volA: {State: dsv1.ReservationStateExpired,
		RequestedSize: 60 * gi, Pod: f.ns + "/a", Message: "expired"}}
	if err := f.env.Client.Status().Update(f.ctx, ds); err != nil {
		t.Fatal(err)
	}
	f.waitViewed(ds)

	f.bind(podA, "node-a")
	ds = f.ledgerWhere(key, "the extender removes the spent reservation", func(ds *dsv1.DiskSchedule) bool { return !reserved(ds) })
	claimB, _ := f.claim("data-b", 60*gi)
	podB := f.pod("b", claimB)
	_, err := testenv.Poll(f.ctx, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		_, failed, err := f.filterOnClock(ctx, podB, []string{"node-a"}, settings.Default().PodSchedulingTimeout)
		return err == nil && strings.Contains(failed["node-a"], "40Gi"), failed["node-a"], nil
	}, testenv.Every(10*time.Millisecond))
	if err != nil {
		t.Errorf("once pod a is bound, node-a must keep only 40Gi for pod b: %v", err)
	}
	// The ledger drops its decision on the removed entry (rule 4).
	ds.Status.Reservations = nil
	if err := f.env.Client.Status().Update(f.ctx, ds); err != nil {
		t.Fatal(err)
	}
	f.ledgerWhere(key, "pod a is reserved again", reserved)
}

// filterAndBind filters pod until node passes, then binds it there.
func (f *fixture) filterAndBind(pod *corev1.Pod, node string) {
	f.t.Helper()
	f.passes(pod, node)
	f.bind(pod, node)
}

// passes filters pod with node as the only candidate until node passes.
func (f *fixture) passes(pod *corev1.Pod, node string) {
	f.t.Helper()
	f.filterUntil(pod, []string{node}, "pod "+pod.Name+" fits "+node, func(passed []string, _ map[string]string) bool {
		return slices.Equal(passed, []string{node})
	})
}

// bind binds pod to node, as kube-scheduler does.
func (f *fixture) bind(pod *corev1.Pod, node string) {
	f.t.Helper()
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: f.ns},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := f.env.Client.SubResource("binding").Create(f.ctx, pod, binding); err != nil {
		f.t.Fatalf("binding pod %s: %v", pod.Name, err)
	}
}

// reservationWritten waits until the ledger key holds pod's reservation of
// volume at size.
func (f *fixture) reservationWritten(key types.NamespacedName, volume, pod string, size int64) {
	f.t.Helper()
	f.ledgerWhere(key, "pod "+pod+"'s reservation of "+volume+" is written", func(ds *dsv1.DiskSchedule) bool {
		res, ok := ds.Spec.Reservations[volume]
		return ok && res.Pod == f.ns+"/"+pod && res.Size == size
	})
}

// ledgerWhere waits until the DiskSchedule key, read from the API server,
// satisfies cond, and returns it.
func (f *fixture) ledgerWhere(key types.NamespacedName, what string, cond func(*dsv1.DiskSchedule) bool) *dsv1.DiskSchedule {
	f.t.Helper()
	ds := &dsv1.DiskSchedule{}
	_, err := testenv.Poll(f.ctx, 20*time.Second, func(ctx context.Context) (bool, string, error) {
		if err := f.env.Client.Get(ctx, key, ds); err != nil {
			return false, "", err
		}
		return cond(ds), "", nil
	}, testenv.Every(10*time.Millisecond))
	if err != nil {
		f.t.Fatalf("waiting until %s: %v (spec %+v, status %+v)", what, err, ds.Spec.Reservations, ds.Status.Reservations)
	}
	return ds
}

// TestBoundPodKeepsItsClaimWhenItsSpaceWasTaken is the window between a
// pod's filter and its reservation: Longhorn placed another volume's replica
// on the disk meanwhile, so the ledger has no room left for the pod, which
// is bound to the node all the same. Its claim stays counted, so no other pod
// is let onto the space it waits for, and its reservation is written once the
// ledger shows room again.
func TestBoundPodKeepsItsClaimWhenItsSpaceWasTaken(t *testing.T) {
	f := newFixture(t)
	f.setConfig(map[string]string{settings.SchedulerExtenderPodSchedulingTimeout: "1"})
	f.node("node-a", []int64{100 * gi}, nil)
	claimA, volA := f.claim("data-a", 60*gi)
	claimC, _ := f.claim("data-c", 30*gi)
	podA, podC := f.pod("a", claimA), f.pod("c", claimC)
	f.passes(podA, "node-a")

	// Another volume's replica takes 60Gi before pod a binds: 40Gi are left.
	key := types.NamespacedName{Namespace: f.ns, Name: "node-a-uuid-1"}
	ds := &dsv1.DiskSchedule{}
	if err := f.env.Client.Get(f.ctx, key, ds); err != nil {
		t.Fatal(err)
	}
	ds.Status.StorageScheduled += 60 * gi
	if err := f.env.Client.Status().Update(f.ctx, ds); err != nil {
		t.Fatal(err)
	}
	f.waitCached(ds)
	f.waitViewed(ds)
	f.bind(podA, "node-a")
	refused := f.metrics.Reservations.WithLabelValues("refused")
	if _, err := testenv.Poll(f.ctx, 10*time.Second, func(context.Context) (bool, string, error) {
		return metricValue(t, refused) >= 1, "", nil
	}, testenv.Every(10*time.Millisecond)); err != nil {
		t.Fatalf("pod a's reservation was never refused: %v", err)
	}

	// 40Gi free in the ledger would take pod c's 30Gi, but pod a still
	// claims its 60Gi there.
	passed, failed, err := f.filterOnClock(f.ctx, podC, []string{"node-a"}, time.Second)
	if err != nil || len(passed) != 0 {
		t.Fatalf("pod c must not get the space pod a waits for: passed %v, failed %v, %v", passed, failed, err)
	}

	// The other replica goes: pod a's reservation is written.
	if err := f.env.Client.Get(f.ctx, key, ds); err != nil {
		t.Fatal(err)
	}
	ds.Status.StorageScheduled -= 60 * gi
	if err := f.env.Client.Status().Update(f.ctx, ds); err != nil {
		t.Fatal(err)
	}
	f.reservationWritten(key, volA, "a", 60*gi)
	if got := metricValue(t, refused); got != 1 {
		t.Errorf("refused reservations = %v, want 1 (one pod's volume, however often it was tried)", got)
	}
}

// TestAFailureWrittenLateDoesNotEndTheClaim: kube-scheduler writes a failed
// cycle's PodScheduled=False condition asynchronously, so it can arrive
// after the filter of the pod's next cycle, which goes on to bind the pod.
// The pod's claim stays counted and its reservation is written when it binds.
func TestAFailureWrittenLateDoesNotEndTheClaim(t *testing.T) {
	f := newFixture(t)
	f.setConfig(map[string]string{settings.SchedulerExtenderPodSchedulingTimeout: "1"})
	f.node("node-a", []int64{100 * gi}, nil)
	claimA, volA := f.claim("data-a", 60*gi)
	claimC, _ := f.claim("data-c", 60*gi)
	podA, podC := f.pod("a", claimA), f.pod("c", claimC)
	f.passes(podA, "node-a")

	// The condition of an earlier cycle of pod a lands now.
	failed := podA.DeepCopy()
	failed.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: `0/1 nodes are available: persistentvolumeclaim "data-a" not found.`,
		LastTransitionTime: metav1.Now()}}
	if err := f.env.Client.Status().Update(f.ctx, failed); err != nil {
		t.Fatal(err)
	}
	f.waitCached(failed)
	if passed, why, err := f.filterOnClock(f.ctx, podC, []string{"node-a"}, time.Second); err != nil || len(passed) != 0 {
		t.Fatalf("pod c must not get the space pod a holds: passed %v, failed %v, %v", passed, why, err)
	}

	f.bind(failed, "node-a")
	f.reservationWritten(types.NamespacedName{Namespace: f.ns, Name: "node-a-uuid-1"}, volA, "a", 60*gi)
}
