package stall_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// rwxBound bounds an RWX claim's pod, from its creation to running, by
// Longhorn's own periods (longhorn-manager v1.12.0's files unless named):
//   - Longhorn's share manager controller does not watch VolumeAttachments,
//     only share managers, volumes and share-manager pods, and only its
//     ShareManager handler resyncs (controller/share_manager_controller.go:101-126;
//     the informers' period is 30 s, util/client/client.go:95): it may see
//     the pod's csi-attacher ticket only at the volume's next change or that
//     resync. It then creates the share manager pod and, once
//     kube-scheduler placed it, its own attachment ticket on that pod's
//     node (share_manager_controller.go:520-564), each on a watch;
//   - the volume is attached there once Longhorn's engine monitor polled
//     its engine (EnginePollInterval, 5 s: controller/engine_controller.go:58);
//   - the share manager's daemon looks for the volume's device every 5 s
//     (longhorn-share-manager v1.12.0 pkg/server/share_manager.go:32,
//     waitBetweenChecks) and starts NFS-Ganesha once it is there; the pod's
//     readiness probe then passes (the sandbox's kubelet probes every
//     100 ms; a kubelet runs this probe every 5 s after 3 s,
//     datastore/kubernetes.go:42-44, which a cluster adds), and the share
//     manager controller writes the share running with its endpoint on the
//     pod's event (share_manager_controller.go:441-479, 980-990), which the
//     volume controller copies to the volume
//     (controller/volume_controller.go:6122-6123) and the pod's kubelet
//     waits for, as Longhorn's CSI node server does.
//
// 30 s + 5 s + 5 s, and 15 s more for a loaded machine.
const rwxBound = 30*time.Second + 5*time.Second + 5*time.Second + 15*time.Second

// rwxClass is a StorageClass of RWX volumes: two replicas, best-effort data
// locality (which for an RWO volume makes the extender reserve a replica's
// space on the pod's node), immediate binding, and the share manager pinned
// to shareNode by Longhorn's own class parameter (shareManagerNodeSelector,
// share_manager_controller.go:1068-1081).
func rwxClass(shareNode string) *storagev1.StorageClass {
	class := sandbox.StorageClass()
	class.ObjectMeta = metav1.ObjectMeta{Name: "longhorn-rwx"}
	class.Parameters = map[string]string{
		simcluster.ParamNumberOfReplicas: "2",
		simcluster.ParamDataLocality:     string(lhv1.DataLocalityBestEffort),
		"shareManagerNodeSelector":       corev1.LabelHostname + ":" + shareNode,
	}
	class.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
	return class
}

// reservationWatch records every DiskSchedule version that reserves space
// for a volume (spec.reservations or status.reservations).
type reservationWatch struct {
	mu   sync.Mutex
	seen []string
	stop context.CancelFunc
	done chan error
}

// watchReservations watches every DiskSchedule for a reservation of volume
// until stop.
func watchReservations(ctx context.Context, t *testing.T, c client.WithWatch, volume string) *reservationWatch {
	t.Helper()
	w, err := c.Watch(ctx, &dsv1.DiskScheduleList{}, client.InNamespace(sandbox.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	rw := &reservationWatch{stop: cancel, done: make(chan error, 1)}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-wctx.Done():
				rw.done <- nil
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					rw.done <- fmt.Errorf("the DiskSchedule watch ended")
					return
				}
				if ev.Type == watch.Error {
					continue
				}
				ds, ok := ev.Object.(*dsv1.DiskSchedule)
				if !ok {
					continue
				}
				_, inSpec := ds.Spec.Reservations[volume]
				_, inStatus := ds.Status.Reservations[volume]
				if inSpec || inStatus {
					rw.mu.Lock()
					rw.seen = append(rw.seen, fmt.Sprintf("%s/%s at resourceVersion %s: spec %+v, status %+v",
						ds.Spec.NodeID, ds.Spec.Name, ds.ResourceVersion, ds.Spec.Reservations[volume], ds.Status.Reservations[volume]))
					rw.mu.Unlock()
				}
			}
		}
	}()
	return rw
}

// end stops the watch and returns the reservations it saw.
func (rw *reservationWatch) end() ([]string, error) {
	rw.stop()
	err := <-rw.done
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.seen, err
}

// setDiskScheduling allows or disallows Longhorn to schedule replicas to
// node's disks, as an operator does on the Longhorn Node.
func (e *longhornEnv) setDiskScheduling(ctx context.Context, t *testing.T, node string, allow bool) {
	t.Helper()
	n := &lhv1.Node{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: node}, n); err != nil {
		t.Fatal(err)
	}
	for name, d := range n.Spec.Disks {
		d.AllowScheduling = allow
		n.Spec.Disks[name] = d
	}
	if err := e.c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// TestRWXStall: a pod using an RWX claim (two replicas, best-effort data
// locality), placed by kube-scheduler through the extender on node-1,
// whose disk takes no replica, while Longhorn's share manager for the
// volume is pinned to node-2 by its class. Longhorn's share manager
// controller creates the share manager pod, attaches the volume on the
// pod's node through its own ticket, the replicas are placed (the gate
// granting each on its disk's ledger) and started, the share manager's
// daemon finds the volume's device there and starts its NFS server, and
// Longhorn writes the share running with its endpoint: the pod runs within
// rwxBound of its creation. The extender asks nothing of the pod's node for
// the volume (DESIGN §6): the pod goes to a node that cannot hold a
// replica, and no ledger ever holds a reservation for the volume. When the
// pod goes, Longhorn stops the share manager, deletes its pod and detaches
// the volume. Every ledger's invariant is watched, and every ledger settles
// on what Longhorn persisted.
func TestRWXStall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel()
	// kube-scheduler calls the extender for the pods that ask for it.
	e := startLonghorn(t, func(o *sandbox.Options) { o.Extender = true })
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const (
		podNode   = "node-1"
		shareNode = "node-2"
		size      = 100 * gib
	)
	e.setDiskScheduling(ctx, t, podNode, false)
	class := rwxClass(shareNode)
	if err := e.c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shared"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: ptr.To(class.Name),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}},
		},
	}
	if err := e.c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	vol := simcluster.VolumeName(pvc)
	testenv.Eventually(t, ctx, time.Minute, "the claim bound to its RWX volume", func(ctx context.Context) (bool, string, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		v := &lhv1.Volume{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, v); err != nil {
			return false, err.Error(), nil
		}
		return pvc.Status.Phase == corev1.ClaimBound && v.Spec.AccessMode == lhv1.AccessModeReadWriteMany,
			fmt.Sprintf("claim %s, volume access mode %s", pvc.Status.Phase, v.Spec.AccessMode), nil
	}, testenv.RetryErrors())
	reservations := watchReservations(ctx, t, e.c, vol)

	// The pod asks for the extender (its resource), as an opted-in pod
	// does, and for node-1.
	one := resource.MustParse("1")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shared"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: podNode},
			Containers: []corev1.Container{{Name: "app", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{simcluster.ExtendedResource: one},
				Limits:   corev1.ResourceList{simcluster.ExtendedResource: one},
			}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
			}}},
		},
	}
	start := time.Now()
	if err := e.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	tl := newTimeline(start)
	smPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: sandbox.Namespace, Name: lhtypes.GetShareManagerPodNameFromShareManagerName(vol)}}
	var v lhv1.Volume
	testenv.Eventually(t, ctx, 2*rwxBound, "the pod running on its RWX volume's share", func(ctx context.Context) (bool, string, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		tl.see("kube-scheduler bound the pod to "+podNode, pod.Spec.NodeName == podNode)
		state := []string{fmt.Sprintf("pod %s on %q", pod.Status.Phase, pod.Spec.NodeName)}
		sm := &lhv1.ShareManager{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, sm); err == nil {
			tl.see("share manager "+string(sm.Status.State), sm.Status.State != "")
			tl.see("share manager endpoint set", sm.Status.Endpoint != "")
			state = append(state, fmt.Sprintf("share manager %s owner %s endpoint %q", sm.Status.State, sm.Status.OwnerID, sm.Status.Endpoint))
		}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(smPod), smPod); err == nil {
			tl.see("share manager pod created", true)
			tl.see("share manager pod on "+smPod.Spec.NodeName, smPod.Spec.NodeName != "")
			tl.see("share manager pod running", smPod.Status.Phase == corev1.PodRunning)
			ready := false
			for _, c := range smPod.Status.Conditions {
				ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}
			tl.see("share manager pod ready (its NFS server runs)", ready)
			state = append(state, fmt.Sprintf("share manager pod %s on %q ready %t", smPod.Status.Phase, smPod.Spec.NodeName, ready))
		}
		va := &lhv1.VolumeAttachment{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, va); err == nil {
			for _, ticket := range va.Spec.AttachmentTickets {
				tl.see(fmt.Sprintf("%s ticket for %s", ticket.Type, ticket.NodeID), true)
			}
		}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, &v); err != nil {
			return false, "", err
		}
		tl.see(fmt.Sprintf("volume attached on %s", v.Status.CurrentNodeID), v.Status.State == lhv1.VolumeStateAttached)
		for _, r := range e.replicas(ctx, t, vol) {
			g, err := e.granted(ctx, r.Spec.DiskID, r.Name)
			if err != nil {
				return false, "", err
			}
			tl.see(fmt.Sprintf("replica on %s granted", r.Spec.NodeID), g == size)
			tl.see(fmt.Sprintf("replica on %s running", r.Spec.NodeID), r.Status.CurrentState == lhv1.InstanceStateRunning)
			state = append(state, fmt.Sprintf("replica %s on %s/%s %s granted %d", r.Name, r.Spec.NodeID, r.Spec.DiskID, r.Status.CurrentState, g))
		}
		tl.see("volume share "+string(v.Status.ShareState), v.Status.ShareState != "")
		state = append(state, fmt.Sprintf("volume %s on %q share %s %q", v.Status.State, v.Status.CurrentNodeID, v.Status.ShareState, v.Status.ShareEndpoint))
		return pod.Status.Phase == corev1.PodRunning, strings.Join(state, "; "), nil
	}, testenv.Every(100*time.Millisecond), testenv.RetryErrors())
	stall := time.Since(start)
	tl.see("the pod running", true)
	t.Logf("RWX volume %s: pod running on %s, the volume attached on %s for its share manager, in %s (bound %s); what was seen:%s",
		vol, pod.Spec.NodeName, v.Status.CurrentNodeID, stall.Round(10*time.Millisecond), rwxBound, tl)
	if stall > rwxBound {
		t.Errorf("the RWX claim's pod was stalled %s, over its bound %s", stall, rwxBound)
	}
	if v.Status.CurrentNodeID != shareNode || smPod.Spec.NodeName != shareNode {
		t.Errorf("volume attached on %q, share manager pod on %q: want both on the share manager's node %s", v.Status.CurrentNodeID, smPod.Spec.NodeName, shareNode)
	}
	if !strings.HasPrefix(v.Status.ShareEndpoint, "nfs://") {
		t.Errorf("the volume's share endpoint is %q, want Longhorn's nfs://", v.Status.ShareEndpoint)
	}
	for _, r := range e.replicas(ctx, t, vol) {
		if r.Spec.NodeID == podNode {
			t.Errorf("replica %s on %s, whose disk takes no replica", r.Name, podNode)
		}
	}
	// Every write of Longhorn's fitted its disk: the gate refused none.
	if denied := e.gateDenials(t); len(denied) > 0 {
		t.Errorf("the gate refused %d of Longhorn's writes, each of which fitted its disk:\n%s", len(denied), strings.Join(denied, "\n"))
	}
	seen, err := reservations.end()
	if err != nil {
		t.Error(err)
	}
	if len(seen) > 0 {
		t.Errorf("the extender reserved space for the RWX volume %s, which Longhorn attaches on its share manager's node:\n%s", vol, strings.Join(seen, "\n"))
	}

	// The pod goes: its csi-attacher ticket is removed, and Longhorn stops
	// the share manager (Unmount, its ticket removed, its pod deleted) and
	// detaches the volume.
	if err := e.c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	testenv.Eventually(t, ctx, 2*rwxBound, "the share manager stopped, its pod gone and the volume detached", func(ctx context.Context) (bool, string, error) {
		sm := &lhv1.ShareManager{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, sm); err != nil {
			return false, "", err
		}
		err := e.c.Get(ctx, client.ObjectKeyFromObject(smPod), &corev1.Pod{})
		smPodGone := apierrors.IsNotFound(err)
		if err != nil && !smPodGone {
			return false, "", err
		}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, &v); err != nil {
			return false, "", err
		}
		return sm.Status.State == lhv1.ShareManagerStateStopped && smPodGone && v.Status.State == lhv1.VolumeStateDetached,
			fmt.Sprintf("share manager %s, its pod gone %t, volume %s", sm.Status.State, smPodGone, v.Status.State), nil
	}, testenv.RetryErrors())
	t.Logf("the pod deleted: share manager stopped, its pod gone and the volume detached in %s", time.Since(stopped).Round(10*time.Millisecond))

	// The operator lets node-1's disk take replicas again: its ledger is
	// Ready, and the ledgers settle.
	e.setDiskScheduling(ctx, t, podNode, true)
}
