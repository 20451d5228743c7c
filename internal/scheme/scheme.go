// Package scheme builds the runtime.Scheme every component of diskschedule
// uses: the built-in Kubernetes kinds plus longhorn.io/v1beta2.
package scheme

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// New returns a scheme with the built-in kinds and longhorn.io/v1beta2.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding the built-in kinds to the scheme: %w", err)
	}
	if err := longhornv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding longhorn.io/v1beta2 to the scheme: %w", err)
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
