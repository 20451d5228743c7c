package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SetClaimRequest sets the claim's storage request to size, as a user
// expanding it does, retrying on conflicts; pvc is read back into.
func SetClaimRequest(t testing.TB, c client.Client, pvc *corev1.PersistentVolumeClaim, size resource.Quantity) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return err
		}
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = size
		return c.Update(context.Background(), pvc)
	})
	if err != nil {
		t.Fatalf("setting the request of claim %s to %s: %v", pvc.Name, size.String(), err)
	}
}
