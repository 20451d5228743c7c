// Package scheme builds the runtime.Scheme every component of diskschedule
// uses: the built-in Kubernetes kinds, Longhorn's own longhorn.io/v1beta2
// kinds (from longhorn-manager v1.12.0) and DiskSchedule.
package scheme

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// New returns a scheme with the built-in kinds, Longhorn's kinds and DiskSchedule.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding the built-in kinds to the scheme: %w", err)
	}
	if err := lhv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding Longhorn's longhorn.io/v1beta2 kinds to the scheme: %w", err)
	}
	if err := dsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding DiskSchedule to the scheme: %w", err)
	}
	return s, nil
}

// EnsureNamespace creates the named namespace unless it exists.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}
