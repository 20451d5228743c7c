package scalebench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/bench/benchutil"
	"github.com/longhorn/diskschedule/test/framework/extendertls"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
)

const userNamespace = "bench"

// claimShapes are the pods /filter is measured for: this many unbound
// 100Gi claims of a best-effort, 3-replica Longhorn StorageClass.
var claimShapes = []int{1, 4}

// bench is the state shared by the sub-benchmarks, which run in order.
type bench struct {
	ctx     context.Context
	l       *layout
	workDir string
	// extenderAddr and gatePort are where every manager of the run serves.
	extenderAddr string
	// extenderTLS are the extender's certificates and its caller's.
	extenderTLS *extendertls.Files
	gatePort    int
	starts      int
	mgr         *testenv.RunningManager
	cache       client.Reader

	settle  settleResult
	resync  resyncResult
	filters map[int]filterResult
	gate    []gateResult
	raw     []rawResult
	done    map[string]bool
}

var (
	setupOnce sync.Once
	shared    *bench
	setupErr  error
)

// BenchmarkScale creates the cluster once (not measured) and then measures,
// in order: the manager's cold start until the ledgers settle (and its
// memory then), the mirror's full resync after a restart, the extender's
// filter and the gate. Run it with -benchtime=1x: every figure is measured
// once per run, whatever b.N is.
func BenchmarkScale(b *testing.B) {
	setupOnce.Do(func() { shared, setupErr = setup(b) })
	if setupErr != nil {
		b.Fatal(setupErr)
	}
	s := shared
	b.Run("settle", s.once("settle", s.measureSettle, s.reportSettle))
	b.Run("resync", s.once("resync", s.measureResync, s.reportResync))
	for _, claims := range claimShapes {
		b.Run(fmt.Sprintf("filter/claims=%d", claims), s.once(fmt.Sprintf("filter-%d", claims),
			func(b *testing.B) error { return s.measureFilter(b, claims) },
			func(b *testing.B) { s.reportFilter(b, claims) }))
	}
	b.Run("gate", s.once("gate", s.measureGate, s.reportGate))
	b.Run("gate-raw", s.once("gate-raw", s.measureRaw, s.reportRaw))
	if s.done["summary"] {
		return
	}
	s.done["summary"] = true
	s.printSummary()
}

// once returns a sub-benchmark that measures on its first run only and
// reports the same figures on every run.
func (s *bench) once(name string, measure func(*testing.B) error, report func(*testing.B)) func(*testing.B) {
	return func(b *testing.B) {
		if !s.done[name] {
			if err := measure(b); err != nil {
				b.Fatal(err)
			}
			s.done[name] = true
		}
		b.StopTimer()
		report(b)
	}
}

// setup creates the cluster, the extender's objects and the gate's webhook
// configuration; nothing of the manager runs yet.
func setup(b *testing.B) (*bench, error) {
	testenv.QuietBenchmarks()
	ctx := context.Background()
	l, err := plan()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "scalebench-")
	if err != nil {
		return nil, err
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &bench{ctx: ctx, l: l, workDir: dir, filters: map[int]filterResult{}, done: map[string]bool{}}
	for _, n := range []string{ns, userNamespace} {
		if err := env.CreateNamespace(ctx, n); err != nil {
			return nil, err
		}
	}
	progressf("creating %d Longhorn nodes × %d disks, %d volumes and %d replicas (%d creators)",
		*nodeCount, *diskCount, l.volumes, l.replicas, *creators)
	if err := l.create(ctx, progressf); err != nil {
		return nil, err
	}
	if err := s.createExtenderObjects(ctx); err != nil {
		return nil, err
	}
	ext, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	if s.gatePort, err = controlplane.FreePort(); err != nil {
		return nil, err
	}
	s.extenderAddr = "127.0.0.1:" + strconv.Itoa(ext)
	if s.extenderTLS, err = extendertls.Write(filepath.Join(s.workDir, "extender-certs"), extender.ServiceDNSName(ns)); err != nil {
		return nil, err
	}
	// The gate's configuration is registered last: from here on every
	// space-taking Longhorn write asks the gate (failurePolicy Fail).
	vwc, err := gate.LocalConfiguration("https://localhost:"+strconv.Itoa(s.gatePort), ns)
	if err != nil {
		return nil, err
	}
	if err := env.Client.Create(ctx, vwc); err != nil {
		return nil, err
	}
	// The gate's certificate Secret, shipped empty (config/webhook/secret.yaml).
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: gate.DefaultSecretName, Namespace: ns,
		Labels: map[string]string{"app.kubernetes.io/name": "diskschedule"}}, Type: corev1.SecretTypeOpaque}
	if err := env.Client.Create(ctx, secret); err != nil {
		return nil, err
	}
	b.Cleanup(func() {
		if s.mgr != nil {
			_ = s.mgr.Stop()
		}
	})
	return s, nil
}

// createExtenderObjects creates the extender's ConfigMap (pods are not
// followed in flight, so each filter is measured alone), a best-effort,
// 3-replica Longhorn StorageClass and a pod per claim shape with unbound
// 100Gi claims of it.
func (s *bench) createExtenderObjects(ctx context.Context) error {
	c := env.Client
	config := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: settings.ConfigMapName, Namespace: ns},
		Data: map[string]string{settings.SchedulerExtenderPodSchedulingTimeout: "0"}}
	if err := c.Create(ctx, config); err != nil {
		return err
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "longhorn-local"}, Provisioner: extender.CSIDriver,
		Parameters: map[string]string{"numberOfReplicas": "3", "dataLocality": "best-effort"}}
	if err := c.Create(ctx, sc); err != nil {
		return err
	}
	for _, claims := range claimShapes {
		for i := range claims {
			name := fmt.Sprintf("app-%d-data-%d", claims, i)
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: userNamespace},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}}}}
			if err := c.Create(ctx, pvc); err != nil {
				return err
			}
		}
	}
	return nil
}

func filterPod(claims int) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", claims), Namespace: userNamespace,
		UID: types.UID("app-uid-" + strconv.Itoa(claims))}}
	for i := range claims {
		name := fmt.Sprintf("app-%d-data-%d", claims, i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
	return pod
}

// startManager builds and starts the project's manager as the deployment
// runs it (its controllers, the extender and the gate, no leader election:
// it is the only replica), and waits until its cache has synced.
func (s *bench) startManager() (*testenv.RunningManager, client.Reader, error) {
	s.starts++
	opts := manager.Options{
		Namespace:                    ns,
		MetricsBindAddress:           "0",
		SkipControllerNameValidation: true,
		ExtenderBindAddress:          s.extenderAddr,
		ExtenderCertDir:              s.extenderTLS.CertDir,
		ExtenderClientCAFile:         s.extenderTLS.CAFile,
		ExtenderFence:                -1,
		Gate: &manager.GateOptions{Host: "127.0.0.1", Port: s.gatePort, TLS: gate.TLS{
			DNSName: "localhost", CertDir: filepath.Join(s.workDir, fmt.Sprintf("certs-%d", s.starts)),
			ControllerName: fmt.Sprintf("%s-%d", gate.DefaultControllerName, s.starts)}},
	}
	mgr, err := manager.New(env.Config, env.Scheme, opts)
	if err != nil {
		return nil, nil, err
	}
	rm, err := env.RunManager(mgr)
	if err != nil {
		return nil, nil, err
	}
	return rm, mgr.GetClient(), nil
}

// settleResult is the manager's cold start.
type settleResult struct {
	// toCache: manager built and its cache synced; toLedgers: every disk
	// has its ledger; toAdopted: every ledger's spec requests what is
	// persisted; toSettled: every ledger's status equals it, nothing pending.
	toCache, toLedgers, toAdopted, toSettled time.Duration
	cpu                                      map[string]time.Duration
	before, after                            mem
	apiserverRSS                             uint64
	reconciles                               map[string]float64
	mirrorWrites                             float64
}

// ledgerState counts, from the manager's own cache, the disks without a
// ledger, the ledgers whose spec does not request what is persisted, and
// those whose status does not equal it or that have pending requests.
func (s *bench) ledgerState(ctx context.Context, c client.Reader) (missing, unadopted, unsettled int, err error) {
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, 0, err
	}
	seen := 0
	for i := range list.Items {
		ds := &list.Items[i]
		want, ok := s.l.persisted[ds.Name]
		if _, known := s.l.nodeOf[ds.Name]; !known {
			continue
		}
		seen++
		var spec int64
		for _, v := range ds.Spec.Replicas {
			spec += int64(v)
		}
		if !ok {
			want = 0
		}
		if spec != want {
			unadopted++
		}
		if ds.Status.StorageScheduled != want || ledger.PendingCount(ds) != 0 {
			unsettled++
		}
	}
	return len(s.l.nodeOf) - seen, unadopted, unsettled, nil
}

func (s *bench) measureSettle(b *testing.B) error {
	ctx := s.ctx
	watched := []string{"node", "mirror", "diskschedule"}
	r := settleResult{reconciles: map[string]float64{}}
	startReconciles := map[string]float64{}
	for _, name := range watched {
		startReconciles[name] = readController(name).reconciles
	}
	startWrites := readCounter("longhorn_diskschedule_mirror_writes_total", map[string]string{"result": "ok"})
	r.before = readMem()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cpu0 := sampleCPU()
	start := time.Now()
	rm, c, err := s.startManager()
	if err != nil {
		return err
	}
	s.mgr, s.cache = rm, c
	r.toCache = time.Since(start)
	lastLog := time.Now()
	state, err := testenv.Poll(ctx, max(*settleLimit-r.toCache, time.Millisecond), func(ctx context.Context) (bool, string, error) {
		missing, unadopted, unsettled, err := s.ledgerState(ctx, c)
		if err != nil {
			return false, "", err
		}
		now := time.Since(start)
		if missing == 0 && r.toLedgers == 0 {
			r.toLedgers = now
		}
		if missing == 0 && unadopted == 0 && r.toAdopted == 0 {
			r.toAdopted = now
		}
		if missing == 0 && unadopted == 0 && unsettled == 0 {
			r.toSettled = now
			return true, "", nil
		}
		counts := fmt.Sprintf("%d disks without a ledger, %d not adopted, %d not settled", missing, unadopted, unsettled)
		if time.Since(lastLog) > 10*time.Second {
			off := ""
			if *verbose {
				off, _ = testenv.Unsettled(ctx, c, ns)
			}
			progressf("%s: %s: %.300s", now.Round(time.Second), counts, off)
			lastLog = time.Now()
		}
		return false, counts, nil
	}, testenv.Every(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("the ledgers did not settle within %s: %s: %w", *settleLimit, state, err)
	}
	r.cpu = sampleCPU().since(cpu0)
	pprof.StopCPUProfile()
	r.after = readMem()
	for _, c := range children() {
		if c.name == "kube-apiserver" {
			r.apiserverRSS = statusKiB(strconv.Itoa(c.pid), "VmRSS") << 10
		}
	}
	for _, name := range watched {
		r.reconciles[name] = readController(name).reconciles - startReconciles[name]
	}
	r.mirrorWrites = readCounter("longhorn_diskschedule_mirror_writes_total", map[string]string{"result": "ok"}) - startWrites
	// The project's own check, against the API server.
	if off, err := testenv.Unsettled(ctx, env.Client, ns); err != nil || off != "" {
		return fmt.Errorf("the manager's cache showed every ledger settled, the API server does not: %v %.500s", err, off)
	}
	s.settle = r
	return nil
}

// progressf prints a progress line at once (b.Logf prints only when the
// benchmark ends).
func progressf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scalebench: "+format+"\n", args...)
}

func mib(v uint64) float64 { return float64(v) / (1 << 20) }

func signedMiB(after, before uint64) float64 { return (float64(after) - float64(before)) / (1 << 20) }

func (s *bench) reportSettle(b *testing.B) {
	r := s.settle
	b.ReportMetric(r.toSettled.Seconds(), "settle-s")
	b.ReportMetric(r.toAdopted.Seconds(), "adopted-s")
	b.ReportMetric(r.toLedgers.Seconds(), "ledgers-s")
	b.ReportMetric(r.toCache.Seconds(), "cache-synced-s")
	b.ReportMetric(r.cpu["test"].Seconds(), "test-cpu-s")
	b.ReportMetric(r.cpu["kube-apiserver"].Seconds(), "apiserver-cpu-s")
	b.ReportMetric(r.cpu["etcd"].Seconds(), "etcd-cpu-s")
	b.ReportMetric(float64(r.cpu["test"].Microseconds())/1000/float64(s.l.replicas), "test-cpu-ms/replica")
	b.ReportMetric(signedMiB(r.after.live, r.before.live), "heap+stack-MiB")
	b.ReportMetric(signedMiB(r.after.rss, r.before.rss), "rss-delta-MiB")
	b.ReportMetric(mib(r.after.rss), "rss-MiB")
	b.ReportMetric(r.mirrorWrites, "mirror-writes")
}

// resyncResult is the mirror's full pass after a restart.
type resyncResult struct {
	// toCache: the new manager built and its cache synced; toPass: the
	// mirror has reconciled at least once per ledger and its queue is
	// empty with nothing in flight.
	toCache, toPass time.Duration
	reconciles      float64
	reconcileSecs   float64
	mirrorWrites    float64
	cpu             map[string]time.Duration
	ledgersChanged  int
}

func (s *bench) measureResync(b *testing.B) error {
	if s.mgr == nil {
		return errors.New("the manager's cold start did not run")
	}
	ctx := s.ctx
	versions, err := ledgerVersions(ctx)
	if err != nil {
		return err
	}
	if err := s.mgr.Stop(); err != nil {
		return fmt.Errorf("stopping the manager: %w", err)
	}
	s.mgr = nil
	readMem()
	before := readController("mirror")
	writes0 := readCounter("longhorn_diskschedule_mirror_writes_total", map[string]string{"result": "ok"})
	disks := float64(len(s.l.nodeOf))
	cpu0 := sampleCPU()
	start := time.Now()
	rm, c, err := s.startManager()
	if err != nil {
		return err
	}
	s.mgr, s.cache = rm, c
	r := resyncResult{toCache: time.Since(start)}
	state, err := testenv.Poll(ctx, max(*settleLimit-r.toCache, time.Millisecond), func(context.Context) (bool, string, error) {
		m := readController("mirror")
		if m.reconciles-before.reconciles >= disks && m.depth == 0 && m.unfinished == 0 {
			r.toPass = time.Since(start)
			r.reconciles = m.reconciles - before.reconciles
			r.reconcileSecs = m.reconcileSeconds - before.reconcileSeconds
			return true, "", nil
		}
		return false, fmt.Sprintf("%.0f of %.0f reconciles, depth %.0f", m.reconciles-before.reconciles, disks, m.depth), nil
	}, testenv.Every(20*time.Millisecond))
	if err != nil {
		return fmt.Errorf("the mirror did not finish its pass within %s: %s: %w", *settleLimit, state, err)
	}
	r.cpu = sampleCPU().since(cpu0)
	r.mirrorWrites = readCounter("longhorn_diskschedule_mirror_writes_total", map[string]string{"result": "ok"}) - writes0
	after, err := ledgerVersions(ctx)
	if err != nil {
		return err
	}
	for name, v := range after {
		if versions[name] != v {
			r.ledgersChanged++
		}
	}
	s.resync = r
	return nil
}

// ledgerVersions returns every ledger's resourceVersion.
func ledgerVersions(ctx context.Context) (map[string]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(dsv1.GroupVersion.WithKind("DiskScheduleList"))
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, item := range list.Items {
		out[item.Name] = item.ResourceVersion
	}
	return out, nil
}

func (s *bench) reportResync(b *testing.B) {
	r := s.resync
	b.ReportMetric(r.toPass.Seconds(), "resync-s")
	b.ReportMetric(r.toCache.Seconds(), "cache-synced-s")
	b.ReportMetric((r.toPass - r.toCache).Seconds(), "pass-after-sync-s")
	b.ReportMetric(r.reconciles, "reconciles")
	b.ReportMetric(r.reconcileSecs/max(r.reconciles, 1)*1000, "ms/reconcile")
	b.ReportMetric(r.cpu["test"].Seconds(), "test-cpu-s")
	b.ReportMetric(r.cpu["kube-apiserver"].Seconds(), "apiserver-cpu-s")
	b.ReportMetric(r.mirrorWrites, "mirror-writes")
	b.ReportMetric(float64(r.ledgersChanged), "ledgers-written")
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

type filterResult struct {
	latencies, baseline []time.Duration
	passed              int
	requestBytes        int
	cpuPerCall          time.Duration
}

func (s *bench) measureFilter(_ *testing.B, claims int) error {
	if s.mgr == nil {
		return errors.New("no manager runs")
	}
	base := httptest.NewServer(extender.NewHandler(passAll{}, extender.HandlerOptions{}))
	defer base.Close()
	url := "https://" + s.extenderAddr
	hc, err := s.extenderTLS.HTTPClient(time.Minute)
	if err != nil {
		return err
	}
	if err := waitHealthy(s.ctx, hc, url); err != nil {
		return err
	}
	names := slices.Clone(s.l.nodes)
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: filterPod(claims), NodeNames: &names})
	if err != nil {
		return err
	}
	// A few calls first, so the extender's informers and views are warm.
	if _, _, err := callFilter(hc, url, body); err != nil {
		return err
	}
	r := filterResult{requestBytes: len(body)}
	cpu0 := selfCPU()
	for range *filterCalls {
		d, passed, err := callFilter(hc, url, body)
		if err != nil {
			return err
		}
		r.latencies, r.passed = append(r.latencies, d), passed
	}
	r.cpuPerCall = (selfCPU() - cpu0) / time.Duration(*filterCalls)
	for range *filterCalls {
		d, _, err := callFilter(http.DefaultClient, base.URL, body)
		if err != nil {
			return err
		}
		r.baseline = append(r.baseline, d)
	}
	slices.Sort(r.latencies)
	slices.Sort(r.baseline)
	s.filters[claims] = r
	return nil
}

// waitHealthy waits until the extender at url answers its /healthz.
func waitHealthy(ctx context.Context, hc *http.Client, url string) error {
	state, err := testenv.Poll(ctx, 2*time.Minute, func(context.Context) (bool, string, error) {
		resp, err := hc.Get(url + "/healthz")
		if err != nil {
			return false, err.Error(), nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	}, testenv.Every(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("the extender at %s never became healthy (%s): %w", url, state, err)
	}
	return nil
}

// callFilter posts body to url's /filter and returns the latency and the
// number of nodes passed.
func callFilter(hc *http.Client, url string, body []byte) (time.Duration, int, error) {
	start := time.Now()
	resp, err := hc.Post(url+"/filter", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	var res extenderv1.ExtenderFilterResult
	err = json.NewDecoder(resp.Body).Decode(&res)
	_ = resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if res.Error != "" {
		return 0, 0, fmt.Errorf("filter: %s", res.Error)
	}
	passed := 0
	if res.NodeNames != nil {
		passed = len(*res.NodeNames)
	}
	return d, passed, nil
}

func (s *bench) reportFilter(b *testing.B, claims int) {
	r := s.filters[claims]
	p50, p99 := benchutil.PercentileMillis(r.latencies, 0.50), benchutil.PercentileMillis(r.latencies, 0.99)
	b50, b99 := benchutil.PercentileMillis(r.baseline, 0.50), benchutil.PercentileMillis(r.baseline, 0.99)
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	b.ReportMetric(b50, "baseline-p50-ms")
	b.ReportMetric(b99, "baseline-p99-ms")
	b.ReportMetric(p50/b50, "p50/baseline")
	b.ReportMetric(p99/b99, "p99/baseline")
	b.ReportMetric(benchutil.Millis(r.cpuPerCall), "cpu-ms/call")
	b.ReportMetric(float64(r.passed), "nodes-passed")
	b.ReportMetric(float64(r.requestBytes)/1024, "request-KiB")
}

// gateResult is one fill level's replica writes through the gate.
type gateResult struct {
	level     int
	latencies []time.Duration
	refused   int
}

// measureGate waits until the gate serves, then writes the prepared
// replicas onto their disks one at a time, as Longhorn's volume controller
// writes a scheduled replica (an Update of the whole Replica with
// spec.nodeID, diskID and diskPath set), alternating the fill levels so
// that the machine's load falls on each alike.
func (s *bench) measureGate(_ *testing.B) error {
	ctx := s.ctx
	if err := waitGate(ctx, s.gatePort); err != nil {
		return err
	}
	cfg := *env.Config
	c, err := client.New(&cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	results := make([]gateResult, len(fillLevels))
	for level := range fillLevels {
		results[level].level = fillLevels[level]
	}
	for i := range *gateWrites {
		for g := range *gateNodes {
			for level := range fillLevels {
				u := s.l.gateDisks[level][g]
				d, refused, err := s.writeReplica(ctx, c, s.l.gateReplicas[u][i], u)
				if err != nil {
					return err
				}
				results[level].latencies = append(results[level].latencies, d)
				results[level].refused += refused
			}
		}
	}
	for i := range results {
		slices.Sort(results[i].latencies)
	}
	s.gate = results
	return nil
}

// writeReplica places the replica on disk u and returns the latency of the
// Update the API server admitted (a refused one is tried again at once, up
// to ten times, and counted).
func (s *bench) writeReplica(ctx context.Context, c client.Client, name, u string) (time.Duration, int, error) {
	refused := 0
	for {
		r := &lhv1.Replica{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
			return 0, refused, err
		}
		r.Spec.NodeID, r.Spec.DiskID, r.Spec.DiskPath = s.l.nodeOf[u], u, testenv.DiskPath(s.l.diskName[u])
		r.Labels["longhornnode"] = s.l.nodeOf[u]
		start := time.Now()
		err := c.Update(ctx, r)
		d := time.Since(start)
		if err == nil {
			return d, refused, nil
		}
		refused++
		if refused >= 10 {
			return 0, refused, fmt.Errorf("writing replica %s onto %s: %w", name, u, err)
		}
	}
}

// waitGate waits until the manager's rotator injected the CA into the
// gate's webhook configuration and the gate answers TLS with a certificate
// that CA signed for localhost, as kube-apiserver checks it.
func waitGate(ctx context.Context, port int) error {
	state, err := testenv.Poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: gate.ConfigurationName}, vwc); err != nil {
			return false, "", err
		}
		if len(vwc.Webhooks) == 0 || len(vwc.Webhooks[0].ClientConfig.CABundle) == 0 {
			return false, "no caBundle injected yet", nil
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(vwc.Webhooks[0].ClientConfig.CABundle)
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(port),
			&tls.Config{RootCAs: pool, ServerName: "localhost"})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", conn.Close()
	}, testenv.Every(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("the gate never served (%s): %w", state, err)
	}
	return nil
}

func (s *bench) reportGate(b *testing.B) {
	for _, r := range s.gate {
		b.ReportMetric(benchutil.PercentileMillis(r.latencies, 0.50), fmt.Sprintf("fill-%d-p50-ms", r.level))
		b.ReportMetric(benchutil.PercentileMillis(r.latencies, 0.99), fmt.Sprintf("fill-%d-p99-ms", r.level))
		b.ReportMetric(float64(r.refused), fmt.Sprintf("fill-%d-refused", r.level))
	}
	if len(s.gate) > 0 {
		first, last := s.gate[0], s.gate[len(s.gate)-1]
		b.ReportMetric(benchutil.PercentileMillis(last.latencies, 0.50)/benchutil.PercentileMillis(first.latencies, 0.50), "p50-ratio-full/empty")
	}
}

// printSummary prints the run's figures as the tables of docs/benchmarks.md.
func (s *bench) printSummary() {
	l, st, rs := s.l, s.settle, s.resync
	fmt.Printf("\nscale: %d Longhorn nodes × %d disks (%d ledgers), %d volumes, %d replicas persisted (%d more unscheduled for the gate)\n",
		*nodeCount, *diskCount, len(l.nodeOf), l.volumes, l.replicas-len(fillLevels)**gateNodes**gateWrites, len(fillLevels)**gateNodes**gateWrites)
	fmt.Printf("| figure | value |\n|---|---:|\n")
	fmt.Printf("| cold start: cache synced | %.1f s |\n", st.toCache.Seconds())
	fmt.Printf("| cold start: every disk has its ledger | %.1f s |\n", st.toLedgers.Seconds())
	fmt.Printf("| cold start: every ledger requests what is persisted | %.1f s |\n", st.toAdopted.Seconds())
	fmt.Printf("| **cold start: every ledger equals what is persisted** | **%.1f s** |\n", st.toSettled.Seconds())
	fmt.Printf("| cold start CPU (test process / kube-apiserver / etcd) | %s s |\n", describeCPU(st.cpu))
	fmt.Printf("| cold start: mirror writes; reconciles node / mirror / diskschedule | %.0f; %.0f / %.0f / %.0f |\n",
		st.mirrorWrites, st.reconciles["node"], st.reconciles["mirror"], st.reconciles["diskschedule"])
	fmt.Printf("| **Go heap+stack in use after GC, delta** | **%.0f MiB** (%.0f → %.0f) |\n",
		signedMiB(st.after.live, st.before.live), mib(st.before.live), mib(st.after.live))
	fmt.Printf("| VmRSS, delta | %.0f MiB (%.0f → %.0f) |\n", signedMiB(st.after.rss, st.before.rss), mib(st.before.rss), mib(st.after.rss))
	fmt.Printf("| kube-apiserver VmRSS at that point | %.0f MiB |\n", mib(st.apiserverRSS))
	fmt.Printf("| restart: cache synced | %.1f s |\n", rs.toCache.Seconds())
	fmt.Printf("| **restart: mirror's full pass done** | **%.1f s** (%.0f reconciles, %.2f ms each, %.0f writes, %d ledgers written) |\n",
		rs.toPass.Seconds(), rs.reconciles, rs.reconcileSecs/max(rs.reconciles, 1)*1000, rs.mirrorWrites, rs.ledgersChanged)
	fmt.Printf("| restart CPU (test process / kube-apiserver / etcd) | %s s |\n", describeCPU(rs.cpu))
	for _, claims := range claimShapes {
		f := s.filters[claims]
		fmt.Printf("| filter, %d claim(s): p50 / p99 (baseline p50 / p99) | %.2f / %.2f ms (%.2f / %.2f ms), %.1f× / %.1f×, %.2f CPU-ms per call, %d of %d nodes passed, %d KiB |\n",
			claims, benchutil.PercentileMillis(f.latencies, 0.50), benchutil.PercentileMillis(f.latencies, 0.99), benchutil.PercentileMillis(f.baseline, 0.50), benchutil.PercentileMillis(f.baseline, 0.99),
			benchutil.PercentileMillis(f.latencies, 0.50)/benchutil.PercentileMillis(f.baseline, 0.50), benchutil.PercentileMillis(f.latencies, 0.99)/benchutil.PercentileMillis(f.baseline, 0.99),
			benchutil.Millis(f.cpuPerCall), f.passed, len(l.nodes), f.requestBytes/1024)
	}
	for _, g := range s.gate {
		fmt.Printf("| gate, disk holding %d replicas: p50 / p99 (%d writes, %d refused) | %.1f / %.1f ms |\n",
			g.level, len(g.latencies), g.refused, benchutil.PercentileMillis(g.latencies, 0.50), benchutil.PercentileMillis(g.latencies, 0.99))
	}
	if len(s.gate) > 0 {
		fmt.Printf("| **gate p50, 1000 ÷ 0** | **%.2f** |\n",
			benchutil.PercentileMillis(s.gate[len(s.gate)-1].latencies, 0.50)/benchutil.PercentileMillis(s.gate[0].latencies, 0.50))
	}
	for _, r := range s.raw {
		fmt.Printf("| API server alone, a copy of the ledger of %d entries (%d KiB as JSON): spec merge patch p50 / status update p50 | %.1f / %.1f ms |\n",
			r.level+*gateWrites, r.bytes/1024, benchutil.PercentileMillis(r.spec, 0.50), benchutil.PercentileMillis(r.status, 0.50))
	}
}

// rawNamespace holds copies of the gate's ledgers that no manager watches
// (the manager caches Longhorn's namespace only), for the API server's own
// cost of the writes the gate and the ledger controller make.
const rawNamespace = "scalebench-raw"

// rawResult is the API server's latency for the two writes a gated replica
// costs a ledger, on a copy of a ledger holding level entries.
type rawResult struct {
	level        int
	bytes        int
	spec, status []time.Duration
}

// measureRaw copies, for each fill level, the ledger of the first gate disk
// (with its entries after the gate's measurement) into rawNamespace and
// times -scalebench.gate-writes writes of each kind the gate's path makes
// to it: a merge patch adding one spec.replicas key, computed from the
// version read as ledgerclient.Merge does (the gate's request), and an
// Update of the status with one more decided entry (the ledger
// controller's decision).
func (s *bench) measureRaw(_ *testing.B) error {
	ctx := s.ctx
	if err := env.CreateNamespace(ctx, rawNamespace); err != nil {
		return err
	}
	c := env.Client
	for level := range fillLevels {
		live := &dsv1.DiskSchedule{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.l.gateDisks[level][0]}, live); err != nil {
			return err
		}
		ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: live.Name, Namespace: rawNamespace, Labels: live.Labels},
			Spec: *live.Spec.DeepCopy()}
		status := *live.Status.DeepCopy()
		if err := c.Create(ctx, ds); err != nil {
			return err
		}
		ds.Status = status
		if err := c.Status().Update(ctx, ds); err != nil {
			return err
		}
		raw, _ := json.Marshal(ds)
		r := rawResult{level: fillLevels[level], bytes: len(raw)}
		for i := range *gateWrites {
			key := fmt.Sprintf("raw-%04d", i)
			cur := &dsv1.DiskSchedule{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(ds), cur); err != nil {
				return err
			}
			next := cur.DeepCopy()
			next.Spec.Replicas[key] = dsv1.RequestedBytes(fillSize)
			start := time.Now()
			if err := c.Patch(ctx, next, client.MergeFrom(cur)); err != nil {
				return err
			}
			r.spec = append(r.spec, time.Since(start))
			if next.Status.Replicas == nil {
				next.Status.Replicas = map[string]dsv1.RequestStatus{}
			}
			next.Status.Replicas[key] = dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: fillSize, ScheduledSize: fillSize}
			next.Status.StorageScheduled += fillSize
			next.Status.ObservedGeneration = next.Generation
			start = time.Now()
			if err := c.Status().Update(ctx, next); err != nil {
				return err
			}
			r.status = append(r.status, time.Since(start))
			// Take the entry back (not timed), so the copy stays under the
			// ledger's bound of entries.
			back := next.DeepCopy()
			delete(back.Spec.Replicas, key)
			if err := c.Patch(ctx, back, client.MergeFrom(next)); err != nil {
				return err
			}
			delete(back.Status.Replicas, key)
			back.Status.StorageScheduled -= fillSize
			back.Status.ObservedGeneration = back.Generation
			if err := c.Status().Update(ctx, back); err != nil {
				return err
			}
		}
		slices.Sort(r.spec)
		slices.Sort(r.status)
		s.raw = append(s.raw, r)
	}
	return nil
}

func (s *bench) reportRaw(b *testing.B) {
	for _, r := range s.raw {
		b.ReportMetric(benchutil.PercentileMillis(r.spec, 0.50), fmt.Sprintf("fill-%d-spec-patch-p50-ms", r.level))
		b.ReportMetric(benchutil.PercentileMillis(r.status, 0.50), fmt.Sprintf("fill-%d-status-update-p50-ms", r.level))
		b.ReportMetric(float64(r.bytes)/1024, fmt.Sprintf("fill-%d-ledger-KiB", r.level))
	}
}
