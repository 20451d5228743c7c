package simlonghorn_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/longhorn/diskschedule/internal/simlonghorn"
	"github.com/longhorn/diskschedule/internal/testenv"
)

// TestBackingImageCopies checks a backing image: its size read from the
// source, one copy for minNumberOfCopies on a disk Longhorn's datastore
// picks (GetReadyNodeDiskForBackingImage: a random ready disk), a copy on the disk of each replica of a volume using it (asked
// for before the replica starts), every copy counted in its disk's
// storageScheduled.
func TestBackingImageCopies(t *testing.T) {
	ns := env.NewNamespace(t)
	n1, n2 := nodeName(ns, "n1"), nodeName(ns, "n2")
	startSim(t, simlonghorn.Options{Namespace: ns, PlaceReplicas: true, Nodes: []simlonghorn.NodeSpec{
		{Name: n1, Disks: []simlonghorn.DiskSpec{{Name: "disk-1", UUID: ns + "-n1d1", Size: 100 * gi}}},
		{Name: n2, Disks: []simlonghorn.DiskSpec{{Name: "disk-1", UUID: ns + "-n2d1", Size: 200 * gi}}},
	}})
	nodesReady(t, ns, n1, n2)
	ctx := context.Background()

	bi := &lhv1.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: "img", Namespace: ns},
		Spec: lhv1.BackingImageSpec{
			SourceType: lhv1.BackingImageDataSourceTypeDownload, SourceParameters: map[string]string{"url": "http://img", "size": "2Gi"},
			MinNumberOfCopies: 1, DataEngine: lhv1.DataEngineTypeV1,
		},
	}
	if err := env.Client.Create(ctx, bi); err != nil {
		t.Fatal(err)
	}
	// One copy, on either disk, ready; counted there.
	first := waitOneCopy(t, ns, "img")
	firstNode := map[string]string{ns + "-n1d1": n1, ns + "-n2d1": n2}[first]
	if firstNode == "" {
		t.Fatalf("the first copy is on disk %s, not a disk of the cluster", first)
	}
	waitImageScheduled(t, ns, firstNode, "img", 2*gi)

	// A volume of the image attached on n1 (best-effort keeps its replica
	// there): its replica's disk gets a copy before the replica runs.
	class := createClass(t, ns, map[string]string{
		simlonghorn.ParamNumberOfReplicas: "1", simlonghorn.ParamBackingImage: "img",
		simlonghorn.ParamDataLocality: string(lhv1.DataLocalityBestEffort),
	})
	pvc, volName := createClaim(t, ns, "data", class, 10)
	podRunning(t, createPod(t, ns, "app", n1, pvc.Name))
	replicaNodes(t, ns, volName, n1)
	want := []string{ns + "-n1d1"}
	if first != ns+"-n1d1" {
		want = append(want, first)
	}
	waitCopies(t, ns, "img", want...)
	waitImageScheduled(t, ns, n1, "img", 2*gi)
	got := &lhv1.BackingImage{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "img"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Size != 2*gi || got.Status.RealSize != 2*gi || got.Status.UUID == "" {
		t.Errorf("backing image status = %+v", got.Status)
	}
	assertRoundTrip(t, got)
}

// waitOneCopy waits until the image's diskFileSpecMap holds one disk, its
// copy ready, and returns the disk's UUID.
func waitOneCopy(t *testing.T, ns, name string) string {
	t.Helper()
	var disk string
	testenv.Eventually(t, t.Context(), 30*time.Second, "one copy of "+name, func(ctx context.Context) (bool, string, error) {
		bi := &lhv1.BackingImage{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, bi); err != nil {
			return false, err.Error(), nil
		}
		for d := range bi.Spec.DiskFileSpecMap {
			disk = d
		}
		st := bi.Status.DiskFileStatusMap[disk]
		return len(bi.Spec.DiskFileSpecMap) == 1 && st != nil && st.State == lhv1.BackingImageStateReady,
			fmt.Sprintf("spec %v, status %v", keys(bi.Spec.DiskFileSpecMap), bi.Status.DiskFileStatusMap), nil
	})
	return disk
}

// waitCopies waits until the image's diskFileSpecMap holds exactly the
// disks, each ready in status.
func waitCopies(t *testing.T, ns, name string, disks ...string) {
	t.Helper()
	testenv.Eventually(t, t.Context(), 30*time.Second, fmt.Sprintf("copies of %s on %v", name, disks), func(ctx context.Context) (bool, string, error) {
		bi := &lhv1.BackingImage{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, bi); err != nil {
			return false, err.Error(), nil
		}
		if len(bi.Spec.DiskFileSpecMap) != len(disks) {
			return false, fmt.Sprintf("spec %v", keys(bi.Spec.DiskFileSpecMap)), nil
		}
		for _, d := range disks {
			st := bi.Status.DiskFileStatusMap[d]
			if _, ok := bi.Spec.DiskFileSpecMap[d]; !ok || st == nil || st.State != lhv1.BackingImageStateReady {
				return false, fmt.Sprintf("spec %v, status %v", keys(bi.Spec.DiskFileSpecMap), bi.Status.DiskFileStatusMap), nil
			}
		}
		return true, "", nil
	})
}

// waitImageScheduled waits until node's disk-1 counts the image at size.
func waitImageScheduled(t *testing.T, ns, node, image string, size int64) {
	t.Helper()
	testenv.Eventually(t, t.Context(), 10*time.Second, "image counted on "+node, func(ctx context.Context) (bool, string, error) {
		n, err := getNode(ctx, ns, node)
		if err != nil {
			return false, err.Error(), nil
		}
		st := n.Status.DiskStatus["disk-1"]
		return st.ScheduledBackingImage[image] == size, fmt.Sprintf("%+v", st), nil
	})
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestBackingImageRealSize checks a backing image whose source declares a
// real size below its size (a sparse file): status.realSize reports it, and
// Longhorn's node controller counts the copy at it, not at the size.
func TestBackingImageRealSize(t *testing.T) {
	ns := env.NewNamespace(t)
	n1 := nodeName(ns, "n1")
	startSim(t, simlonghorn.Options{Namespace: ns, PlaceReplicas: true, Nodes: []simlonghorn.NodeSpec{
		{Name: n1, Disks: []simlonghorn.DiskSpec{{Name: "disk-1", UUID: ns + "-n1d1", Size: 100 * gi}}},
	}})
	nodesReady(t, ns, n1)
	ctx := context.Background()
	bi := &lhv1.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: "sparse", Namespace: ns},
		Spec: lhv1.BackingImageSpec{
			SourceType: lhv1.BackingImageDataSourceTypeDownload,
			SourceParameters: map[string]string{"url": "http://img", simlonghorn.SourceParamSize: "20Gi",
				simlonghorn.SourceParamRealSize: "2Gi"},
			MinNumberOfCopies: 1, DataEngine: lhv1.DataEngineTypeV1,
		},
	}
	if err := env.Client.Create(ctx, bi); err != nil {
		t.Fatal(err)
	}
	waitOneCopy(t, ns, "sparse")
	waitImageScheduled(t, ns, n1, "sparse", 2*gi)
	got := &lhv1.BackingImage{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sparse"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Size != 20*gi || got.Status.RealSize != 2*gi {
		t.Errorf("backing image size %d, realSize %d; want 20Gi and 2Gi", got.Status.Size, got.Status.RealSize)
	}
}
