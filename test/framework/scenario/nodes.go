package scenario

import (
	"context"
	"fmt"
	"sort"
	"strings"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"

	"github.com/longhorn/diskschedule/internal/conditions"
)

// setCordoned cordons (spec.unschedulable) the Kubernetes Nodes named in
// cordon and uncordons every other one of nodes, then waits until
// Longhorn's view agrees: each Longhorn node Schedulable, and each ledger
// Ready, exactly when its node is not cordoned.
func setCordoned(ctx context.Context, c client.WithWatch, o Common, nodes []string, cordon ...string) error {
	cordoned := map[string]bool{}
	for _, n := range cordon {
		cordoned[n] = true
	}
	for _, name := range nodes {
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return fmt.Errorf("getting node %s: %w", name, err)
		}
		if node.Spec.Unschedulable == cordoned[name] {
			continue
		}
		base := node.DeepCopy()
		node.Spec.Unschedulable = cordoned[name]
		// A merge patch of spec.unschedulable alone, as kubectl cordon does.
		if err := c.Patch(ctx, node, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("setting node %s unschedulable=%v: %w", name, cordoned[name], err)
		}
	}
	if err := waitLonghornSchedulable(ctx, c, o, cordoned); err != nil {
		return err
	}
	if len(cordon) > 0 {
		o.Logf("cordoned %s", strings.Join(cordon, ", "))
	}
	return nil
}

// waitLonghornSchedulable waits until every Longhorn node is Schedulable
// unless cordoned, and every ledger is Ready exactly when its node is not
// cordoned.
func waitLonghornSchedulable(ctx context.Context, c client.WithWatch, o Common, cordoned map[string]bool) error {
	var state string
	err := waitFor(ctx, o.Timeout, c, &lhv1.NodeList{}, o.SystemNamespace, func(objs objects) bool {
		for _, obj := range objs {
			n := obj.(*lhv1.Node)
			if got := conditions.LonghornTrue(n.Status.Conditions, lhv1.NodeConditionTypeSchedulable); got == cordoned[n.Name] {
				state = fmt.Sprintf("Longhorn node %s Schedulable=%v", n.Name, got)
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("waiting for Longhorn to see the cordons (%s): %w", state, err)
	}
	err = waitFor(ctx, o.Timeout, c, &dsv1.DiskScheduleList{}, o.SystemNamespace, func(objs objects) bool {
		for _, obj := range objs {
			ds := obj.(*dsv1.DiskSchedule)
			if got := meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady); got == cordoned[ds.Spec.NodeID] {
				state = fmt.Sprintf("DiskSchedule %s (disk %s of node %s) Ready=%v", ds.Name, ds.Spec.Name, ds.Spec.NodeID, got)
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("waiting for the ledgers to see the cordons (%s): %w", state, err)
	}
	return nil
}

// largestNode returns the first node, by name, with the most disk space
// (storageMaximum over its disks).
func largestNode(ctx context.Context, c client.Client, namespace string) (string, error) {
	list := &lhv1.NodeList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return "", fmt.Errorf("listing the Longhorn nodes: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	best, most := "", int64(-1)
	for _, n := range list.Items {
		var total int64
		for _, d := range n.Status.DiskStatus {
			if d != nil {
				total += d.StorageMaximum
			}
		}
		if total > most {
			best, most = n.Name, total
		}
	}
	if best == "" {
		return "", fmt.Errorf("no Longhorn node in %s", namespace)
	}
	return best, nil
}
