package extender

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// class creates a Longhorn StorageClass of the test with params, removed
// when the test ends, and returns its name.
func (f *fixture) class(suffix string, params map[string]string) string {
	f.t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-" + suffix}, Provisioner: CSIDriver,
		Parameters: params}
	f.create(sc)
	f.t.Cleanup(func() { _ = f.env.Client.Delete(context.Background(), sc) })
	return sc.Name
}

// claimOf creates an unbound claim of class and returns its name and the
// name the provisioner will give its volume.
func (f *fixture) claimOf(name, class string, size int64) (string, string) {
	f.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}}}}
	f.create(pvc)
	return pvc.Name, "pvc-" + string(pvc.UID)
}

// filterUntil filters pod on candidates until done accepts the answer, and
// returns it; the cache may not hold the pod's claims and volumes yet.
func (f *fixture) filterUntil(pod *corev1.Pod, candidates []string, what string, done func(passed []string, failed map[string]string) bool) ([]string, map[string]string) {
	f.t.Helper()
	var passed []string
	var failed map[string]string
	var ferr error
	_, err := testenv.Poll(f.ctx, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		passed, failed, ferr = f.ext.Filter(ctx, pod, candidates)
		return ferr == nil && done(passed, failed), "", nil
	}, testenv.Every(10*time.Millisecond))
	if err != nil {
		f.t.Fatalf("pod %s: want %s; got %v, failed %v, error %v", pod.Name, what, passed, failed, ferr)
	}
	return passed, failed
}

// reservationsOf returns, by disk UUID, the reservations of the test's
// ledgers made for pod.
func (f *fixture) reservationsOf(pod string) map[string][]string {
	f.t.Helper()
	list := &dsv1.DiskScheduleList{}
	if err := f.env.Client.List(f.ctx, list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, ds := range list.Items {
		for volume, res := range ds.Spec.Reservations {
			if res.Pod == f.ns+"/"+pod {
				out[ds.Name] = append(out[ds.Name], volume)
			}
		}
	}
	return out
}

// TestFilterByVolumeKind: a claim of Longhorn's default class (3 replicas,
// data locality disabled) needs no space on the pod's node, so every node
// passes and nothing is held for it; best-effort claims need their local
// replica's space and room for the others elsewhere; a pod with one claim
// of each kind is judged, and reserved, on its best-effort volume alone.
func TestFilterByVolumeKind(t *testing.T) {
	f := newFixture(t)
	f.node("node-a", []int64{10 * gi}, nil)
	f.node("node-b", []int64{100 * gi}, nil)
	f.node("node-c", []int64{100 * gi}, []int64{60 * gi})
	candidates := []string{"node-a", "node-b", "node-c"}
	defaultClass := f.class("default", longhornDefaultClass)
	before := f.longhornVersions()

	t.Run("default class", func(t *testing.T) {
		claim, _ := f.claimOf("default-data", defaultClass, 50*gi)
		pod := f.pod("default", claim)
		f.filterUntil(pod, candidates, "every node", func(passed []string, failed map[string]string) bool {
			return slices.Equal(passed, candidates) && len(failed) == 0
		})
		f.ext.flight.mu.Lock()
		tracked := f.ext.flight.overlay.get(pod.UID) != nil
		f.ext.flight.mu.Unlock()
		if tracked {
			t.Error("a pod whose volumes need no local space must not be counted in flight")
		}
		scores, err := f.ext.Prioritize(f.ctx, pod, candidates)
		if err != nil || len(scores) != 0 {
			t.Errorf("Prioritize = %v, %v; want no preference", scores, err)
		}
	})

	t.Run("best-effort, 3 replicas", func(t *testing.T) {
		class := f.class("best-effort-3", map[string]string{"numberOfReplicas": "3", "dataLocality": "best-effort"})
		claim, vol := f.claimOf("three-data", class, 30*gi)
		pod := f.pod("three", claim)
		// node-b: the local replica fits, but of the two other nodes only
		// node-c has 30Gi (node anti-affinity is hard by default).
		_, failed := f.filterUntil(pod, candidates, "no node", func(passed []string, failed map[string]string) bool {
			return len(passed) == 0 && len(failed) == 3
		})
		if !strings.Contains(failed["node-a"], "10Gi") {
			t.Errorf("node-a: %q, want the local disk's 10Gi", failed["node-a"])
		}
		for _, node := range []string{"node-b", "node-c"} {
			if !strings.Contains(failed[node], "volume "+vol+": Longhorn would find room for 1 of its 2 other replicas") ||
				!strings.Contains(failed[node], "node-a/disk-1: insufficient storage") {
				t.Errorf("%s: %q, want no room for the second replica off the node", node, failed[node])
			}
		}
	})

	t.Run("best-effort, 2 replicas", func(t *testing.T) {
		class := f.class("best-effort-2", map[string]string{"numberOfReplicas": "2", "dataLocality": "best-effort"})
		claim, _ := f.claimOf("two-data", class, 30*gi)
		pod := f.pod("two", claim)
		f.filterUntil(pod, candidates, "node-b and node-c", func(passed []string, _ map[string]string) bool {
			return slices.Equal(passed, []string{"node-b", "node-c"})
		})
		f.ext.flight.mu.Lock()
		f.ext.flight.overlay.drop(pod.UID) // it goes nowhere
		f.ext.flight.mu.Unlock()
	})

	t.Run("one claim of each kind", func(t *testing.T) {
		localClaim, localVol := f.claim("local-data", 50*gi)
		defaultClaim, defaultVol := f.claimOf("shared-data", defaultClass, 50*gi)
		pod := f.pod("mixed", localClaim, defaultClaim)
		_, failed := f.filterUntil(pod, candidates, "node-b alone", func(passed []string, _ map[string]string) bool {
			return slices.Equal(passed, []string{"node-b"})
		})
		for _, node := range []string{"node-a", "node-c"} {
			if !strings.Contains(failed[node], localVol) || strings.Contains(failed[node], defaultVol) {
				t.Errorf("%s: %q, want the best-effort volume %s's reason alone", node, failed[node], localVol)
			}
		}
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: f.ns},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-b"}}
		if err := f.env.Client.SubResource("binding").Create(f.ctx, pod, binding); err != nil {
			t.Fatalf("binding pod mixed: %v", err)
		}
		f.ledgerWhere(types.NamespacedName{Namespace: f.ns, Name: "node-b-uuid-1"}, "the best-effort volume is reserved",
			func(ds *dsv1.DiskSchedule) bool {
				res, ok := ds.Spec.Reservations[localVol]
				return ok && res.Size == 50*gi && res.Pod == f.ns+"/mixed"
			})
		// Both volumes would have gone into the same write.
		if got := f.reservationsOf("mixed"); !maps.EqualFunc(got, map[string][]string{"node-b-uuid-1": {localVol}}, slices.Equal) {
			t.Errorf("reservations of pod mixed = %v, want %s on node-b's disk alone", got, localVol)
		}
	})
	if got := f.reservationsOf("default"); len(got) != 0 {
		t.Errorf("reservations of pod default = %v, want none", got)
	}
	f.assertLonghornUnchanged(before)
}

// TestRestartRuleCountsOnlyLocalVolumes: a node holding replicas of a pod's
// volumes with data locality disabled is no reason to keep the pod there;
// a node holding the replica of its best-effort volume is, whatever the
// disabled volumes' replicas.
func TestRestartRuleCountsOnlyLocalVolumes(t *testing.T) {
	f := newFixture(t)
	candidates := []string{"node-a", "node-b", "node-c"}
	for _, n := range candidates {
		f.node(n, []int64{400 * gi}, nil)
	}
	shared := f.volumeOf("vol-shared", 10*gi, lhv1.DataLocalityDisabled, 2, "node-a", "node-b")
	local := f.volumeOf("vol-local", 10*gi, lhv1.DataLocalityBestEffort, 1, "node-c")

	pod := f.pod("shared-only", shared)
	f.filterUntil(pod, candidates, "every node", func(passed []string, failed map[string]string) bool {
		return slices.Equal(passed, candidates) && len(failed) == 0
	})

	pod = f.pod("mixed", shared, local)
	_, failed := f.filterUntil(pod, candidates, "node-c alone", func(passed []string, _ map[string]string) bool {
		return slices.Equal(passed, []string{"node-c"})
	})
	if !strings.Contains(failed["node-a"], "node node-c already holds a replica of every volume") {
		t.Errorf("node-a: %q, want the restart rule's reason", failed["node-a"])
	}
	scores, err := f.ext.Prioritize(f.ctx, pod, candidates)
	if err != nil || scores["node-c"] != 10 {
		t.Errorf("Prioritize = %v, %v; want node-c 10", scores, err)
	}
}
