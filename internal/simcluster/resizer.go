package simcluster

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	longhornclient "github.com/longhorn/longhorn-manager/client"
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
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/longhorn/diskschedule/internal/conditions"
)

// longhornOutOfRange is the expression Longhorn v1.12.0's CSI driver
// matches against the error of its volume update in ControllerExpandVolume
// (csi/controller_server.go: regexp.MatchString("failed to schedule .* more
// bytes to disk", err.Error())): a match is answered OutOfRange, any other
// error Internal.
var longhornOutOfRange = regexp.MustCompile("failed to schedule .* more bytes to disk")

// ControllerExpandError is what Longhorn's ControllerExpandVolume answers
// when Longhorn's API refused to expand the volume with err: the gRPC
// status OutOfRange when err's message matches Longhorn's expression (the
// gate's refusal of a growth the disk can never hold says it in those
// words), Internal otherwise — Longhorn's own expansion check among them:
// its "cannot schedule … more bytes to disk" and "does not have sufficient
// physical space" do not match, so Longhorn's CSI driver answers its own
// capacity refusal Internal and the external resizer retries it.
func ControllerExpandError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err // answered before Longhorn's API was asked
	}
	if longhornOutOfRange.MatchString(err.Error()) {
		return status.Errorf(codes.OutOfRange, "%v", err)
	}
	return status.Errorf(codes.Internal, "%v", err)
}

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

// resizer plays the CSI external-resizer with the Longhorn CSI driver's
// ControllerExpandVolume and the kubelet's node expansion: once
// kube-controller-manager's expander leaves a bound claim that asks for more
// than its capacity to an external controller (driver.longhorn.io is no
// in-tree plugin), it grows the Longhorn Volume's spec.size through
// Longhorn's API, as Longhorn's CSI driver does (Longhorn's own expansion
// check, then the Update, where the admission gate decides;
// expandThroughAPI), then, once every replica has
// the new size, the PersistentVolume's capacity and the claim's. The claim's
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
	res, err := r.expand(ctx, pvc, pv, name, roundUpSize(want.Value()))
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

// expand takes the next step of growing volume name to size: the Volume's
// spec.size, then, once its replicas have the size, the PersistentVolume's
// capacity, then the claim's.
func (r *resizer) expand(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, name string, size int64) (reconcile.Result, error) {
	vol := &lhv1.Volume{}
	if err := r.sim.client.Get(ctx, types.NamespacedName{Namespace: r.sim.namespace, Name: name}, vol); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if vol.Spec.Size < size {
		if err := expandThroughAPI(r.sim.longhornAPI, vol.Name, size); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{}, err
			}
			return r.failed(ctx, pvc, pv, ControllerExpandError(err))
		}
		ctrl.LoggerFrom(ctx).Info("Expanding the volume", "volume", name, "size", size, "claim", klog.KObj(pvc))
		return reconcile.Result{}, nil // the replicas' resizing brings the claim back
	}
	expanded, err := r.replicasExpanded(ctx, vol)
	if err != nil || !expanded {
		return reconcile.Result{}, err
	}
	capacity := *resource.NewQuantity(vol.Spec.Size, resource.BinarySI)
	if pvCapacity := pv.Spec.Capacity[corev1.ResourceStorage]; pvCapacity.Cmp(capacity) < 0 {
		base := pv.DeepCopy()
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: capacity}
		if err := r.sim.client.Patch(ctx, pv, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, fmt.Errorf("expanding PersistentVolume %s to %d bytes: %w", pv.Name, vol.Spec.Size, err)
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
		return reconcile.Result{}, fmt.Errorf("expanding claim %s to %d bytes: %w", klog.KObj(pvc), vol.Spec.Size, err)
	}
	ctrl.LoggerFrom(ctx).Info("Expanded the claim", "claim", klog.KObj(pvc), "volume", name, "size", vol.Spec.Size)
	return reconcile.Result{}, nil
}

// failed records ControllerExpandVolume's answer rpcErr as the external
// resizer does: a Warning Event VolumeResizeFailed on the claim, the
// ControllerResizeError condition, and, for an infeasible code,
// ControllerResizeInfeasible, after which the size is left for
// InfeasibleRetry; any other failure is returned and retried with the
// controller's backoff.
func (r *resizer) failed(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, rpcErr error) (reconcile.Result, error) {
	err := fmt.Errorf("resize volume %q by resizer %q failed: %w", pv.Name, CSIDriver, rpcErr)
	r.recorder.Eventf(pvc, nil, corev1.EventTypeWarning, EventReasonVolumeResizeFailed, "Resize", "%s", truncate(err.Error(), maxEventNote))
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
	if perr := r.sim.client.Status().Patch(ctx, pvc, client.MergeFrom(base)); perr != nil {
		return reconcile.Result{}, fmt.Errorf("%w; marking claim %s: %v", err, klog.KObj(pvc), perr)
	}
	if !infeasible {
		return reconcile.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Expansion infeasible", "claim", klog.KObj(pvc), "reason", err.Error())
	return reconcile.Result{RequeueAfter: InfeasibleRetry}, nil
}

// replicasExpanded reports whether every replica of vol has its size.
func (r *resizer) replicasExpanded(ctx context.Context, vol *lhv1.Volume) (bool, error) {
	replicas := &lhv1.ReplicaList{}
	if err := r.sim.client.List(ctx, replicas, client.InNamespace(r.sim.namespace), client.MatchingFields{replicaByVolume: vol.Name}); err != nil {
		return false, fmt.Errorf("listing the replicas of volume %s: %w", vol.Name, err)
	}
	for _, rep := range replicas.Items {
		if rep.Spec.VolumeSize < vol.Spec.Size {
			return false, nil
		}
	}
	return true, nil
}

// expandThroughAPI expands volume name to size as Longhorn v1.12.0's CSI
// driver does in ControllerExpandVolume: its Longhorn API client's
// Volume.ActionExpand, answered by longhorn-manager's API handler, which is
// Longhorn's VolumeManager.Expand (its own expansion checks, then the
// volume's update, where the admission gate decides). As that driver, it
// expands only a volume with one engine, detached or attached
// (csi/controller_server.go, lines 1372-1377), answering
// InvalidArgument or FailedPrecondition otherwise.
func expandThroughAPI(url, name string, size int64) error {
	c, err := longhornclient.NewRancherClient(&longhornclient.ClientOpts{Url: url, Timeout: apiTimeout})
	if err != nil {
		return fmt.Errorf("reaching Longhorn's API at %s: %w", url, err)
	}
	vol, err := c.Volume.ById(name)
	if err != nil {
		return fmt.Errorf("getting volume %s from Longhorn's API: %w", name, err)
	}
	if vol == nil {
		return fmt.Errorf("volume %s missing", name)
	}
	if len(vol.Controllers) != 1 {
		return status.Errorf(codes.InvalidArgument, "volume %s invalid controller count %v", name, len(vol.Controllers))
	}
	if vol.State != string(lhv1.VolumeStateDetached) && vol.State != string(lhv1.VolumeStateAttached) {
		return status.Errorf(codes.FailedPrecondition, "volume %s invalid state %v for controller volume expansion", name, vol.State)
	}
	if _, err := c.Volume.ActionExpand(vol, &longhornclient.ExpandInput{Size: strconv.FormatInt(size, 10)}); err != nil {
		return err
	}
	return nil
}

// apiTimeout bounds one call to Longhorn's API.
const apiTimeout = 30 * time.Second

// maxEventNote bounds an Event's note (the events API refuses longer ones).
const maxEventNote = 1000

// truncate shortens s to at most n bytes, ending it with "..." when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
