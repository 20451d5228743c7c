package podmutator

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Warm starts, on every manager replica, the cache's informers of what the
// webhook reads (claims, PersistentVolumes, StorageClasses), so that the
// first pod does not wait for them to sync. Add it to the manager.
type Warm struct {
	Cache  cache.Cache
	synced atomic.Bool
}

// NeedLeaderElection is false: every replica serves the webhook.
func (*Warm) NeedLeaderElection() bool { return false }

// Start gets each informer, waiting until it has synced, and returns.
func (w *Warm) Start(ctx context.Context) error {
	for _, obj := range []client.Object{&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}, &storagev1.StorageClass{}} {
		if _, err := w.Cache.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("starting the pod webhook's %T informer: %w", obj, err)
		}
	}
	w.synced.Store(true)
	return nil
}

// Ready reports an error until the informers have synced.
func (w *Warm) Ready() error {
	if !w.synced.Load() {
		return fmt.Errorf("the pod webhook's informers have not synced yet")
	}
	return nil
}
