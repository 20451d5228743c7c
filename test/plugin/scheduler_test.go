package plugin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/schedulerplugin"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
)

const gi = int64(1) << 30

// schedulerName is the second scheduler's profile (DESIGN §6.1).
const schedulerName = "diskschedule-scheduler"

// env and binary are the test API server and the plugin build, made once
// for the package.
var (
	env    *testenv.Env
	binary string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "diskschedule-scheduler-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "diskschedule-scheduler")
	build := exec.Command("go", "build", "-o", binary, "./cmd/diskschedule-scheduler")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the plugin build: %v\n%s", err, out)
		return 1
	}
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return m.Run()
}

// TestPodsScheduledThroughThePlugin runs the plugin build against the API
// server and sends it three pods of 100Gi for two nodes of one 150Gi disk:
// two are bound, one per node, each with its reservation granted in its
// node's ledger before it was bound; the third stays pending with the
// plugin's reason in numbers.
func TestPodsScheduledThroughThePlugin(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := env.NewNamespace(t)
	create := func(obj client.Object) {
		t.Helper()
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	// A reservation whose pod is not bound expires after
	// scheduler-extender-node-reservation-timeout: longer than a test.
	create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: settings.ConfigMapName},
		Data: map[string]string{settings.SchedulerExtenderNodeReservationTimeout: "600"}})
	m, err := managertest.Start(env, env.Config, manager.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	for i := range 2 {
		node := testenv.NodeFixture{Name: fmt.Sprintf("%s-%d", ns, i), Disks: map[string]testenv.Disk{
			"disk-1": {UUID: fmt.Sprintf("%s-%d-uuid", ns, i), Size: 150 * gi}}}
		if err := node.CreateNode(ctx, env.Client, ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node.KubeNode()) })
		testenv.WaitLedger(t, ctx, env.Client, ns, node.Disks["disk-1"].UUID, 20*time.Second, "its limit",
			func(ds *dsv1.DiskSchedule) bool { return ds.Status.StorageLimit == 150*gi })
	}
	startScheduler(t, ctx, ns)

	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "longhorn-" + ns}, Provisioner: extender.CSIDriver,
		Parameters: map[string]string{"numberOfReplicas": "1", "dataLocality": "best-effort"}}
	create(sc)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
	pods := []string{"app-0", "app-1", "app-2"}
	for _, name := range pods {
		claim := boundVolume(t, ctx, ns, sc.Name, "vol-"+name, 100*gi)
		create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{SchedulerName: schedulerName, Containers: []corev1.Container{{Name: "app", Image: "app"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}})
	}

	var bound, pending []corev1.Pod
	testenv.Eventually(t, ctx, 60*time.Second, "two pods bound, one pending with the plugin's reason", func(ctx context.Context) (bool, string, error) {
		list := &corev1.PodList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		bound, pending = nil, nil
		var seen []string
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound = append(bound, p)
				seen = append(seen, p.Name+"→"+p.Spec.NodeName)
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "vol-"+p.Name+" needs 100Gi") {
					pending = append(pending, p)
					seen = append(seen, p.Name+": "+c.Message)
				}
			}
		}
		return len(bound) == 2 && len(pending) == 1, strings.Join(seen, "; "), nil
	}, testenv.Every(200*time.Millisecond))

	if bound[0].Spec.NodeName == bound[1].Spec.NodeName {
		t.Errorf("pods %s and %s bound to the same node %s, whose disk holds one of them", bound[0].Name, bound[1].Name, bound[0].Spec.NodeName)
	}
	for _, p := range bound {
		ds := &dsv1.DiskSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Spec.NodeName + "-uuid"}, ds); err != nil {
			t.Fatal(err)
		}
		res, state, ok := ledger.ReservationOf(ds, "vol-"+p.Name)
		if !ok || res.Pod != ns+"/"+p.Name || state != dsv1.ReservationStateScheduled {
			t.Errorf("pod %s bound to %s without its reservation granted there: %s", p.Name, p.Spec.NodeName, testenv.DescribeLedger(ds))
		}
		if v := ledger.Violation(ds.Status); v != "" {
			t.Errorf("ledger of %s: %s", p.Spec.NodeName, v)
		}
	}
	msg := ""
	for _, c := range pending[0].Status.Conditions {
		if c.Type == corev1.PodScheduled {
			msg = c.Message
		}
	}
	if !strings.Contains(msg, "50Gi") {
		t.Errorf("pod %s pending with %q: the reason does not give the numbers", pending[0].Name, msg)
	}
}

// boundVolume creates a new Longhorn volume of size bytes (best-effort,
// one replica, not placed yet), its PV and a claim bound to it, as the PV
// controller binds them, and returns the claim's name.
func boundVolume(t *testing.T, ctx context.Context, ns, class, name string, size int64) string {
	t.Helper()
	v := testenv.Volume(ns, name, testenv.VolumeFixture{Size: size, Replicas: 1, DataLocality: lhv1.DataLocalityBestEffort})
	if err := testenv.CreateLonghorn(ctx, env.Client, v); err != nil {
		t.Fatal(err)
	}
	claim := "data-" + name
	storage := corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: storage, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: extender.CSIDriver, VolumeHandle: name}},
			StorageClassName: class,
			ClaimRef:         &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: claim},
		}}
	if err := env.Client.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	pv.Status.Phase = corev1.VolumeBound
	if err := env.Client.Status().Update(ctx, pv); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns,
		Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: pv.Name,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: storage}}}
	if err := env.Client.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase, pvc.Status.Capacity = corev1.ClaimBound, storage
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	if err := env.Client.Status().Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	return claim
}

// startScheduler runs the plugin build with one profile,
// diskschedule-scheduler, whose diskschedule plugin follows namespace ns
// as Longhorn's, until the test ends.
func startScheduler(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
profiles:
- schedulerName: %s
  plugins:
    multiPoint:
      enabled:
      - name: %s
  pluginConfig:
  - name: %s
    args:
      namespace: %s
`, kubeconfig, schedulerName, schedulerplugin.Name, schedulerplugin.Name, ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "scheduler.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
	p, _, err := controlplane.StartOnFreePort(func(port int) (*controlplane.Process, error) {
		p, err := controlplane.StartProcess(schedulerName, binary, []string{"--config=" + config, "--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port), "--v=2"}, out)
		if err != nil {
			return nil, err
		}
		if err := p.WaitHealthy(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), 60*time.Second); err != nil {
			return nil, err
		}
		return p, nil
	})
	if err != nil {
		testenv.LogTail(t, logPath)
		t.Fatalf("starting the plugin build: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Logf("stopping the plugin build: %v", err)
		}
		if t.Failed() {
			testenv.LogTail(t, logPath)
		}
	})
}

// writeKubeconfig writes cfg, the test API server's administrator, as a
// kubeconfig file at path.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
