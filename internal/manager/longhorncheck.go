package manager

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// LonghornMissing says why namespace does not look like Longhorn's: it
// holds neither a Longhorn Setting nor a Longhorn Node, which
// longhorn-manager creates as soon as it runs; "" when it holds one. The
// manager binary refuses to start there: its ledgers and everything it
// reads live in Longhorn's namespace.
func LonghornMissing(ctx context.Context, cfg *rest.Config, namespace string) (string, error) {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("creating a client to look for Longhorn: %w", err)
	}
	for _, resource := range []string{"settings", "nodes"} {
		list, err := mc.Resource(dsv1.GroupVersion.WithResource(resource)).Namespace(namespace).List(ctx, metav1.ListOptions{Limit: 1})
		if apierrors.IsNotFound(err) {
			return "", nil // Longhorn's CRDs are missing: CheckCRDs says so
		}
		if err != nil {
			return "", fmt.Errorf("looking for Longhorn's %s in namespace %s: %w", resource, namespace, err)
		}
		if len(list.Items) > 0 {
			return "", nil
		}
	}
	return fmt.Sprintf("namespace %q holds no Longhorn Setting or Node, which longhorn-manager creates when it runs: "+
		"the add-on runs in Longhorn's namespace (--namespace, or install the chart with --namespace set to Longhorn's)", namespace), nil
}
