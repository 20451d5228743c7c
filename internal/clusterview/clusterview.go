// Package clusterview reads the scheduling settings every scheduling
// decision starts from: Longhorn's Setting objects and the extender's
// ConfigMap in Longhorn's namespace, usually from the manager's cache.
package clusterview

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/settings"
)

// Settings reads the scheduling settings of namespace: Longhorn's Setting
// objects and the extender's ConfigMap. Invalid values keep their defaults
// and are returned by name, for the caller to report. opts apply to the
// list of Settings (client.UnsafeDisableDeepCopy for read-only callers).
func Settings(ctx context.Context, r client.Reader, namespace string, opts ...client.ListOption) (settings.Scheduling, map[string]error, error) {
	list := &lhv1.SettingList{}
	if err := r.List(ctx, list, append([]client.ListOption{client.InNamespace(namespace)}, opts...)...); err != nil {
		return settings.Scheduling{}, nil, fmt.Errorf("listing Longhorn settings: %w", err)
	}
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: settings.ConfigMapName}, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			return settings.Scheduling{}, nil, fmt.Errorf("reading ConfigMap %s: %w", settings.ConfigMapName, err)
		}
		cm = nil
	}
	s, invalid := settings.FromObjects(list.Items, cm)
	return s, invalid, nil
}
