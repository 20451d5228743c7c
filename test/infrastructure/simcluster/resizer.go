package simcluster

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/longhorn/diskschedule/internal/conditions"
)

// resizeInfeasible reports whether the CSI external-resizer takes err, the
// answer of ControllerExpandVolume, as infeasible (its
// util.IsResizeInfeasibleError): InvalidArgument, OutOfRange and NotFound.
func resizeInfeasible(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.OutOfRange, codes.NotFound:
		return true
	}
	return false
}

// InfeasibleRetry is how long the external resizer leaves a claim whose
// expansion was infeasible before it tries the same size again: its slow
// set keeps the claim for --retry-interval-max, 5 minutes by default. A
// changed request is tried at once.
const InfeasibleRetry = 5 * time.Minute

// EventReasonVolumeResizeFailed is the reason of the Warning Event the
// external resizer puts on a claim whose expansion failed.
const EventReasonVolumeResizeFailed = "VolumeResizeFailed"

// resizer plays the CSI external-resizer, calling Longhorn v1.12.0's own
// CSI ControllerExpandVolume, and the kubelet's node expansion: once
// kube-controller-manager's expander leaves a bound claim that asks for more
// than its capacity to an external controller (driver.longhorn.io is no
// in-tree plugin), it asks Longhorn's driver to expand the volume to the
// claim's request (Longhorn's driver expands it through Longhorn's API —
// Longhorn's own expansion check, then the volume's update, where the
// admission gate decides — and answers once the engine has the new size),
// then sets the PersistentVolume's capacity and the claim's to the size
// the driver answered. The claim's
// status follows the external resizer's RecoverVolumeExpansionFailure flow
// (GA since Kubernetes 1.34): ControllerResizeInProgress with the size in
// allocatedResources while it expands, ControllerResizeInfeasible when
// ControllerExpandVolume answered an infeasible code, cleared once expanded.
type resizer struct {
	sim      *sim
	recorder events.EventRecorder
}

func (r *resizer) setup(mgr ctrl.Manager) error {
	// The external resizer's event source is "external-resizer
	// driver.longhorn.io" (a core/v1 Event); the events API refuses the
	// space in a reporting controller.
	r.recorder = mgr.GetEventRecorder("external-resizer-" + CSIDriver)
	volumeClaims := func(ctx context.Context, volume string) []reconcile.Request {
		claims, err := r.sim.volumeClaims(ctx, volume)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Finding the claims of a volume", "volume", volume)
		}
		out := make([]reconcile.Request, 0, len(claims))
		for _, c := range claims {
			out = append(out, reconcile.Request{NamespacedName: c})
		}
		return out
	}
	return ctrl.NewControllerManagedBy(mgr).Named("simcluster-csi-resizer").
		// The external resizer's --workers default: each waits for its
		// ControllerExpandVolume.
		WithOptions(controller.Options{MaxConcurrentReconciles: resizerWorkers}).
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(claimChanged)).
		Watches(&lhv1.Volume{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return volumeClaims(ctx, o.GetName())
		})).
		Watches(&lhv1.Replica{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return volumeClaims(ctx, o.(*lhv1.Replica).Spec.VolumeName)
		})).
		Complete(reconcile.Func(r.reconcile))
}

// claimChanged passes a claim's updates that can start or end an
// expansion (its request, capacity, phase, volume or deletion), not the
// resizer's own writes of the resize status and conditions.
var claimChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.PersistentVolumeClaim)
	n, ok2 := e.ObjectNew.(*corev1.PersistentVolumeClaim)
	if !ok1 || !ok2 {
		return true
	}
	oReq, nReq := o.Spec.Resources.Requests[corev1.ResourceStorage], n.Spec.Resources.Requests[corev1.ResourceStorage]
	oCap, nCap := o.Status.Capacity[corev1.ResourceStorage], n.Status.Capacity[corev1.ResourceStorage]
	return oReq.Cmp(nReq) != 0 || oCap.Cmp(nCap) != 0 || o.Status.Phase != n.Status.Phase ||
		o.Spec.VolumeName != n.Spec.VolumeName || !o.DeletionTimestamp.Equal(n.DeletionTimestamp)
}}

// reconcile expands the Longhorn volume of a bound claim whose request
// exceeds its capacity, one step per call.
func (r *resizer) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.sim.client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !pvc.DeletionTimestamp.IsZero() || pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return reconcile.Result{}, nil
	}
	want, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pvc.Status.Capacity[corev1.ResourceStorage]
	if !ok || want.Cmp(have) <= 0 {
		return reconcile.Result{}, nil
	}
	pv := &corev1.PersistentVolume{}
	if err := r.sim.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	name := volumeHandle(pv)
	if name == "" || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return reconcile.Result{}, nil
	}
	// The external resizer's slow set: a size found infeasible is not tried
	// again for InfeasibleRetry; a changed request is.
	if wait := infeasibleWait(pvc, want, time.Now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if err := r.markInProgress(ctx, pvc, want); err != nil {
		return requeueOnConflict(err)
	}
	res, err := r.expand(ctx, pvc, pv, name, want.Value())
	if err != nil {
		return requeueOnConflict(err)
	}
	return res, nil
}

// infeasibleWait is how long the claim still waits before its request,
// found infeasible, is tried again: zero unless the claim is marked
// ControllerResizeInfeasible for the size it asks now.
func infeasibleWait(pvc *corev1.PersistentVolumeClaim, want resource.Quantity, now time.Time) time.Duration {
	if pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInfeasible {
		return 0
	}
	if allocated, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; !ok || allocated.Cmp(want) != 0 {
		return 0
	}
	since := now
	if c := conditions.Claim(pvc, corev1.PersistentVolumeClaimControllerResizeError); c != nil {
		since = c.LastTransitionTime.Time
	}
	return InfeasibleRetry - now.Sub(since)
}

// resizeConditions are the claim conditions the external resizer owns.
var resizeConditions = map[corev1.PersistentVolumeClaimConditionType]bool{
	corev1.PersistentVolumeClaimResizing:                true,
	corev1.PersistentVolumeClaimFileSystemResizePending: true,
	corev1.PersistentVolumeClaimControllerResizeError:   true,
	corev1.PersistentVolumeClaimNodeResizeError:         true,
}

// mergeResizeConditions sets the conditions add on the claim, dropping its
// other resize conditions unless keepOld (the external resizer's
// util.MergeResizeConditionsOfPVC).
func mergeResizeConditions(pvc *corev1.PersistentVolumeClaim, keepOld bool, add ...corev1.PersistentVolumeClaimCondition) {
	var out []corev1.PersistentVolumeClaimCondition
	for _, c := range pvc.Status.Conditions {
		if resizeConditions[c.Type] && !keepOld {
			continue
		}
		replaced := false
		for _, a := range add {
			replaced = replaced || a.Type == c.Type
		}
		if !replaced {
			out = append(out, c)
		}
	}
	pvc.Status.Conditions = append(out, add...)
}

// markInProgress marks the claim's expansion to want in progress, as the
// external resizer does before it calls ControllerExpandVolume: the
// Resizing condition, ControllerResizeInProgress and want in
// allocatedResources; a size already allocated keeps its status.
func (r *resizer) markInProgress(ctx context.Context, pvc *corev1.PersistentVolumeClaim, want resource.Quantity) error {
	allocated, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]
	newSize := !ok || allocated.Cmp(want) != 0
	if !newSize && conditions.Claim(pvc, corev1.PersistentVolumeClaimResizing) != nil {
		return nil
	}
	base := pvc.DeepCopy()
	mergeResizeConditions(pvc, !newSize, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
	})
	if newSize {
		if pvc.Status.AllocatedResourceStatuses == nil {
			pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
		}
		pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = corev1.PersistentVolumeClaimControllerResizeInProgress
		if pvc.Status.AllocatedResources == nil {
			pvc.Status.AllocatedResources = corev1.ResourceList{}
		}
		pvc.Status.AllocatedResources[corev1.ResourceStorage] = want
	}
	if err := r.sim.client.Status().Patch(ctx, pvc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("marking the expansion of claim %s in progress: %w", klog.KObj(pvc), err)
	}
	return nil
}

// expand asks Longhorn's CSI driver to expand volume name to size
// (ControllerExpandVolume, as the external resizer asks it: the volume's
// capability of the PersistentVolume's access modes, volume mode, fsType
// and mount options), then gives the PersistentVolume and the claim the
// capacity the driver answered.
func (r *resizer) expand(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, name string, size int64) (reconcile.Result, error) {
	driver, caps, err := r.sim.csi.client(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	volCap, err := csiVolumeCapability(pv.Spec.AccessModes, pv.Spec.VolumeMode, pv.Spec.CSI.FSType, pv.Spec.MountOptions, caps)
	if err != nil {
		return r.failed(ctx, pvc, pv, err)
	}
	ctrl.LoggerFrom(ctx).Info("Expanding the volume", "volume", name, "size", size, "claim", klog.KObj(pvc))
	expandCtx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	rsp, err := driver.ControllerExpandVolume(expandCtx, &csi.ControllerExpandVolumeRequest{
		VolumeId: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: volCap,
	})
	if err != nil {
		return r.failed(ctx, pvc, pv, err)
	}
	expanded := rsp.GetCapacityBytes()
	if expanded < size {
		expanded = size
	}
	capacity := *resource.NewQuantity(expanded, resource.BinarySI)
	if pvCapacity := pv.Spec.Capacity[corev1.ResourceStorage]; pvCapacity.Cmp(capacity) < 0 {
		base := pv.DeepCopy()
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: capacity}
		if err := r.sim.client.Patch(ctx, pv, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, fmt.Errorf("expanding PersistentVolume %s to %d bytes: %w", pv.Name, expanded, err)
		}
	}
	// The expansion finished: the capacity, no resize condition, no
	// resize status (the external resizer's markOverallExpansionAsFinished).
	base := pvc.DeepCopy()
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: capacity}
	mergeResizeConditions(pvc, false)
	delete(pvc.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
	if len(pvc.Status.AllocatedResourceStatuses) == 0 {
		pvc.Status.AllocatedResourceStatuses = nil
	}
	if err := r.sim.client.Status().Patch(ctx, pvc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, fmt.Errorf("expanding claim %s to %d bytes: %w", klog.KObj(pvc), expanded, err)
	}
	ctrl.LoggerFrom(ctx).Info("Expanded the claim", "claim", klog.KObj(pvc), "volume", name, "size", expanded)
	return reconcile.Result{}, nil
}

// failed records ControllerExpandVolume's answer rpcErr as the external
// resizer does: the ControllerResizeError condition, for an infeasible
// code ControllerResizeInfeasible too, and a Warning Event
// VolumeResizeFailed on the claim. They are written only on the claim as
// it was read: a claim that changed since (expanded meanwhile, when the
// cache had not caught up, and its volume since detaching) is looked at
// again. An infeasible size is then left for InfeasibleRetry; any other
// failure is returned and retried with the controller's backoff.
func (r *resizer) failed(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, rpcErr error) (reconcile.Result, error) {
	err := fmt.Errorf("resize volume %q by resizer %q failed: %w", pv.Name, CSIDriver, rpcErr)
	infeasible := resizeInfeasible(rpcErr)
	base := pvc.DeepCopy()
	mergeResizeConditions(pvc, true, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		Message: fmt.Sprintf("failed to expand pvc with %v", rpcErr),
	})
	if infeasible {
		if pvc.Status.AllocatedResourceStatuses == nil {
			pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
		}
		pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = corev1.PersistentVolumeClaimControllerResizeInfeasible
	}
	// A claim the cache had not caught up with (expanded meanwhile, the
	// volume since detaching) is looked at again rather than marked.
	if perr := r.sim.client.Status().Patch(ctx, pvc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); perr != nil {
		if apierrors.IsConflict(perr) {
			return reconcile.Result{}, perr
		}
		return reconcile.Result{}, fmt.Errorf("%w; marking claim %s: %v", err, klog.KObj(pvc), perr)
	}
	r.recorder.Eventf(pvc, nil, corev1.EventTypeWarning, EventReasonVolumeResizeFailed, "Resize", "%s", truncate(err.Error(), maxEventNote))
	if !infeasible {
		return reconcile.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Expansion infeasible", "claim", klog.KObj(pvc), "reason", err.Error())
	return reconcile.Result{RequeueAfter: InfeasibleRetry}, nil
}

// resizerWorkers is the external resizer's --workers default.
const resizerWorkers = 10

// maxEventNote bounds an Event's note (the events API refuses longer ones).
const maxEventNote = 1000

// truncate shortens s to at most n bytes, ending it with "..." when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
