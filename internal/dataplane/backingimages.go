package dataplane

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// BackingImages plays the backing-image manager reading an image's source:
// status.size becomes the size declared in spec.sourceParameters["size"].
type BackingImages struct {
	client client.Client
}

// SetupWithManager registers the controller.
func (b *BackingImages) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("dataplane-backingimages").
		For(&longhornv1.BackingImage{}).
		Complete(reconcile.Func(b.reconcile))
}

func (b *BackingImages) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	bi := &longhornv1.BackingImage{}
	if err := b.client.Get(ctx, req.NamespacedName, bi); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	size, err := DeclaredSize(bi)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Cannot read the backing image's size", "backingImage", klog.KObj(bi))
		return reconcile.Result{}, nil // a spec change brings it back
	}
	if bi.Status.Size != 0 || size == 0 {
		return reconcile.Result{}, nil
	}
	base := bi.DeepCopy()
	bi.Status.Size = size
	if err := b.client.Status().Patch(ctx, bi, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("setting the size of backing image %s: %w", bi.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Read the backing image's size", "backingImage", klog.KObj(bi), "size", size)
	return reconcile.Result{}, nil
}

// DeclaredSize returns the size in bytes declared by the image's source
// parameter "size", or 0 when none is declared.
func DeclaredSize(bi *longhornv1.BackingImage) (int64, error) {
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
