// Package nodestatus writes the parts of a Longhorn Node's status that each
// component owns, by server-side apply with its own field manager: the disk
// monitor owns each disk's diskUUID, diskType, storageMaximum,
// storageAvailable and Ready condition; the node controller owns zone,
// region, the node conditions and each disk's ledger mirrors and Schedulable
// condition. Neither can overwrite the other's fields.
package nodestatus

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Field managers of the Node status.
const (
	// DiskMonitorManager owns what the disk monitor measures.
	DiskMonitorManager = "longhorn-disk-monitor"
	// NodeControllerManager owns what the node controller derives.
	NodeControllerManager = "longhorn-node-controller"
)

// Apply server-side-applies status, which must hold only the fields owned by
// manager, to the Node named name in namespace. Fields the manager applied
// before and leaves out now are removed.
func Apply(ctx context.Context, c client.Client, namespace, name, manager string, status longhornv1.NodeStatus) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return fmt.Errorf("converting the status of node %s: %w", name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": content}}
	u.SetAPIVersion(longhornv1.GroupVersion.String())
	u.SetKind("Node")
	u.SetName(name)
	u.SetNamespace(namespace)
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the %s fields of node %s: %w", manager, name, err)
	}
	return nil
}

// Condition returns the named condition of conds set to the given values,
// keeping its lastTransitionTime when the status does not change.
func Condition(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason, message string, now metav1.Time) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: now}
	for _, old := range conds {
		if old.Type == typ && old.Status == status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	return c
}
