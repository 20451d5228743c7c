package extender

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestNoLocalSpaceWhereLonghornPlacesNoLocalReplica: the extender asks a
// node for a volume's local replica only where Longhorn will create it. A
// ReadWriteMany volume (attached on its share manager's node) of any data
// locality, a best-effort volume that is not healthy, and a best-effort
// volume while concurrent-replica-rebuild-per-node-limit is 0 remove no
// node for lack of local space, and a pod bound with one holds no
// reservation. A best-effort ReadWriteOnce claim on the same nodes shows
// the node without room removed: the rule is what lets the pod through.
func TestNoLocalSpaceWhereLonghornPlacesNoLocalReplica(t *testing.T) {
	f := newFixture(t)
	f.node("node-a", []int64{10 * gi}, nil) // no room for a 50Gi replica
	f.node("node-b", []int64{400 * gi}, nil)
	f.node("node-c", []int64{400 * gi}, nil)
	candidates := []string{"node-a", "node-b", "node-c"}
	bestEffort := f.class("best-effort", map[string]string{paramDataLocality: string(lhv1.DataLocalityBestEffort), paramNumberOfReplicas: "2"})

	everyNode := func(passed []string, failed map[string]string) bool {
		return slices.Equal(passed, candidates) && len(failed) == 0
	}
	noReservation := func(pod string) {
		t.Helper()
		testenv.Consistently(t, f.ctx, 2*time.Second, "no reservation of pod "+pod, func(context.Context) (bool, string, error) {
			got := f.reservationsOf(pod)
			return len(got) == 0, fmt.Sprint(got), nil
		})
	}

	t.Run("control: a best-effort ReadWriteOnce claim needs local space", func(t *testing.T) {
		claim, _ := f.claimOf("rwo-data", bestEffort, 50*gi)
		pod := f.pod("rwo", claim)
		_, failed := f.filterUntil(pod, candidates, "node-a removed", func(passed []string, failed map[string]string) bool {
			return slices.Equal(passed, []string{"node-b", "node-c"})
		})
		if !strings.Contains(failed["node-a"], "50Gi") {
			t.Errorf("node-a's reason %q does not give the numbers", failed["node-a"])
		}
	})

	t.Run("unbound ReadWriteMany claim", func(t *testing.T) {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "rwx-data", Namespace: f.ns},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &bestEffort,
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(50*gi, resource.BinarySI)}}}}
		f.create(pvc)
		pod := f.pod("rwx-unbound", pvc.Name)
		f.filterUntil(pod, candidates, "every node", everyNode)
		f.bind(pod, "node-a")
		noReservation("rwx-unbound")
	})

	t.Run("bound ReadWriteMany best-effort volume", func(t *testing.T) {
		claim := f.volumeShaped("vol-rwx", 50*gi, lhv1.DataLocalityBestEffort, 2, func(v *lhv1.Volume) {
			v.Spec.AccessMode = lhv1.AccessModeReadWriteMany
		}, "node-b", "node-c")
		pod := f.pod("rwx-bound", claim)
		f.filterUntil(pod, []string{"node-a"}, "node-a", func(passed []string, failed map[string]string) bool {
			return slices.Equal(passed, []string{"node-a"}) && len(failed) == 0
		})
		f.bind(pod, "node-a")
		noReservation("rwx-bound")
	})

	t.Run("best-effort volume that is not healthy", func(t *testing.T) {
		claim := f.volumeShaped("vol-degraded", 50*gi, lhv1.DataLocalityBestEffort, 2, func(v *lhv1.Volume) {
			v.Status.Robustness = lhv1.VolumeRobustnessDegraded
		}, "node-b")
		pod := f.pod("degraded", claim)
		f.filterUntil(pod, []string{"node-a"}, "node-a", func(passed []string, failed map[string]string) bool {
			return slices.Equal(passed, []string{"node-a"}) && len(failed) == 0
		})
	})

	t.Run("rebuilding disabled", func(t *testing.T) {
		setting := &lhv1.Setting{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: settings.ConcurrentReplicaRebuildPerNodeLimit}, Value: "0"}
		if err := testenv.CreateLonghorn(f.ctx, f.env.Client, setting); err != nil {
			t.Fatal(err)
		}
		claim, _ := f.claimOf("norebuild-data", bestEffort, 50*gi)
		pod := f.pod("norebuild", claim)
		f.filterUntil(pod, candidates, "every node", everyNode)
		f.bind(pod, "node-a")
		noReservation("norebuild")
	})
}

// TestRestartNodeCountsHealthyReplicasOnly: a node holding a failed
// replica, or one Longhorn is evicting, does not keep a restarted pod.
func TestRestartNodeCountsHealthyReplicasOnly(t *testing.T) {
	f := newFixture(t)
	candidates := []string{"node-a", "node-b", "node-c"}
	for _, n := range candidates {
		f.node(n, []int64{400 * gi}, nil)
	}
	for _, tc := range []struct {
		name  string
		spoil func(*lhv1.Replica)
	}{
		{"failed", func(r *lhv1.Replica) { r.Spec.FailedAt = "2026-01-02T00:00:00Z" }},
		{"evicted", func(r *lhv1.Replica) { r.Spec.EvictionRequested = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := f.volumeOf("vol-"+tc.name, 10*gi, lhv1.DataLocalityBestEffort, 1, "node-b")
			rep := &lhv1.Replica{}
			if err := f.env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "vol-" + tc.name + "-r-0"}, rep); err != nil {
				t.Fatal(err)
			}
			pod := f.pod("restart-"+tc.name, claim)
			f.filterUntil(pod, candidates, "node-b alone, its healthy replica's", func(passed []string, _ map[string]string) bool {
				return slices.Equal(passed, []string{"node-b"})
			})
			tc.spoil(rep)
			if err := f.env.Client.Update(f.ctx, rep); err != nil {
				t.Fatal(err)
			}
			f.filterUntil(pod, candidates, "every node", func(passed []string, _ map[string]string) bool {
				return slices.Equal(passed, candidates)
			})
		})
	}
}
