package longhorn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// TestMain silences the process-wide loggers (sandboxtest.Main).
func TestMain(m *testing.M) { sandboxtest.Main(m) }

const (
	gib = int64(1) << 30
	mib = int64(1) << 20
)

// TestClaimBecomesLonghornsVolume: in a sandbox running longhorn-manager's
// own controllers, a claim of the default class (one replica, best-effort
// data locality) becomes a Longhorn Volume that Longhorn's volume controller
// owns and keeps: its status conditions are the ones that controller
// writes, its Engine and Replica are the ones Longhorn's controllers
// created, and it is detached with its replica not yet placed (Longhorn
// places a best-effort volume's replicas once it is attached). A volume of
// Longhorn's defaults (three replicas, data locality disabled), created as
// Longhorn's API creates it, gets its three replicas placed on three nodes
// by Longhorn's scheduler, each granted by its disk's ledger.
func TestClaimBecomesLonghornsVolume(t *testing.T) {
	var progress testenv.LockedBuffer
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: sandbox.Options{
		Topology: sandboxtest.Nodes(4, 400*gib), Out: &progress,
	}, TailLogs: []string{"longhorn-controllers.log"}})
	if !strings.Contains(progress.String(), "longhorn-volume, longhorn-replica, longhorn-engine") {
		t.Errorf("the sandbox's progress does not name Longhorn's controllers:\n%s", progress.String())
	}
	c := sb.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(sandbox.StorageClassName),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	name := simcluster.VolumeName(pvc)
	vol := waitVolume(ctx, t, c, name, 1, 0)
	for _, typ := range []string{lhv1.VolumeConditionTypeScheduled, lhv1.VolumeConditionTypeWaitForBackingImage, lhv1.VolumeConditionTypeTooManySnapshots} {
		found := false
		for _, cond := range vol.Status.Conditions {
			found = found || cond.Type == typ
		}
		if !found {
			t.Errorf("volume %s has no %s condition, which Longhorn's volume controller writes: %+v", name, typ, vol.Status.Conditions)
		}
	}
	engines := &lhv1.EngineList{}
	if err := c.List(ctx, engines, client.InNamespace(sandbox.Namespace), client.MatchingLabels{"longhornvolume": name}); err != nil {
		t.Fatal(err)
	}
	if len(engines.Items) != 1 || engines.Items[0].Spec.VolumeName != name {
		t.Errorf("want the one Engine Longhorn's volume controller creates for %s, got %d", name, len(engines.Items))
	}

	const defaults = "longhorn-defaults"
	if err := c.Create(ctx, testenv.Volume(sandbox.Namespace, defaults, testenv.VolumeFixture{Size: 10 * gib})); err != nil {
		t.Fatal(err)
	}
	waitVolume(ctx, t, c, defaults, 3, 3)
	replicas := &lhv1.ReplicaList{}
	if err := c.List(ctx, replicas, client.InNamespace(sandbox.Namespace), client.MatchingLabels{"longhornvolume": defaults}); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, r := range replicas.Items {
		nodes[r.Spec.NodeID] = true
		ds := &dsv1.DiskSchedule{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: r.Spec.DiskID}, ds); err != nil {
			t.Fatal(err)
		}
		if st := ds.Status.Replicas[r.Name]; st.State != dsv1.RequestStateScheduled || st.ScheduledSize != 10*gib {
			t.Errorf("replica %s on disk %s: the ledger says %+v, want scheduled at 10Gi", r.Name, r.Spec.DiskID, st)
		}
	}
	if len(nodes) != 3 {
		t.Errorf("Longhorn's scheduler put the 3 replicas on %d nodes, want 3 (replica-soft-anti-affinity is off)", len(nodes))
	}
}

// waitVolume waits until Longhorn's controllers brought volume name to
// detached with want replicas of which placed have a disk, and returns it.
func waitVolume(ctx context.Context, t *testing.T, c client.Client, name string, want, placed int) *lhv1.Volume {
	t.Helper()
	vol := &lhv1.Volume{}
	testenv.Eventually(t, ctx, 2*time.Minute, fmt.Sprintf("volume %s detached with %d replicas, %d placed", name, want, placed), func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: name}, vol); err != nil {
			return false, err.Error(), nil
		}
		replicas := &lhv1.ReplicaList{}
		if err := c.List(ctx, replicas, client.InNamespace(sandbox.Namespace), client.MatchingLabels{"longhornvolume": name}); err != nil {
			return false, "", err
		}
		n := 0
		for _, r := range replicas.Items {
			if r.Spec.DiskID != "" {
				n++
			}
		}
		return vol.Status.State == lhv1.VolumeStateDetached && len(replicas.Items) == want && n == placed,
			fmt.Sprintf("state %q, owner %q, %d replicas, %d placed", vol.Status.State, vol.Status.OwnerID, len(replicas.Items), n), nil
	})
	return vol
}
