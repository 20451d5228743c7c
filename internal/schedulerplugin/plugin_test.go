package schedulerplugin_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/schedulerplugin"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const gi = int64(1) << 30

// controlPlane is the test API server, started by the first test that
// needs one.
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
	if controlPlane.env != nil {
		if err := controlPlane.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// fixture is one test's namespace on the test API server, playing
// Longhorn's namespace: the manager decides its ledgers (one per disk of
// the Longhorn Nodes the test writes, as longhorn-manager v1.12 writes
// them), and a plugin reads it through its own cache, as kube-scheduler
// runs it.
type fixture struct {
	t      *testing.T
	env    *testenv.Env
	ctx    context.Context
	ns     string
	plugin *schedulerplugin.Plugin
	// storageClass is the test's Longhorn StorageClass: one replica,
	// best-effort data locality, so a pod's volume needs its space on the
	// pod's node.
	storageClass string
	// nodes are the test's Kubernetes nodes, by name.
	nodes map[string]*corev1.Node
}

// newFixture starts the manager and the plugin on a namespace of its own
// with a Longhorn node of one disk of each size in disks (GiB), named
// <namespace>-<i>, and waits for their ledgers.
func newFixture(t *testing.T, disks ...int64) *fixture {
	t.Helper()
	env := apiServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := env.NewNamespace(t)
	// A reservation whose pod is not bound expires after
	// scheduler-extender-node-reservation-timeout: longer than a test.
	f0 := &fixture{t: t, env: env, ctx: ctx}
	f0.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: settings.ConfigMapName},
		Data: map[string]string{settings.SchedulerExtenderNodeReservationTimeout: "600"}})
	m, err := managertest.Start(env, env.Config, manager.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	f := &fixture{t: t, env: env, ctx: ctx, ns: ns, storageClass: "longhorn-" + ns, nodes: map[string]*corev1.Node{}}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: f.storageClass}, Provisioner: extender.CSIDriver,
		Parameters: map[string]string{"numberOfReplicas": "1", "dataLocality": "best-effort"}}
	f.create(sc)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
	for i, size := range disks {
		node := testenv.NodeFixture{Name: fmt.Sprintf("%s-%d", ns, i), Disks: map[string]testenv.Disk{
			"disk-1": {UUID: fmt.Sprintf("%s-%d-uuid", ns, i), Size: size * gi}}}
		if err := node.CreateNode(ctx, env.Client, ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node.KubeNode()) })
		kn := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: node.Name}, kn); err != nil {
			t.Fatal(err)
		}
		f.nodes[node.Name] = kn
		testenv.WaitLedger(t, ctx, env.Client, ns, node.Disks["disk-1"].UUID, 20*time.Second, "its limit",
			func(ds *dsv1.DiskSchedule) bool { return ds.Status.StorageLimit == size*gi })
	}
	f.plugin, err = schedulerplugin.New(ctx, env.Config, schedulerplugin.Options{Namespace: ns, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatalf("starting the plugin: %v", err)
	}
	return f
}

// node returns the name of the test's i-th node.
func (f *fixture) node(i int) string { return fmt.Sprintf("%s-%d", f.ns, i) }

// uuid returns the disk UUID of the test's i-th node.
func (f *fixture) uuid(i int) string { return fmt.Sprintf("%s-%d-uuid", f.ns, i) }

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := f.env.Client.Create(f.ctx, obj); err != nil {
		f.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// pod creates a pod with an unbound claim of size bytes of the test's
// Longhorn StorageClass, as a StatefulSet's pod waits for its volume.
func (f *fixture) pod(name string, size int64) *corev1.Pod {
	f.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name, Namespace: f.ns},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &f.storageClass,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}}}}
	f.create(pvc)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}}}
	f.create(p)
	f.waitEvaluated(p)
	return p
}

// waitEvaluated waits until the plugin evaluates pod: it reads through
// its own cache, which follows the API server, and skips the pod until it
// sees its claim.
func (f *fixture) waitEvaluated(pod *corev1.Pod) {
	f.t.Helper()
	testenv.Eventually(f.t, f.ctx, 10*time.Second, "the plugin evaluates pod "+pod.Name, func(ctx context.Context) (bool, string, error) {
		_, st := f.plugin.PreFilter(ctx, framework.NewCycleState(), pod, f.nodeInfos())
		return !st.IsSkip(), st.Message(), nil
	}, testenv.Every(10*time.Millisecond))
}

// nodeInfos returns the test's nodes as kube-scheduler hands them to
// PreFilter.
func (f *fixture) nodeInfos() []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for i := range len(f.nodes) {
		ni := framework.NewNodeInfo()
		ni.SetNode(f.nodes[f.node(i)])
		out = append(out, ni)
	}
	return out
}

// cycle is one scheduling cycle of a pod through the plugin's extension
// points, as kube-scheduler's framework runs them.
type cycle struct {
	f     *fixture
	pod   *corev1.Pod
	state fwk.CycleState
}

// preFilter starts a cycle of pod and runs PreFilter on every node.
func (f *fixture) preFilter(pod *corev1.Pod) (*cycle, *fwk.PreFilterResult) {
	f.t.Helper()
	c := &cycle{f: f, pod: pod, state: framework.NewCycleState()}
	res, st := f.plugin.PreFilter(f.ctx, c.state, pod, f.nodeInfos())
	if !st.IsSuccess() {
		f.t.Fatalf("PreFilter of pod %s: %v", pod.Name, st.AsError())
	}
	return c, res
}

// filter returns Filter's status on every node, by name.
func (c *cycle) filter() map[string]*fwk.Status {
	out := map[string]*fwk.Status{}
	for _, ni := range c.f.nodeInfos() {
		out[ni.Node().Name] = c.f.plugin.Filter(c.f.ctx, c.state, c.pod, ni)
	}
	return out
}

// scores runs PreScore and Score on every node and returns the scores.
func (c *cycle) scores() map[string]int64 {
	c.f.t.Helper()
	nodes := c.f.nodeInfos()
	if st := c.f.plugin.PreScore(c.f.ctx, c.state, c.pod, nodes); !st.IsSuccess() {
		c.f.t.Fatalf("PreScore of pod %s: %v", c.pod.Name, st.AsError())
	}
	out := map[string]int64{}
	for _, ni := range nodes {
		s, st := c.f.plugin.Score(c.f.ctx, c.state, c.pod, ni)
		if !st.IsSuccess() {
			c.f.t.Fatalf("Score of pod %s on %s: %v", c.pod.Name, ni.Node().Name, st.AsError())
		}
		out[ni.Node().Name] = s
	}
	return out
}

// reserve runs Reserve on node and fails the test unless it succeeds.
func (c *cycle) reserve(node string) {
	c.f.t.Helper()
	if st := c.f.plugin.Reserve(c.f.ctx, c.state, c.pod, node); !st.IsSuccess() {
		c.f.t.Fatalf("Reserve of pod %s on %s: %v", c.pod.Name, node, st.AsError())
	}
}

// preBind runs PreBindPreFlight and PreBind on node.
func (c *cycle) preBind(node string) *fwk.Status {
	c.f.t.Helper()
	if _, st := c.f.plugin.PreBindPreFlight(c.f.ctx, c.state, c.pod, node); !st.IsSuccess() {
		c.f.t.Fatalf("PreBindPreFlight of pod %s on %s: %v", c.pod.Name, node, st)
	}
	return c.f.plugin.PreBind(c.f.ctx, c.state, c.pod, node)
}

// TestFilter holds PreFilter and Filter to the extender's filter: a node
// whose disk cannot hold the pod's volume is unschedulable with the
// numbers, one that can passes, and a pod without a Longhorn volume is not
// the plugin's business.
func TestFilter(t *testing.T) {
	f := newFixture(t, 50, 200)
	pod := f.pod("app", 100*gi)
	c, res := f.preFilter(pod)
	if res != nil {
		t.Errorf("PreFilter narrowed a new pod to %v", res.NodeNames)
	}
	got := c.filter()
	if st := got[f.node(0)]; st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "100Gi") || !strings.Contains(st.Message(), "50Gi") {
		t.Errorf("Filter on the 50Gi node: %v %q, want Unschedulable with the numbers (100Gi needed, 50Gi there)", st.Code(), st.Message())
	}
	if st := got[f.node(1)]; !st.IsSuccess() {
		t.Errorf("Filter on the 200Gi node: %v %q, want Success", st.Code(), st.Message())
	}

	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: f.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	f.create(plain)
	if _, st := f.plugin.PreFilter(f.ctx, framework.NewCycleState(), plain, f.nodeInfos()); !st.IsSkip() {
		t.Errorf("PreFilter of a pod without Longhorn volumes: %v, want Skip", st)
	}
}

// TestScore holds Score to the extender's prioritize: the node with the
// most space left after the pod's volume scores highest, on
// kube-scheduler's 0–100 scale.
func TestScore(t *testing.T) {
	f := newFixture(t, 150, 400)
	c, _ := f.preFilter(f.pod("app", 100*gi))
	scores := c.scores()
	small, big := scores[f.node(0)], scores[f.node(1)]
	if big <= small || big > fwk.MaxNodeScore || small <= 0 {
		t.Errorf("scores %v: want the 400Gi node above the 150Gi node, both in (0, %d]", scores, fwk.MaxNodeScore)
	}
}

// TestReserveHoldsSpaceUntilUnreserve: the space Reserve holds counts in
// the next pod's cycle, before anything is written to the ledger, and
// Unreserve gives it back.
func TestReserveHoldsSpaceUntilUnreserve(t *testing.T) {
	f := newFixture(t, 150)
	first, second := f.pod("first", 100*gi), f.pod("second", 100*gi)
	c1, _ := f.preFilter(first)
	c1.reserve(f.node(0))

	c2, _ := f.preFilter(second)
	if st := c2.filter()[f.node(0)]; st.Code() != fwk.Unschedulable {
		t.Errorf("Filter of the second pod while the first holds 100Gi of 150Gi: %v %q, want Unschedulable", st.Code(), st.Message())
	}
	f.plugin.Unreserve(f.ctx, c1.state, first, f.node(0))
	c2, _ = f.preFilter(second)
	if st := c2.filter()[f.node(0)]; !st.IsSuccess() {
		t.Errorf("Filter of the second pod once the first was unreserved: %v %q, want Success", st.Code(), st.Message())
	}
}

// TestPreBindWritesTheDecidedReservation: PreBind writes the pod's
// reservation into the chosen disk's ledger and returns once the ledger
// granted it; the next pod's cycle sees the space taken in the ledger.
func TestPreBindWritesTheDecidedReservation(t *testing.T) {
	f := newFixture(t, 150)
	pod := f.pod("app", 100*gi)
	c, _ := f.preFilter(pod)
	c.reserve(f.node(0))
	if st := c.preBind(f.node(0)); !st.IsSuccess() {
		t.Fatalf("PreBind: %v %q, want Success", st.Code(), st.Message())
	}
	ds := &dsv1.DiskSchedule{}
	if err := f.env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: f.uuid(0)}, ds); err != nil {
		t.Fatal(err)
	}
	var found bool
	for volume, res := range ds.Spec.Reservations {
		_, state, _ := ledger.ReservationOf(ds, volume)
		if res.Pod == f.ns+"/app" && res.Size == 100*gi && state == dsv1.ReservationStateScheduled {
			found = true
		}
	}
	if !found {
		t.Errorf("after PreBind the ledger holds no granted 100Gi reservation of the pod: %s", testenv.DescribeLedger(ds))
	}
	f.plugin.Unreserve(f.ctx, c.state, pod, f.node(0)) // the ledger alone holds its space now
	next, _ := f.preFilter(f.pod("next", 100*gi))
	if st := next.filter()[f.node(0)]; st.Code() != fwk.Unschedulable {
		t.Errorf("Filter of the next pod with the first one's reservation granted: %v %q, want Unschedulable", st.Code(), st.Message())
	}
}

// TestPreBindRefused: a reservation the ledger has no room for by the time
// PreBind writes it (another scheduler reserved the disk meanwhile) is
// unschedulable with the numbers, and the pod goes back to the queue.
func TestPreBindRefused(t *testing.T) {
	f := newFixture(t, 150)
	pod := f.pod("app", 100*gi)
	c, _ := f.preFilter(pod)
	c.reserve(f.node(0))

	// Another scheduler's extender reserves 100Gi there first.
	ds := &dsv1.DiskSchedule{}
	if err := f.env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: f.uuid(0)}, ds); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ds.DeepCopy())
	ds.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{"other-volume": {Size: 100 * gi, Pod: f.ns + "/other"}}
	if err := f.env.Client.Patch(f.ctx, ds, patch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitLedger(t, f.ctx, f.env.Client, f.ns, f.uuid(0), 10*time.Second, "the other reservation granted",
		func(ds *dsv1.DiskSchedule) bool {
			_, state, _ := ledger.ReservationOf(ds, "other-volume")
			return state == dsv1.ReservationStateScheduled
		})
	// Refused by the plugin's own reading of the ledger, or by the ledger's
	// decision when that reading lags: unschedulable either way.
	st := c.preBind(f.node(0))
	if st.Code() != fwk.Unschedulable {
		t.Fatalf("PreBind on a disk reserved meanwhile: %v %q, want Unschedulable", st.Code(), st.Message())
	}
	if !strings.Contains(st.Message(), "100Gi") || !strings.Contains(st.Message(), "50Gi") {
		t.Errorf("PreBind's refusal %q does not give the numbers (100Gi needed, 50Gi free)", st.Message())
	}
}
