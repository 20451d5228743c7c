package stall_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// backingImageFirstStartBound bounds a backing-image volume's first start
// on a disk without the image's copy by Longhorn's own steps: the volume
// attached and its replica placed, the copy added to the image's
// spec.diskFileSpecMap when the replica starts, the disk's backing-image
// manager created and its pod running, the copy synced from the first
// copy's manager, seen by the manager's monitor (its tick,
// engineapi.MinPollCount × PollInterval = 1 s, once the manager's watch
// said a file changed) and by the backing image controller, the replica
// started, the engine started, the volume attached. Each step is an
// informer event or that 1 s tick, none the 30 s resync: the bound is that
// resync, for a loaded machine (longhornStallBound).
const backingImageFirstStartBound = longhornStallBound

// TestBackingImageFirstStartStall: a volume of a backing image (download,
// minNumberOfCopies 1) whose replica Longhorn places on a disk with no copy
// of the image: when the replica starts, Longhorn's replica controller adds
// the disk to the image's spec.diskFileSpecMap, which the gate asks of the
// ledger at the image's realSize. Two such volumes, one after the other, on
// the two nodes without the image's first copy:
//
//   - "fits": the replica and the copy together nearly fill the disk (388Gi
//     and 10Gi of 400Gi); the copy is granted at realSize, not adopted, and
//     no disk is over its limit;
//   - "over the limit": the replica fills the disk so that the copy does not
//     fit beside it (395Gi and 10Gi of 400Gi). Longhorn's scheduler counts
//     the volume's size alone (scheduler/replica_scheduler.go:578,
//     IsSchedulableToDisk(volume.Spec.Size, …)) and places it; its replica
//     controller asks for the copy when it starts the replica
//     (controller/replica_controller.go:458-466); the ledger adopts the copy
//     over the limit at realSize (Overcommitted=True, "adopted over the
//     limit: replica …") rather than refuse it, so the replica starts, and
//     Longhorn's own node controller counts the same 405Gi on the disk.
//
// In both, the pod runs, with the copy ready on the replica's disk, within
// backingImageFirstStartBound of its creation, the gate refuses none of
// Longhorn's writes, the ledger watch sees no version break the invariant,
// and every ledger settles on what Longhorn persisted.
func TestBackingImageFirstStartStall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel()
	e := startLonghorn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const (
		image    = "bi-first-start"
		copySize = 10 * gib
		fitSize  = 388 * gib // with the copy, 398Gi of the 400Gi disk
		overSize = 395 * gib // with the copy, 405Gi of the 400Gi disk
	)
	bi := &lhv1.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: sandbox.Namespace, Name: image},
		Spec: lhv1.BackingImageSpec{
			SourceType: lhv1.BackingImageDataSourceTypeDownload,
			SourceParameters: map[string]string{
				lhv1.DataSourceTypeDownloadParameterURL: "http://images.invalid/" + image + ".raw",
				dataplane.SourceParamSize:               resource.NewQuantity(copySize, resource.BinarySI).String(),
			},
			MinNumberOfCopies: 1,
			DataEngine:        lhv1.DataEngineTypeV1,
		},
	}
	if err := e.c.Create(ctx, bi); err != nil {
		t.Fatal(err)
	}
	// The image's first copy: prepared by its data source on a disk
	// Longhorn picks, taken over by that disk's backing-image manager.
	var first string
	testenv.Eventually(t, ctx, 2*time.Minute, "the image's first copy ready, at its real size", func(ctx context.Context) (bool, string, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(bi), bi); err != nil {
			return false, "", err
		}
		for uuid, st := range bi.Status.DiskFileStatusMap {
			if st.State == lhv1.BackingImageStateReady {
				first = uuid
			}
		}
		return first != "" && bi.Status.RealSize == copySize, fmt.Sprintf("real size %d, files %s", bi.Status.RealSize, fileStates(bi)), nil
	}, testenv.RetryErrors())
	firstNode := e.diskNode(ctx, t, first)
	t.Logf("first copy of %s ready on %s/%s", image, firstNode, first)

	// Each volume's replica goes to another node, tagged for it as an
	// operator would; its pod runs there (best-effort data locality).
	var targets []string
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		if n != firstNode {
			targets = append(targets, n)
		}
	}

	disk, _ := e.firstStart(ctx, t, image, "first-start", targets[0], fitSize)
	if disk == first {
		t.Fatalf("the replica went to the disk of the image's first copy %s: the case needs another disk", first)
	}
	// The copy was granted at the image's real size, not adopted over the
	// limit.
	ds := &dsv1.DiskSchedule{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: disk}, ds); err != nil {
		t.Fatal(err)
	}
	st, ok := ds.Status.BackingImages[image]
	if !ok || st.State != dsv1.RequestStateScheduled || st.ScheduledSize != copySize || strings.HasPrefix(st.Message, "adopted") {
		t.Errorf("the copy of %s on %s: ledger %+v, want granted (not adopted) at the image's real size %d", image, disk, st, copySize)
	}
	if meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionOvercommitted) {
		t.Errorf("disk %s is overcommitted: %s of limit %s", disk, ledger.Bytes(ds.Status.StorageScheduled), ledger.Bytes(ds.Status.StorageLimit))
	}

	over, overVol := e.firstStart(ctx, t, image, "over-limit", targets[1], overSize)
	running := time.Now()
	if over == first || over == disk {
		t.Fatalf("the replica of the volume that fills its disk went to %s, which holds another copy: the case needs a disk of its own", over)
	}
	// The copy did not fit beside the replica: adopted over the limit at
	// the image's real size for the replica that needs it, as Longhorn
	// counts it, rather than refused.
	rs := e.replicas(ctx, t, overVol)
	if len(rs) != 1 {
		t.Fatalf("%d replicas of the volume that fills its disk, want 1", len(rs))
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: over}, ds); err != nil {
		t.Fatal(err)
	}
	st = ds.Status.BackingImages[image]
	if st.State != dsv1.RequestStateScheduled || st.ScheduledSize != copySize || !strings.Contains(st.Message, "adopted over the limit: replica "+rs[0].Name) {
		t.Errorf("the copy of %s on %s: ledger %+v, want adopted over the limit at the image's real size %d for replica %s", image, over, st, copySize, rs[0].Name)
	}
	if ds.Status.StorageScheduled != overSize+copySize || !meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionOvercommitted) {
		t.Errorf("ledger of %s: %s of limit %s, conditions %+v: want %s, Overcommitted=True", over, ledger.Bytes(ds.Status.StorageScheduled),
			ledger.Bytes(ds.Status.StorageLimit), ds.Status.Conditions, ledger.Bytes(overSize+copySize))
	}
	t.Logf("the copy on %s/%s: %s; ledger %s of limit %s", targets[1], over, st.Message, ledger.Bytes(ds.Status.StorageScheduled), ledger.Bytes(ds.Status.StorageLimit))

	// Every write of Longhorn's was admitted: the gate refused none.
	if denied := e.gateDenials(t); len(denied) > 0 {
		t.Errorf("the gate refused %d of Longhorn's writes:\n%s", len(denied), strings.Join(denied, "\n"))
	}
	// Longhorn's own count: the disk the replica filled holds 405Gi by its
	// node controller too (the copy counted once it syncs the node: on a
	// replica's change there or its disk monitor's next collection, 30 s),
	// and no other disk is over its limit.
	testenv.Eventually(t, ctx, time.Minute, "Longhorn's own count of the disk the replica filled at 405Gi", func(ctx context.Context) (bool, string, error) {
		nodes := &lhv1.NodeList{}
		if err := e.c.List(ctx, nodes, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		var off []string
		done := false
		for _, n := range nodes.Items {
			for name, d := range n.Status.DiskStatus {
				limit := d.StorageMaximum - n.Spec.Disks[name].StorageReserved
				if d.DiskUUID == over {
					done = d.StorageScheduled == overSize+copySize
					off = append(off, fmt.Sprintf("%s/%s: Longhorn counts %s", n.Name, name, ledger.Bytes(d.StorageScheduled)))
					continue
				}
				if d.StorageScheduled > limit {
					return false, "", fmt.Errorf("Longhorn counts %s scheduled on %s/%s, over its limit %s", ledger.Bytes(d.StorageScheduled), n.Name, name, ledger.Bytes(limit))
				}
			}
		}
		return done, strings.Join(off, "; "), nil
	}, testenv.Every(200*time.Millisecond))
	t.Logf("Longhorn's node controller counted %s on %s/%s within %s of the pod running", ledger.Bytes(overSize+copySize), targets[1], over,
		time.Since(running).Round(100*time.Millisecond))
}

// firstStart runs a pod on name, a claim of size of the image on node (a
// class selecting node by a tag of its own), measures from the pod's
// creation to the pod running with the copy ready on its replica's disk
// against backingImageFirstStartBound, and returns that disk and the
// volume.
func (e *longhornEnv) firstStart(ctx context.Context, t *testing.T, image, name, node string, size int64) (string, string) {
	t.Helper()
	tag := "bi-" + name
	e.tagNode(ctx, t, node, tag)
	class := sandbox.WaitForFirstConsumerClass()
	class.Name = "longhorn-bi-" + name
	class.Parameters[simcluster.ParamBackingImage] = image
	class.Parameters[simcluster.ParamNodeSelector] = tag
	if err := e.c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class.Name),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers:   []corev1.Container{{Name: "app", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
			}}},
		},
	}
	if err := e.c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	vol := simcluster.VolumeName(pvc)
	bi := &lhv1.BackingImage{}

	// Follow the steps, each the first time it is seen.
	steps := map[string]time.Duration{}
	seen := func(step string, ok bool) {
		if _, done := steps[step]; ok && !done {
			steps[step] = time.Since(start)
		}
	}
	var disk string
	testenv.Eventually(t, ctx, 2*backingImageFirstStartBound, "pod "+name+" running, with the copy ready on its replica's disk", func(ctx context.Context) (bool, string, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: image}, bi); err != nil {
			return false, "", err
		}
		rs := e.replicas(ctx, t, vol)
		state := []string{fmt.Sprintf("pod %s on %q", pod.Status.Phase, pod.Spec.NodeName)}
		running := false
		for _, r := range rs {
			state = append(state, fmt.Sprintf("replica %s on %s/%s %s", r.Name, r.Spec.NodeID, r.Spec.DiskID, r.Status.CurrentState))
			if r.Spec.DiskID != "" {
				disk = r.Spec.DiskID
				seen("replica placed", true)
			}
			running = running || r.Status.CurrentState == lhv1.InstanceStateRunning
		}
		if disk == "" {
			return false, strings.Join(state, "; "), nil
		}
		_, asked := bi.Spec.DiskFileSpecMap[disk]
		seen("copy in the image's spec", asked)
		g, err := e.grantedOf(ctx, disk, ledger.BackingImage, image)
		if err != nil {
			return false, "", err
		}
		seen("copy granted", g == bi.Status.RealSize && g > 0)
		ready := bi.Status.DiskFileStatusMap[disk] != nil && bi.Status.DiskFileStatusMap[disk].State == lhv1.BackingImageStateReady
		seen("copy ready", ready)
		seen("replica running", running)
		state = append(state, fmt.Sprintf("copy on %s asked %t, granted %d, files %s", disk, asked, g, fileStates(bi)))
		return pod.Status.Phase == corev1.PodRunning && ready, strings.Join(state, "; "), nil
	}, testenv.Every(100*time.Millisecond), testenv.RetryErrors())
	stall := time.Since(start)
	seen("pod running", true)
	names := make([]string, 0, len(steps))
	for step := range steps {
		names = append(names, step)
	}
	slices.SortFunc(names, func(a, b string) int { return int(steps[a] - steps[b]) })
	var order []string
	for _, step := range names {
		order = append(order, fmt.Sprintf("%s %s", step, steps[step].Round(10*time.Millisecond)))
	}
	t.Logf("%s, %s of a %s image: pod running with the copy ready on %s in %s (bound %s): %s", name, ledger.Bytes(size),
		ledger.Bytes(bi.Status.RealSize), e.diskNode(ctx, t, disk), stall.Round(10*time.Millisecond), backingImageFirstStartBound, strings.Join(order, ", "))
	if stall > backingImageFirstStartBound {
		t.Errorf("the backing-image volume %s's first start was stalled %s, over its bound %s", name, stall, backingImageFirstStartBound)
	}
	return disk, vol
}

// gateDenials returns the lines of Longhorn's log that report a write the
// gate refused.
func (e *longhornEnv) gateDenials(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.logs, "longhorn-controllers.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "gate.diskschedule.longhorn.io") && strings.Contains(line, "denied the request") {
			out = append(out, line)
		}
	}
	return out
}

// fileStates lists an image's copies and their states.
func fileStates(bi *lhv1.BackingImage) string {
	var out []string
	for uuid, st := range bi.Status.DiskFileStatusMap {
		out = append(out, uuid+"="+string(st.State))
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}

// diskNode returns the node of the disk of uuid.
func (e *longhornEnv) diskNode(ctx context.Context, t *testing.T, uuid string) string {
	t.Helper()
	ds := &dsv1.DiskSchedule{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: uuid}, ds); err != nil {
		t.Fatal(err)
	}
	return ds.Spec.NodeID
}

// tagNode adds tag to the Longhorn Node's tags, as an operator does.
func (e *longhornEnv) tagNode(ctx context.Context, t *testing.T, node, tag string) {
	t.Helper()
	n := &lhv1.Node{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: node}, n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Tags = append(n.Spec.Tags, tag)
	if err := e.c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}
