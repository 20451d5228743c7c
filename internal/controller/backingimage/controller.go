package backingimage

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/clusterview"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
	"github.com/longhorn/diskschedule/internal/settings"
)

const (
	// workers is how many backing images are reconciled in parallel.
	workers = 4
	// retryFirst and retryMax bound the backoff of an image that lacks
	// copies, when no ledger, node or setting change brings it back sooner.
	retryFirst, retryMax = time.Second, 30 * time.Second
	// conflictRetry is how soon a reconcile that lost a write race runs again.
	conflictRetry = 50 * time.Millisecond
	// maxEventNote bounds an Event's note (the events API refuses longer ones).
	maxEventNote = 1000
)

// Reconciler keeps minNumberOfCopies copies of every BackingImage, each
// granted by its disk's ledger.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	// backoff spaces the retries of each image that lacks copies: from
	// retryFirst doubling up to retryMax, forgotten once it has them.
	backoff workqueue.TypedRateLimiter[types.NamespacedName]
}

// NewReconciler returns a backing-image Reconciler. c reads from the cache
// and writes to the API server; apiReader reads the API server directly
// (the image itself, ledgers before writing to them); recorder emits Events.
func NewReconciler(c client.Client, apiReader client.Reader, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{
		client: c, apiReader: apiReader, recorder: recorder,
		backoff: workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](retryFirst, retryMax),
	}
}

// scope is what one reconcile of a backing image reads and decides.
type scope struct {
	image   *longhornv1.BackingImage
	sched   settings.Scheduling
	nodes   []longhornv1.Node
	ledgers map[string]*longhornv1.DiskSchedule
	copies  copies
	// added are the disks chosen for new copies in this reconcile.
	added []string
	// unrequested are disks of diskFileSpecMap whose ledger lacks the
	// image's request at its size.
	unrequested []string
}

// +kubebuilder:rbac:groups=longhorn.io,resources=backingimages,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=backingimages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=backingimages/finalizers,verbs=update
// +kubebuilder:rbac:groups=longhorn.io,resources=diskschedules,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=nodes;settings,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one backing image's copies and their ledger requests up
// to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := req.NamespacedName
	bi := &longhornv1.BackingImage{}
	// diskFileSpecMap decides which ledger requests exist, so it is read from
	// the API server: a stale cached copy would write back requests that an
	// earlier reconcile just released.
	if err := r.apiReader.Get(ctx, key, bi); err != nil {
		if apierrors.IsNotFound(err) {
			r.backoff.Forget(key)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !bi.DeletionTimestamp.IsZero() {
		return retryOn(ctx, r.finalize(ctx, bi))
	}
	if controllerutil.AddFinalizer(bi, longhornv1.ReplicaFinalizer) {
		if err := r.client.Update(ctx, bi); err != nil {
			return retryOn(ctx, fmt.Errorf("adding the finalizer to backing image %s: %w", bi.Name, err))
		}
	}
	if bi.Status.Size <= 0 {
		// Nothing can be asked of a ledger before the size is known.
		base := bi.DeepCopy()
		meta.SetStatusCondition(&bi.Status.Conditions, sizeUnknownCondition(bi.Generation))
		return retryOn(ctx, r.patchStatus(ctx, base, bi))
	}
	s, err := r.load(ctx, bi)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, phase := range []func(context.Context, *scope) error{
		r.checkCopies, r.chooseDisks, r.writeDiskFileSpecMap, r.syncLedgers, r.writeStatus,
	} {
		if err := phase(ctx, s); err != nil {
			return retryOn(ctx, err)
		}
	}
	if len(s.copies.granted) >= s.copies.want {
		r.backoff.Forget(key)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: r.backoff.When(key)}, nil
}

// retryOn turns a lost write race (a conflict) into a quick requeue and
// ignores an image deleted meanwhile; other errors are returned.
func retryOn(ctx context.Context, err error) (ctrl.Result, error) {
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		ctrl.LoggerFrom(ctx).V(1).Info("Retrying after a write conflict", "error", err.Error())
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return ctrl.Result{}, err
}

// finalize releases the image's request from every ledger that may hold one,
// then removes the finalizer. It does not rely on the ledgers' garbage
// collection, which releases only once the image is gone.
func (r *Reconciler) finalize(ctx context.Context, bi *longhornv1.BackingImage) error {
	if !controllerutil.ContainsFinalizer(bi, longhornv1.ReplicaFinalizer) {
		return nil
	}
	disks := map[string]bool{}
	for uuid := range bi.Spec.DiskFileSpecMap {
		disks[uuid] = true
	}
	for uuid := range bi.Status.DiskFileStatusMap {
		disks[uuid] = true
	}
	// To be safe, also every ledger that still holds a request of the image,
	// listed from the API server so a request written just now is seen.
	all := &longhornv1.DiskScheduleList{}
	if err := r.apiReader.List(ctx, all, client.InNamespace(bi.Namespace)); err != nil {
		return fmt.Errorf("listing DiskSchedules to release backing image %s: %w", bi.Name, err)
	}
	for i := range all.Items {
		if _, ok := all.Items[i].Spec.BackingImages[bi.Name]; ok {
			disks[all.Items[i].Name] = true
		}
	}
	for _, uuid := range sortedKeys(disks) {
		if err := r.release(ctx, bi, uuid); err != nil {
			return err
		}
	}
	ctrl.LoggerFrom(ctx).Info("Released the backing image's ledger requests", "backingImage", klog.KObj(bi), "disks", len(disks))
	controllerutil.RemoveFinalizer(bi, longhornv1.ReplicaFinalizer)
	if err := r.client.Update(ctx, bi); err != nil {
		return fmt.Errorf("removing the finalizer of backing image %s: %w", bi.Name, err)
	}
	r.backoff.Forget(client.ObjectKeyFromObject(bi))
	return nil
}

// load reads the settings, nodes and ledgers from the cache. A lagging
// ledger only delays a decision: the ledger itself grants or rejects.
func (r *Reconciler) load(ctx context.Context, bi *longhornv1.BackingImage) (*scope, error) {
	s := &scope{image: bi, ledgers: map[string]*longhornv1.DiskSchedule{}}
	s.copies = copies{want: max(bi.Spec.MinNumberOfCopies, 1), size: bi.Status.Size, failed: map[string]string{}}
	view, err := clusterview.Load(ctx, r.client, bi.Namespace)
	if err != nil {
		return nil, err
	}
	s.sched, s.nodes, s.ledgers = view.Settings, view.Nodes, view.Ledgers
	return s, nil
}

// checkCopies reads the ledger's decision on every copy of diskFileSpecMap:
// granted, pending, not requested yet (written by syncLedgers), or rejected,
// in which case the disk is given up and the copy placed elsewhere.
func (r *Reconciler) checkCopies(ctx context.Context, s *scope) error {
	name, size := s.image.Name, s.copies.size
	for _, uuid := range sortedKeys(s.image.Spec.DiskFileSpecMap) {
		ds := s.ledgers[uuid]
		if ds == nil {
			// Not in the cache: confirm with the API server before giving up.
			fresh := &longhornv1.DiskSchedule{}
			err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: s.image.Namespace, Name: uuid}, fresh)
			if apierrors.IsNotFound(err) {
				s.copies.failed[uuid] = fmt.Sprintf("disk %s has no DiskSchedule", uuid)
				continue
			}
			if err != nil {
				return fmt.Errorf("reading DiskSchedule %s: %w", uuid, err)
			}
			ds = fresh
		}
		d, msg := decisionOf(ds, name, size)
		switch d {
		case decisionGranted:
			s.copies.granted = append(s.copies.granted, uuid)
		case decisionPending:
			s.copies.pending = append(s.copies.pending, uuid)
		case decisionUnrequested:
			s.copies.pending = append(s.copies.pending, uuid)
			s.unrequested = append(s.unrequested, uuid)
		case decisionRejected:
			s.copies.failed[uuid] = fmt.Sprintf("disk %s rejected the copy: %s", uuid, msg)
			r.recorder.Eventf(s.image, ds, corev1.EventTypeWarning, EventReasonCopyRejected, "Schedule", "%s",
				truncate(fmt.Sprintf("Disk %s rejected a copy of %s: %s; placing it elsewhere", uuid, bytes(size), msg), maxEventNote))
		}
	}
	return nil
}

// chooseDisks picks disks for the copies still missing.
func (r *Reconciler) chooseDisks(_ context.Context, s *scope) error {
	missing := s.copies.want - len(s.copies.granted) - len(s.copies.pending)
	if missing <= 0 {
		return nil
	}
	holding := map[string]bool{}
	for uuid := range s.image.Spec.DiskFileSpecMap {
		holding[uuid] = true // given-up disks too: their request is still being released
	}
	sel := choose(choiceInput{
		Image: s.image.Name, Size: s.copies.size,
		NodeSelector: s.image.Spec.NodeSelector, DiskSelector: s.image.Spec.DiskSelector,
		Settings: s.sched, Nodes: s.nodes, Ledgers: s.ledgers, Holding: holding,
	}, missing)
	for _, c := range sel.Chosen {
		s.added = append(s.added, c.UUID)
		s.copies.pending = append(s.copies.pending, c.UUID)
	}
	s.copies.sel = sel
	s.copies.short = len(sel.Chosen) < missing
	return nil
}

// writeDiskFileSpecMap records the disks given up and the disks chosen,
// before any ledger is asked: a request never exists without its disk in
// the map. Update, not a merge patch, carries the resourceVersion read, so
// a concurrent change of the map fails with a conflict instead of being
// overwritten.
func (r *Reconciler) writeDiskFileSpecMap(ctx context.Context, s *scope) error {
	if len(s.copies.failed) == 0 && len(s.added) == 0 {
		return nil
	}
	for uuid := range s.copies.failed {
		delete(s.image.Spec.DiskFileSpecMap, uuid)
	}
	if s.image.Spec.DiskFileSpecMap == nil {
		s.image.Spec.DiskFileSpecMap = map[string]longhornv1.BackingImageDiskFileSpec{}
	}
	for _, uuid := range s.added {
		s.image.Spec.DiskFileSpecMap[uuid] = longhornv1.BackingImageDiskFileSpec{}
	}
	if err := r.client.Update(ctx, s.image); err != nil {
		return fmt.Errorf("updating the disk file map of backing image %s: %w", s.image.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Updated the backing image's disks", "backingImage", klog.KObj(s.image),
		"added", s.added, "givenUp", sortedKeys(s.copies.failed))
	return nil
}

// syncLedgers makes the ledgers follow diskFileSpecMap: the request of every
// disk no longer in the map is released (the ones given up now, and any
// left over), and every disk in it gets a request of the image's size.
func (r *Reconciler) syncLedgers(ctx context.Context, s *scope) error {
	name := s.image.Name
	release := map[string]bool{}
	for uuid := range s.copies.failed {
		release[uuid] = true
	}
	for uuid, ds := range s.ledgers {
		if _, requested := ds.Spec.BackingImages[name]; requested {
			if _, kept := s.image.Spec.DiskFileSpecMap[uuid]; !kept {
				release[uuid] = true
			}
		}
	}
	for _, uuid := range sortedKeys(release) {
		if err := r.release(ctx, s.image, uuid); err != nil {
			return err
		}
	}
	request := append(append([]string(nil), s.unrequested...), s.added...)
	sort.Strings(request)
	for _, uuid := range request {
		key := types.NamespacedName{Namespace: s.image.Namespace, Name: uuid}
		_, err := ledgerclient.Mutate(ctx, r.apiReader, r.client, key, ledgerclient.SetBackingImage(name, s.copies.size))
		if apierrors.IsNotFound(err) {
			continue // the ledger is gone; checkCopies gives the disk up next time
		}
		if err != nil {
			return fmt.Errorf("requesting a copy of backing image %s: %w", name, err)
		}
	}
	return nil
}

// release removes the image's request from the ledger of disk uuid.
func (r *Reconciler) release(ctx context.Context, bi *longhornv1.BackingImage, uuid string) error {
	key := types.NamespacedName{Namespace: bi.Namespace, Name: uuid}
	if _, err := ledgerclient.Mutate(ctx, r.apiReader, r.client, key, ledgerclient.RemoveBackingImage(bi.Name)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing backing image %s: %w", bi.Name, err)
	}
	return nil
}

// writeStatus sets diskFileStatusMap and CopiesScheduled, and emits an Event
// when the image becomes short of disks or fully scheduled.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) error {
	bi := s.image
	base := bi.DeepCopy()
	bi.Status.DiskFileStatusMap = fileStatuses(base.Status.DiskFileStatusMap, s.copies)
	cond := copiesCondition(s.copies, bi.Generation)
	prev := meta.FindStatusCondition(base.Status.Conditions, cond.Type)
	meta.SetStatusCondition(&bi.Status.Conditions, cond)
	switch {
	case cond.Reason == longhornv1.BackingImageReasonInsufficientDisks &&
		(prev == nil || prev.Reason != cond.Reason || prev.Message != cond.Message):
		r.recorder.Eventf(bi, nil, corev1.EventTypeWarning, longhornv1.BackingImageReasonInsufficientDisks, "Schedule", "%s",
			truncate(cond.Message, maxEventNote))
	case cond.Status == metav1.ConditionTrue && (prev == nil || prev.Status != metav1.ConditionTrue):
		r.recorder.Eventf(bi, nil, corev1.EventTypeNormal, longhornv1.BackingImageReasonCopiesScheduled, "Schedule", "%s",
			truncate(cond.Message, maxEventNote))
	}
	return r.patchStatus(ctx, base, bi)
}

// patchStatus writes bi's status when it differs from base's. The optimistic
// lock makes a status computed from an older status.size fail with a
// conflict instead of overwriting the new one.
func (r *Reconciler) patchStatus(ctx context.Context, base, bi *longhornv1.BackingImage) error {
	if equality.Semantic.DeepEqual(base.Status, bi.Status) {
		return nil
	}
	if err := r.client.Status().Patch(ctx, bi, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("writing the status of backing image %s: %w", bi.Name, err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SetupWithManager registers the controller. An image is reconciled on its
// own changes; on a ledger change when the ledger concerns it (a request or
// decision of it, or a disk of its map) or when it lacks copies; on node and
// setting changes when it lacks copies, since they may make disks eligible.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&longhornv1.BackingImage{}).
		Watches(&longhornv1.DiskSchedule{}, handler.EnqueueRequestsFromMapFunc(r.forLedger)).
		Watches(&longhornv1.Node{}, handler.EnqueueRequestsFromMapFunc(r.unsettled)).
		Watches(&longhornv1.Setting{}, handler.EnqueueRequestsFromMapFunc(r.unsettled)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("backingimage").
		Complete(r)
}

// forLedger returns the images a change of a ledger may concern: those
// lacking copies and those with a request, decision or copy on it.
func (r *Reconciler) forLedger(ctx context.Context, obj client.Object) []reconcile.Request {
	ds, ok := obj.(*longhornv1.DiskSchedule)
	if !ok {
		return nil
	}
	return r.images(ctx, obj.GetNamespace(), func(bi *longhornv1.BackingImage) bool {
		_, requested := ds.Spec.BackingImages[bi.Name]
		_, decided := ds.Status.BackingImages[bi.Name]
		_, holds := bi.Spec.DiskFileSpecMap[ds.Name]
		return requested || decided || holds || !settled(bi)
	})
}

// unsettled returns the images in obj's namespace that lack copies.
func (r *Reconciler) unsettled(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.images(ctx, obj.GetNamespace(), func(bi *longhornv1.BackingImage) bool { return !settled(bi) })
}

// settled reports whether bi's CopiesScheduled condition is True.
func settled(bi *longhornv1.BackingImage) bool {
	return meta.IsStatusConditionTrue(bi.Status.Conditions, longhornv1.BackingImageConditionCopiesScheduled)
}

func (r *Reconciler) images(ctx context.Context, namespace string, want func(*longhornv1.BackingImage) bool) []reconcile.Request {
	list := &longhornv1.BackingImageList{}
	if err := r.client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing backing images to reconcile")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if want(&list.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
