package simlonghorn

import (
	"context"
	"fmt"
	"strings"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// backingImageController plays Longhorn's backing-image controller, its
// data source and the backing-image managers on each disk: an image's size
// is read from its source, it keeps minNumberOfCopies copies (adding one
// disk at a time, as Longhorn does), and every copy asked for is ready at
// once.
type backingImageController struct {
	sim *sim
	// backoff spaces the retries of an image whose copy write was refused.
	backoff workqueue.TypedRateLimiter[types.NamespacedName]
	now     func() time.Time
}

func newBackingImageController(s *sim) *backingImageController {
	return &backingImageController{
		sim:     s,
		backoff: workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](refusedRetryFirst, refusedRetryMax),
		now:     time.Now,
	}
}

func (c *backingImageController) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("simlonghorn-backingimage").
		For(&lhv1.BackingImage{}, builder.WithPredicates(predicate.NewPredicateFuncs(c.sim.inNamespace))).
		Watches(&lhv1.Node{}, handler.EnqueueRequestsFromMapFunc(c.allImages)).
		Complete(reconcile.Func(c.reconcile))
}

// allImages maps a node change to every backing image: one lacking copies
// may now find a disk.
func (c *backingImageController) allImages(ctx context.Context, o client.Object) []reconcile.Request {
	if !c.sim.inNamespace(o) {
		return nil
	}
	list := &lhv1.BackingImageList{}
	if err := c.sim.client.List(ctx, list, client.InNamespace(c.sim.namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing backing images")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// reconcile adds a copy when the image has fewer than minNumberOfCopies
// (one spec Update, whose event brings the image back), or else writes the
// status the managers and the data source report (one status Update).
func (c *backingImageController) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	bi := &lhv1.BackingImage{}
	if err := c.sim.client.Get(ctx, req.NamespacedName, bi); err != nil {
		c.backoff.Forget(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !bi.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	var result reconcile.Result
	if len(bi.Spec.DiskFileSpecMap) < max(bi.Spec.MinNumberOfCopies, 1) && bi.Status.UUID != "" {
		pod, err := c.sim.pods.forName(ctx, bi.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		if uuid, node := copyDisk(pod, bi); uuid != "" {
			next := bi.DeepCopy()
			if next.Spec.DiskFileSpecMap == nil {
				next.Spec.DiskFileSpecMap = map[string]*lhv1.BackingImageDiskFileSpec{}
			}
			next.Spec.DiskFileSpecMap[uuid] = &lhv1.BackingImageDiskFileSpec{DataEngine: imageDataEngine(bi)}
			if err := c.sim.client.Update(ctx, next); err != nil {
				if apierrors.IsConflict(err) {
					return reconcile.Result{RequeueAfter: conflictRetry}, nil
				}
				log.Info("The API server refused a backing-image copy; trying again later",
					"backingImage", klog.KObj(bi), "node", node, "disk", uuid, "error", err.Error())
				result.RequeueAfter = c.backoff.When(req.NamespacedName)
			} else {
				log.Info("Added a backing-image copy", "backingImage", klog.KObj(bi), "node", node, "disk", uuid)
				c.backoff.Forget(req.NamespacedName)
				return reconcile.Result{}, nil // the image's change brings it back for its status
			}
		} else {
			log.V(1).Info("No disk can take another copy of the backing image", "backingImage", klog.KObj(bi))
		}
	}

	status, err := backingImageStatus(bi, c.now())
	if err != nil {
		log.Error(err, "Cannot read the backing image's size", "backingImage", klog.KObj(bi))
	}
	if !apiequality.Semantic.DeepEqual(bi.Status, status) {
		bi.Status = status
		if err := c.sim.client.Status().Update(ctx, bi); err != nil {
			return requeueOnConflict(fmt.Errorf("updating the status of backing image %s: %w", bi.Name, err))
		}
	}
	return result, nil
}

// imageDataEngine returns the image's data engine, v1 when unset.
func imageDataEngine(bi *lhv1.BackingImage) lhv1.DataEngineType {
	if bi.Spec.DataEngine == "" {
		return lhv1.DataEngineTypeV1
	}
	return bi.Spec.DataEngine
}

// copyDisk returns the disk for the image's next copy and its node, or ""
// when none can take it, as Longhorn's backing-image controller picks one:
// its datastore's GetReadyNodeDiskForBackingImage, a random schedulable
// disk matching the image's selectors without a copy yet.
func copyDisk(pod *LonghornManager, bi *lhv1.BackingImage) (uuid, node string) {
	n, disk, err := pod.DataStore.GetReadyNodeDiskForBackingImage(bi, imageDataEngine(bi), nil)
	if err != nil || n == nil {
		return "", ""
	}
	st := n.Status.DiskStatus[disk]
	if st == nil {
		return "", ""
	}
	return st.DiskUUID, n.Name
}

// backingImageStatus returns the image's status: its UUID, its size from
// the declared source size (0 when none is declared), its real size from
// the declared real size (the size when none is declared), and every copy of
// diskFileSpecMap ready, as the data source and the managers report once
// the file is downloaded.
func backingImageStatus(bi *lhv1.BackingImage, now time.Time) (lhv1.BackingImageStatus, error) {
	st := *bi.Status.DeepCopy()
	if id := strings.ReplaceAll(string(bi.UID), "-", ""); st.UUID == "" && len(id) >= 8 {
		st.UUID = id[:8]
	}
	size, err := DeclaredSize(bi)
	if err == nil && size > 0 {
		st.Size, st.RealSize, st.VirtualSize = size, size, size
		real, rerr := declaredRealSize(bi, size)
		if rerr != nil {
			err = rerr
		} else if real > 0 {
			st.RealSize = real
		}
	}
	files := make(map[string]*lhv1.BackingImageDiskFileStatus, len(bi.Spec.DiskFileSpecMap))
	for uuid, spec := range bi.Spec.DiskFileSpecMap {
		if old := st.DiskFileStatusMap[uuid]; old != nil && old.State == lhv1.BackingImageStateReady {
			files[uuid] = old
			continue
		}
		engine := lhv1.DataEngineTypeV1
		if spec != nil && spec.DataEngine != "" {
			engine = spec.DataEngine
		}
		files[uuid] = &lhv1.BackingImageDiskFileStatus{
			DataEngine: engine, State: lhv1.BackingImageStateReady, Progress: 100,
			LastStateTransitionTime: longhornTime(now),
		}
	}
	st.DiskFileStatusMap = files
	return st, err
}

// DeclaredSize returns the size in bytes declared by the image's source
// parameter SourceParamSize, or 0 when none is declared.
func DeclaredSize(bi *lhv1.BackingImage) (int64, error) {
	v, ok := bi.Spec.SourceParameters[SourceParamSize]
	if !ok || v == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("source parameter %s %q: %w", SourceParamSize, v, err)
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("source parameter %s %q must be positive", SourceParamSize, v)
	}
	return q.Value(), nil
}

// declaredRealSize returns the real size in bytes declared by the image's
// source parameter SourceParamRealSize, or 0 when none is declared; it
// must be positive and at most size.
func declaredRealSize(bi *lhv1.BackingImage, size int64) (int64, error) {
	v, ok := bi.Spec.SourceParameters[SourceParamRealSize]
	if !ok || v == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("source parameter %s %q: %w", SourceParamRealSize, v, err)
	}
	if q.Sign() <= 0 || q.Value() > size {
		return 0, fmt.Errorf("source parameter %s %q must be positive and at most the size, %d bytes", SourceParamRealSize, v, size)
	}
	return q.Value(), nil
}
