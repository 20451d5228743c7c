package stall_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// pendingExpansionBound bounds the stall of a volume placed by Longhorn
// from its count of a disk before an expansion there: every step that ends
// it is triggered by a watch of Longhorn's, none by a period. Longhorn's
// volume controller writes the volume's new size into its replicas in the
// sync the volume's update brings (controller/volume_controller.go:1753,
// reconcileVolumeSize, 2865-2868); its node controller, which watches
// Replicas (controller/node_controller.go:135-141), counts the replica at
// its new spec.volumeSize (node_controller.go:970) and writes the Node; the
// Node's change brings back every volume with an unscheduled replica
// (controller/volume_controller.go:206-209, enqueueNodeChange, 6215-6248),
// whose scheduler then finds no candidate. Seconds, with room for a loaded
// machine: nextView.
const pendingExpansionBound = nextView

// TestPendingExpansionStall: the pending-expansion window on Longhorn's
// own controllers. A pod runs on a 200Gi claim (one replica, on its node's
// 400Gi disk); the claim is expanded to 300Gi, which Longhorn's claim
// validator and its API (VolumeManager.Expand, through the CSI resizer)
// check against Longhorn's count of the disk and which the gate grants
// when the Volume's spec.size grows; a 150Gi volume that only that disk
// matches (a node tag) is created at the same moment. Longhorn counts the
// growth only once its volume controller wrote the new size into the
// replica and its node controller counted it: a placement its scheduler
// makes from the older count (200Gi + 150Gi fit 400Gi) is denied by the
// ledger (300Gi + 150Gi do not), and the stall ends at Longhorn's next view
// of the disk, with Longhorn's own Scheduled=False for the new volume,
// within pendingExpansionBound. Three times in one sandbox, one disk each,
// the new volume created:
//
//   - "with the claim's expansion": at once with the claim's update;
//   - "with the volume's growth": the moment the Volume's spec.size is seen
//     at 300Gi (the gate granted it), the start of the window;
//   - "before the expansion": first, the claim's update the moment
//     Longhorn's volume controller created the new volume's engine, the
//     write before it creates and places its replica.
//
// Whichever lands first decides: the growth (the new volume ends with
// Longhorn's Scheduled=False, the claim at 300Gi) or the new replica (it is
// placed, and the expansion refused, by Longhorn's own checks or by the
// gate; the claim stays at 200Gi; never when the new volume is created
// after the growth). Each stall is bounded by pendingExpansionBound; no
// disk ever holds more than its limit (a watch of every Replica), no ledger
// version breaks the invariant and every ledger settles on what Longhorn
// persisted.
func TestPendingExpansionStall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel()
	rec := newRecorder()
	e := startLonghorn(t, func(o *sandbox.Options) { o.OnRefusedWrite = rec.refusedWrite })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rec.follow(ctx, t, e.c)
	wctx, wcancel := context.WithCancel(context.Background())
	t.Cleanup(wcancel)

	t.Run("with the claim's expansion", func(t *testing.T) { pendingExpansion(ctx, wctx, t, e, rec, "claim", "node-1") })
	t.Run("with the volume's growth", func(t *testing.T) { pendingExpansion(ctx, wctx, t, e, rec, "growth", "node-2") })
	t.Run("before the expansion", func(t *testing.T) { pendingExpansion(ctx, wctx, t, e, rec, "engine", "node-3") })
	rec.mu.Lock()
	over := append([]string(nil), rec.over...)
	rec.mu.Unlock()
	for _, o := range over {
		t.Errorf("persisted over a disk's limit: %s", o)
	}
}

// The moments of pendingExpansion's new volume.
const (
	stepGrown    = "volume at 300Gi"
	stepEngine   = "new volume's engine created"
	stepCounted  = "Longhorn counts 300Gi"
	stepReplica  = "new volume's replica created"
	stepCreated  = "new volume created"
	stepAnswered = "claim's update answered"
)

// pendingExpansion runs one case of TestPendingExpansionStall on node: a
// pod on a 200Gi claim named name, its claim expanded to 300Gi and a
// 150Gi volume on node created at the moment named by name: "claim" (at
// once), "growth" (once the Volume's spec.size is seen at 300Gi) or
// "engine" (first; the expansion once Longhorn created its engine).
func pendingExpansion(ctx, wctx context.Context, t *testing.T, e *longhornEnv, rec *recorder, name, node string) {
	pvc := e.runPodOn(ctx, t, name, "200Gi", node)
	grown := simcluster.VolumeName(pvc)
	rs := e.replicas(ctx, t, grown)
	if len(rs) != 1 || rs[0].Spec.NodeID != node {
		t.Fatalf("volume %s: %d replicas, want one on %s", grown, len(rs), node)
	}
	disk := rs[0].Spec.DiskID
	tag := "expand-" + name
	e.tagNode(ctx, t, node, tag)
	v := taggedVolume(t, "late-"+name, 150*gib, tag)
	late := v.Name
	tl := watchDisk(wctx, t, e.c, grown, disk, late)

	create := func() {
		if err := e.c.Create(ctx, v); err != nil {
			t.Errorf("creating volume %s: %v", late, err)
		}
		tl.mark(stepCreated)
	}
	var expandErr error
	expand := func() {
		_, expandErr = sandboxtest.SetClaimRequest(ctx, e.c, pvc, "300Gi")
		tl.mark(stepAnswered)
	}
	// The expansion, as a user asks it: Longhorn's claim validator, the
	// resizer, Longhorn's API.
	start := time.Now()
	switch name {
	case "claim":
		var wg sync.WaitGroup
		wg.Go(expand)
		wg.Go(create)
		wg.Wait()
	case "growth":
		expand()
		if expandErr != nil {
			t.Fatalf("expanding claim %s to 300Gi: %v", pvc.Name, expandErr)
		}
		start = tl.wait(ctx, t, stepGrown)
		create()
	case "engine":
		create()
		tl.wait(ctx, t, stepEngine)
		expand()
	}

	placed := waitSettled(ctx, t, rec, []string{late}, nextView+resync)
	ss := report(t, rec, []string{late}, pendingExpansionBound)
	rec.mu.Lock()
	refused := append([]time.Time(nil), rec.refused[late]...)
	placedAt, isPlaced := rec.placed[late]
	unsched := append([]time.Time(nil), rec.unsched[late]...)
	rec.mu.Unlock()
	if len(refused) > 0 {
		tl.at("first refusal of the new volume's replica", refused[0])
		tl.at("last refusal of the new volume's replica", refused[len(refused)-1])
	}
	if isPlaced {
		tl.at("new volume's replica placed", placedAt)
	}
	if len(unsched) > 0 {
		tl.at("Scheduled=False for the new volume", unsched[0])
	}

	if placed == 0 {
		// The growth landed first: Longhorn's own no for the new volume,
		// the claim at 300Gi.
		if n := unschedulable(ctx, t, e.c, []string{late}); n != 1 {
			t.Errorf("the 150Gi volume must end with Longhorn's own Scheduled=False, %d of 1 do", n)
		}
		if expandErr != nil {
			t.Errorf("the claim's expansion was refused (%v), yet the new volume was not placed", expandErr)
		}
		testenv.Eventually(t, ctx, longhornStallBound, "the claim at 300Gi, its replica granted 300Gi and counted so by Longhorn", func(ctx context.Context) (bool, string, error) {
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
				return false, "", err
			}
			capacity := pvc.Status.Capacity[corev1.ResourceStorage]
			g, err := e.granted(ctx, disk, rs[0].Name)
			if err != nil {
				return false, "", err
			}
			counted := tl.seen(stepCounted)
			return capacity.Value() == 300*gib && g == 300*gib && counted, fmt.Sprintf("claim %s, replica granted %s, Longhorn counted 300Gi %t",
				capacity.String(), ledger.Bytes(g), counted), nil
		}, testenv.RetryErrors())
		tl.mark("claim at 300Gi")
		if len(ss) > 0 {
			t.Logf("%s: the growth landed first; the new volume's placement was refused, and Longhorn's next view said no", name)
		} else {
			t.Logf("%s: the growth landed first; the new volume was never refused: Longhorn counted the grown replica before it placed the new one", name)
		}
	} else {
		if name == "growth" {
			t.Errorf("the 150Gi volume was placed next to the 300Gi one on a 400Gi disk")
		}
		// The new replica landed first: the expansion is refused, by
		// Longhorn's claim validator, its API or the gate; the claim, the
		// volume and its replica stay at 200Gi.
		why := ""
		if expandErr != nil {
			why = expandErr.Error()
		} else {
			testenv.Eventually(t, ctx, longhornStallBound, "the claim's expansion refused", func(ctx context.Context) (bool, string, error) {
				if err := e.c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
					return false, "", err
				}
				for _, c := range pvc.Status.Conditions {
					if c.Type == corev1.PersistentVolumeClaimControllerResizeError {
						why = c.Message
						return true, "", nil
					}
				}
				capacity := pvc.Status.Capacity[corev1.ResourceStorage]
				return false, "claim at " + capacity.String(), nil
			}, testenv.RetryErrors())
			tl.mark("claim's expansion refused")
		}
		vol := &lhv1.Volume{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: grown}, vol); err != nil {
			t.Fatal(err)
		}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			t.Fatal(err)
		}
		capacity := pvc.Status.Capacity[corev1.ResourceStorage]
		rs = e.replicas(ctx, t, grown)
		if len(rs) != 1 {
			t.Fatalf("%d replicas of volume %s, want 1", len(rs), grown)
		}
		if vol.Spec.Size != 200*gib || capacity.Value() != 200*gib || rs[0].Spec.VolumeSize != 200*gib {
			t.Errorf("after the refused expansion: volume %s, claim %s, replica %s; want all at 200Gi",
				ledger.Bytes(vol.Spec.Size), capacity.String(), ledger.Bytes(rs[0].Spec.VolumeSize))
		}
		t.Logf("%s: the new volume's replica landed first; the expansion was refused: %s", name, why)
	}
	t.Logf("%s, from %s: %s", name, start.Format("15:04:05.000"), tl.since(start))
}

// runPodOn runs a pod on node on a claim of size of the default class
// (one replica, best-effort data locality), as sandboxtest.RunPod does, and
// returns the claim.
func (e *longhornEnv) runPodOn(ctx context.Context, t *testing.T, name, size, node string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(sandbox.StorageClassName),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
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
	for _, o := range []client.Object{pvc, pod} {
		if err := e.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	vol := simcluster.VolumeName(pvc)
	testenv.Eventually(t, ctx, 2*time.Minute, "pod "+name+" running on its attached, healthy volume", func(ctx context.Context) (bool, string, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		v := &lhv1.Volume{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, v); err != nil {
			return false, err.Error(), nil
		}
		return pod.Status.Phase == corev1.PodRunning && v.Status.State == lhv1.VolumeStateAttached && v.Status.Robustness == lhv1.VolumeRobustnessHealthy,
			fmt.Sprintf("pod %s on %q, volume %s %s", pod.Status.Phase, pod.Spec.NodeName, v.Status.State, v.Status.Robustness), nil
	})
	return pvc
}

// taggedVolume returns the one-replica Longhorn Volume of size on the
// nodes tagged tag that the Longhorn CSI driver creates for a claim
// (simcluster.VolumeFor).
func taggedVolume(t *testing.T, name string, size int64, tag string) *lhv1.Volume {
	t.Helper()
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "driver.longhorn.io",
		Parameters: map[string]string{simcluster.ParamNumberOfReplicas: "1", simcluster.ParamNodeSelector: tag}}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}}},
	}
	v, err := simcluster.VolumeFor(pvc, class, sandbox.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// diskTimeline records when the steps of an expansion were first seen:
// the volume's spec.size, its replica's spec.volumeSize, Longhorn's count
// of the disk.
type diskTimeline struct {
	mu    sync.Mutex
	steps map[string]time.Time
	ch    chan struct{}
}

// watchDisk watches the Volumes, Engines, Replicas and Longhorn Nodes
// until ctx ends, recording the steps of vol's growth to 300Gi on disk and
// the creation of volume late's engine and replica.
func watchDisk(ctx context.Context, t *testing.T, c client.WithWatch, vol, disk, late string) *diskTimeline {
	t.Helper()
	tl := &diskTimeline{steps: map[string]time.Time{}, ch: make(chan struct{}, 1)}
	sandboxtest.WatchEach(ctx, t, c, func(obj runtime.Object, _ bool, at time.Time) {
		switch o := obj.(type) {
		case *lhv1.Volume:
			if o.Name == vol && o.Spec.Size == 300*gib {
				tl.at(stepGrown, at)
			}
		case *lhv1.Engine:
			if o.Spec.VolumeName == late {
				tl.at(stepEngine, at)
			}
		case *lhv1.Replica:
			if o.Spec.VolumeName == vol && o.Spec.DiskID == disk && o.Spec.VolumeSize == 300*gib {
				tl.at("replica at 300Gi", at)
			}
			if o.Spec.VolumeName == late {
				tl.at(stepReplica, at)
			}
		case *lhv1.Node:
			for _, d := range o.Status.DiskStatus {
				if d.DiskUUID == disk && d.StorageScheduled == 300*gib {
					tl.at(stepCounted, at)
				}
			}
		}
	}, &lhv1.VolumeList{}, &lhv1.EngineList{}, &lhv1.ReplicaList{}, &lhv1.NodeList{})
	return tl
}

// at records step at the time given, if it was not seen before.
func (tl *diskTimeline) at(step string, at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.steps[step]; !ok {
		tl.steps[step] = at
		select {
		case tl.ch <- struct{}{}:
		default:
		}
	}
}

// mark records step now.
func (tl *diskTimeline) mark(step string) { tl.at(step, time.Now()) }

// seen reports whether step was seen.
func (tl *diskTimeline) seen(step string) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	_, ok := tl.steps[step]
	return ok
}

// wait waits until step is seen and returns when.
func (tl *diskTimeline) wait(ctx context.Context, t *testing.T, step string) time.Time {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 2*longhornStallBound)
	defer cancel()
	for {
		tl.mu.Lock()
		at, ok := tl.steps[step]
		tl.mu.Unlock()
		if ok {
			return at
		}
		select {
		case <-tl.ch:
		case <-wctx.Done():
			t.Fatalf("waiting for %q: %v", step, wctx.Err())
		}
	}
}

// since lists the steps in order, each as the time since start.
func (tl *diskTimeline) since(start time.Time) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	names := make([]string, 0, len(tl.steps))
	for n := range tl.steps {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return tl.steps[names[i]].Before(tl.steps[names[j]]) })
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, fmt.Sprintf("%s %s", n, tl.steps[n].Sub(start).Round(time.Millisecond)))
	}
	return strings.Join(out, ", ")
}
