// Package extenderbench measures the scheduler extender's filter over HTTP
// on a large simulated cluster held by a real API server: 1000 nodes with 4
// disks each and a pod with four unbound Longhorn claims, in both of
// kube-scheduler's nodeCacheCapable modes (node names only, or full Node
// objects in the request).
//
// It holds only benchmarks; the test control plane starts only when -bench
// is given. Figures and the command are in docs/benchmarks.md.
package extenderbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/config"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/bench/benchutil"
	"github.com/longhorn/diskschedule/test/framework/testenv"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	gi            = int64(1) << 30
	nodeCount     = 1000
	disksPerNode  = 4
	claimsPerPod  = 4
	ns            = "longhorn-system"
	userNamespace = "bench"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunBenchmarks(m, func(e *testenv.Env) { env = e }))
}

// passAll is the baseline: a filter that decides nothing and passes every
// node, so its latency is the HTTP and JSON cost of the same request.
type passAll struct{}

func (passAll) Filter(_ context.Context, _ *corev1.Pod, nodes []string) ([]string, map[string]string, error) {
	return nodes, nil, nil
}

func (passAll) Prioritize(context.Context, *corev1.Pod, []string) (map[string]int64, error) {
	return nil, nil
}

// BenchmarkFilter reports filter latency percentiles over HTTP for a 4-claim
// pod and 1000 nodes × 4 disks in both nodeCacheCapable modes, beside a
// pass-everything baseline with the same request, and their ratio.
func BenchmarkFilter(b *testing.B) {
	ctx := context.Background()
	pod, names, nodes := populate(b, ctx)
	srv := httptest.NewServer(newHandler(b, ctx))
	defer srv.Close()
	baseline := httptest.NewServer(extender.NewHandler(passAll{}, extender.HandlerOptions{}))
	defer baseline.Close()

	modes := []struct {
		name string
		args extenderv1.ExtenderArgs
	}{
		{"nodeCacheCapable=true", extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names}},
		{"nodeCacheCapable=false", extenderv1.ExtenderArgs{Pod: pod, Nodes: nodes}},
	}
	for _, mode := range modes {
		body, err := json.Marshal(mode.args)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(mode.name, func(b *testing.B) {
			base := measure(b, baseline.URL, body, b.N)
			b.ResetTimer()
			got := measure(b, srv.URL, body, b.N)
			b.StopTimer()
			b.ReportMetric(benchutil.PercentileMillis(got, 0.50), "p50-ms")
			b.ReportMetric(benchutil.PercentileMillis(got, 0.99), "p99-ms")
			b.ReportMetric(benchutil.PercentileMillis(base, 0.50), "baseline-p50-ms")
			b.ReportMetric(benchutil.PercentileMillis(base, 0.99), "baseline-p99-ms")
			b.ReportMetric(benchutil.PercentileMillis(got, 0.50)/benchutil.PercentileMillis(base, 0.50), "p50/baseline")
			b.ReportMetric(benchutil.PercentileMillis(got, 0.99)/benchutil.PercentileMillis(base, 0.99), "p99/baseline")
			b.ReportMetric(float64(len(body))/1024, "request-KiB")
		})
	}
}

// measure posts body to url's /filter n times and returns the sorted latencies.
func measure(b *testing.B, url string, body []byte, n int) []time.Duration {
	b.Helper()
	latencies := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		resp, err := http.Post(url+"/filter", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var res extenderv1.ExtenderFilterResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
		latencies = append(latencies, time.Since(start))
		if res.Error != "" || len(res.FailedNodes) != 0 {
			b.Fatalf("every node should fit the pod: error %q, %d failed", res.Error, len(res.FailedNodes))
		}
	}
	slices.Sort(latencies)
	return latencies
}

// newHandler builds the extender over a cache of the API server, with the
// scheduling hold off (pod-scheduling-timeout 0), so each call is measured alone.
func newHandler(b *testing.B, ctx context.Context) http.Handler {
	b.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	if err := index.Register(ctx, c); err != nil {
		b.Fatal(err)
	}
	for _, obj := range []client.Object{&lhv1.Node{}, &dsv1.DiskSchedule{}, &lhv1.Setting{}, &lhv1.Replica{},
		&lhv1.Volume{}, &corev1.PersistentVolumeClaim{}, &storagev1.StorageClass{}, &corev1.ConfigMap{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	cached, err := client.New(env.Config, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		b.Fatal(err)
	}
	// Wait until the cache holds every ledger.
	testenv.Eventually(b, ctx, time.Minute, "the cache holds every DiskSchedule", func(ctx context.Context) (bool, string, error) {
		list := &dsv1.DiskScheduleList{}
		err := cached.List(ctx, list)
		return err == nil && len(list.Items) == nodeCount*disksPerNode, fmt.Sprintf("%d of %d (%v)", len(list.Items), nodeCount*disksPerNode, err), nil
	}, testenv.Every(100*time.Millisecond))
	// The extender's settings come from the ConfigMap populate wrote, read
	// once by the config controller as the manager's does.
	store := config.NewStore()
	reconciler := config.NewReconciler(env.Client, &events.FakeRecorder{}, store, ns, metrics.NewConfig(prometheus.NewRegistry()))
	if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: settings.ConfigMapName}}); err != nil {
		b.Fatal(err)
	}
	if store.Get().PodSchedulingTimeout != 0 {
		b.Fatalf("the extender's settings are %s, want the ConfigMap's pod-scheduling-timeout 0", store.Get())
	}
	m := metrics.NewExtender(prometheus.NewRegistry())
	ext := extender.New(extender.Options{Client: cached, APIReader: env.Client, Informers: c, Namespace: ns,
		Config: store, Clock: clock.RealClock{}, Metrics: m, Budget: packing.DefaultBudget})
	if err := ext.Start(ctx); err != nil {
		b.Fatal(err)
	}
	return extender.NewHandler(ext, extender.HandlerOptions{FilterDuration: m.FilterDuration})
}

// populate creates the cluster: Longhorn nodes with disks (as
// longhorn-manager writes them) and Ready ledgers, the extender's ConfigMap,
// a Longhorn StorageClass and a pod with four unbound claims. It returns the
// pod, the node names and the Node objects.
func populate(b *testing.B, ctx context.Context) (*corev1.Pod, []string, *corev1.NodeList) {
	b.Helper()
	c := env.Client
	for _, n := range []string{ns, userNamespace} {
		if err := env.CreateNamespace(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: settings.ConfigMapName, Namespace: ns},
		Data: map[string]string{settings.SchedulerExtenderPodSchedulingTimeout: "0"}}
	if err := c.Create(ctx, cm); err != nil {
		b.Fatal(err)
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "longhorn"}, Provisioner: extender.CSIDriver,
		Parameters: map[string]string{"numberOfReplicas": "3", "dataLocality": "best-effort"}}
	if err := c.Create(ctx, sc); err != nil {
		b.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: userNamespace, UID: "app-uid"}}
	for i := range claimsPerPod {
		name := fmt.Sprintf("data-%d", i)
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: userNamespace},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}}}}
		if err := c.Create(ctx, pvc); err != nil {
			b.Fatal(err)
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}

	start := time.Now()
	var names []string
	nodes := &corev1.NodeList{}
	now := metav1.Now()
	for n := range nodeCount {
		name := fmt.Sprintf("node-%04d", n)
		names = append(names, name)
		nodes.Items = append(nodes.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", n%3)}}})
		fixture := testenv.NodeFixture{Name: name, Zone: fmt.Sprintf("zone-%d", n%3), Disks: map[string]testenv.Disk{}}
		for d := range disksPerNode {
			disk, uuid := fmt.Sprintf("disk-%d", d), fmt.Sprintf("%s-disk-%d", name, d)
			fixture.Disks[disk] = testenv.Disk{UUID: uuid, Size: 400 * gi}
			ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: uuid, Namespace: ns},
				Spec: dsv1.DiskScheduleSpec{Name: disk, NodeID: name}}
			if err := c.Create(ctx, ds); err != nil {
				b.Fatal(err)
			}
			ds.Status = dsv1.DiskScheduleStatus{StorageLimit: 400 * gi, StorageScheduled: int64(n%4) * 100 * gi,
				Conditions: []metav1.Condition{{Type: dsv1.DiskScheduleConditionReady, Status: metav1.ConditionTrue, Reason: "Bench", LastTransitionTime: now}}}
			if err := c.Status().Update(ctx, ds); err != nil {
				b.Fatal(err)
			}
		}
		// The bench plays longhorn-manager, which writes its Nodes and their status.
		if err := testenv.CreateLonghorn(ctx, c, fixture.LonghornNode(ns)); err != nil {
			b.Fatal(err)
		}
		if (n+1)%250 == 0 {
			b.Logf("created %d of %d nodes (%d disks) in %s", n+1, nodeCount, (n+1)*disksPerNode, time.Since(start).Round(time.Second))
		}
	}
	return pod, names, nodes
}
