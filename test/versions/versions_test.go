// Package versions holds the add-on's contract with Longhorn against each
// Longhorn release it names (longhorncrds.TestedVersions): an API server
// that serves that release's own CRDs (k8s/crds.yaml of the longhorn-manager
// module at that version, from the Go module cache), Longhorn's objects
// written as longhorn-manager writes them and stored as that release's
// schema keeps them, and the manager with the gate registered in front of
// Longhorn's writes. The mirror adopts what Longhorn persisted, the gate
// admits a write that fits and denies, with the ledger's numbers, one that
// does not, and the mirror releases a replica Longhorn deleted. The
// extender, asked over HTTP as kube-scheduler asks it, reads the
// release's Volumes, Replicas, Nodes and Settings into the same filter and
// prioritize verdicts on every release (extenderView).
package versions_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/longhorncrds"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
)

const gi = int64(1) << 30

// TestMain silences the process-wide loggers (sandboxtest.Main): each
// release's manager would otherwise log every decision.
func TestMain(m *testing.M) { sandboxtest.Main(m) }

// TestContractPerLonghornVersion runs the contract against each tested
// Longhorn release's CRDs, one API server each: the gate and the mirror,
// then the extender's view, whose verdicts must be the same, word for
// word, on every release.
func TestContractPerLonghornVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane per Longhorn release")
	}
	verdicts := map[string]map[string]verdict{}
	versions := longhorncrds.TestedVersions()
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			env, err := testenv.StartLonghorn(version)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Stop() })
			t.Run("gate and mirror", func(t *testing.T) { contract(t, env) })
			t.Run("extender", func(t *testing.T) { verdicts[version] = extenderView(t, env) })
		})
	}
	// Every release's verdicts against the first's.
	first := versions[0]
	for _, version := range versions[1:] {
		if verdicts[first] == nil || verdicts[version] == nil {
			continue // a release's own subtest failed and says why
		}
		for _, cc := range extenderCases {
			a, b := verdicts[first][cc.pod], verdicts[version][cc.pod]
			if a.String() != b.String() {
				t.Errorf("pod %s: the extender's verdict differs between Longhorn %s and %s:\n%s: %s\n%s: %s",
					cc.pod, first, version, first, a, version, b)
			}
		}
	}
}

// contract is the mirror's adoption and release and the gate's verdicts
// on one disk of 100Gi (limit 100Gi at Longhorn's default
// over-provisioning) that holds a persisted replica of 10Gi.
func contract(t *testing.T, env *testenv.Env) {
	ctx := t.Context()
	ns := env.NewNamespace(t)
	c := env.Client
	disk := ns + "-uuid-1"
	node := testenv.NodeFixture{Name: "node-1", Disks: map[string]testenv.Disk{"disk-1": {UUID: disk, Size: 100 * gi, Scheduled: 10 * gi}}}
	if err := node.CreateNode(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name string
		size int64
	}{{"pvc-a", 10}, {"pvc-b", 50}, {"pvc-c", 60}} {
		if err := testenv.CreateLonghorn(ctx, c, testenv.Volume(ns, v.name, testenv.VolumeFixture{Size: v.size * gi, Replicas: 1})); err != nil {
			t.Fatal(err)
		}
	}
	persisted := testenv.Replica(ns, "pvc-a-r-1", testenv.ReplicaFixture{Volume: "pvc-a", Size: 10 * gi,
		NodeID: "node-1", DiskName: "disk-1", DiskID: disk, State: lhv1.InstanceStateRunning})
	if err := testenv.CreateLonghorn(ctx, c, persisted); err != nil {
		t.Fatal(err)
	}

	// The gate's certificate Secret, shipped empty by the install.
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gate.DefaultSecretName}}); err != nil {
		t.Fatal(err)
	}
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	vwc, err := gate.LocalConfiguration(fmt.Sprintf("https://localhost:%d", port), ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	m, err := managertest.Start(env, env.Config, manager.Options{Namespace: ns, GateGrace: time.Second, Gate: &manager.GateOptions{
		Host: "127.0.0.1", Port: port,
		TLS: gate.TLS{DNSName: "localhost", CertDir: filepath.Join(t.TempDir(), "certs"), ControllerName: "versions-" + ns},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	testenv.Eventually(t, ctx, 30*time.Second, "the gate's CA is injected", func(ctx context.Context) (bool, string, error) {
		got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: gate.ConfigurationName}, got); err != nil {
			return false, "", err
		}
		return len(got.Webhooks[0].ClientConfig.CABundle) > 0, "no caBundle yet", nil
	})

	// The mirror adopts what Longhorn persisted.
	testenv.WaitLedger(t, ctx, c, ns, disk, 30*time.Second, "the persisted replica adopted under the limit", func(ds *dsv1.DiskSchedule) bool {
		return ds.Status.StorageLimit == 100*gi && ds.Status.Replicas["pvc-a-r-1"].ScheduledSize == 10*gi
	})

	// The gate admits a replica that fits, once the ledger granted it.
	fits := testenv.Replica(ns, "pvc-b-r-1", testenv.ReplicaFixture{Volume: "pvc-b", Size: 50 * gi, NodeID: "node-1", DiskName: "disk-1", DiskID: disk})
	testenv.Eventually(t, ctx, 30*time.Second, "Longhorn's replica write of 50Gi admitted", func(ctx context.Context) (bool, string, error) {
		err := c.Create(ctx, fits.DeepCopy())
		return err == nil, fmt.Sprint(err), nil
	})
	testenv.WaitLedger(t, ctx, c, ns, disk, 30*time.Second, "the admitted replica granted", func(ds *dsv1.DiskSchedule) bool {
		return ds.Status.Replicas["pvc-b-r-1"].ScheduledSize == 50*gi && ds.Status.StorageScheduled == 60*gi
	})

	// And denies one that does not fit, with the ledger's numbers.
	tooBig := testenv.Replica(ns, "pvc-c-r-1", testenv.ReplicaFixture{Volume: "pvc-c", Size: 60 * gi, NodeID: "node-1", DiskName: "disk-1", DiskID: disk})
	err = c.Create(ctx, tooBig)
	if err == nil || !strings.Contains(err.Error(), "free of limit 100Gi") {
		t.Fatalf("Longhorn's replica write of 60Gi onto 40Gi free: %v, want the gate's denial with the ledger's numbers", err)
	}

	// The mirror releases a replica Longhorn deleted.
	gone := &lhv1.Replica{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(persisted), gone); err != nil {
		t.Fatal(err)
	}
	gone.Finalizers = nil
	if err := c.Update(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	testenv.WaitLedger(t, ctx, c, ns, disk, 30*time.Second, "the deleted replica released", func(ds *dsv1.DiskSchedule) bool {
		_, held := ds.Status.Replicas["pvc-a-r-1"]
		return !held && ds.Status.StorageScheduled == 50*gi
	})
}
