package scenario

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Cleanup undoes a scenario run in o.Namespace, in the order a person
// would: it deletes the StatefulSets and waits until they are gone, then the
// pods, then sets the volumes of the namespace's claims to be deleted with
// them (reclaim policy Delete, where a scenario retained them), deletes the
// claims, and waits until the volumes behind them, their PersistentVolumes
// and their replicas are gone. It uncordons every node, and waits until every ledger
// is Ready and grants nothing (storageScheduled 0, no replica request, every
// request decided), and until the storage capacity published for
// kube-scheduler for the classes of the claims it deleted says so
// (waitCapacityCurrent: up to the CSI external-provisioner's poll interval,
// a minute by default, for a WaitForFirstConsumer class), so that the next
// scenario starts from an empty cluster.
// The namespace stays: the sandbox runs no namespace controller to delete it.
func Cleanup(ctx context.Context, c client.WithWatch, o Common) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	if err := c.DeleteAllOf(ctx, &appsv1.StatefulSet{}, client.InNamespace(o.Namespace)); err != nil {
		return fmt.Errorf("cleanup: deleting the StatefulSets: %w", err)
	}
	if err := waitEmpty(ctx, c, o, &appsv1.StatefulSetList{}, o.Namespace, "StatefulSets"); err != nil {
		return err
	}
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(o.Namespace)); err != nil {
		return fmt.Errorf("cleanup: deleting the pods: %w", err)
	}
	if err := waitEmpty(ctx, c, o, &corev1.PodList{}, o.Namespace, "pods"); err != nil {
		return err
	}
	volumes, classes, err := reclaimVolumes(ctx, c, o.Namespace)
	if err != nil {
		return err
	}
	if err := c.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(o.Namespace)); err != nil {
		return fmt.Errorf("cleanup: deleting the claims: %w", err)
	}
	if err := waitEmpty(ctx, c, o, &corev1.PersistentVolumeClaimList{}, o.Namespace, "claims"); err != nil {
		return err
	}
	err = waitAll(ctx, o.Timeout, c, []watched{
		{&corev1.PersistentVolumeList{}, ""},
		{&lhv1.VolumeList{}, o.SystemNamespace},
		{&lhv1.ReplicaList{}, o.SystemNamespace},
	}, func(objs []objects) (bool, string) {
		var left []string
		for _, pv := range objs[0] {
			if volumes[pv.GetName()] {
				left = append(left, "PersistentVolume "+pv.GetName())
			}
		}
		for _, v := range objs[1] {
			if volumes[v.GetName()] {
				left = append(left, "volume "+v.GetName())
			}
		}
		for _, r := range objs[2] {
			if volumes[r.(*lhv1.Replica).Spec.VolumeName] {
				left = append(left, "replica "+r.GetName())
			}
		}
		sort.Strings(left)
		return len(left) == 0, strings.Join(left, ", ") + " left"
	})
	if err != nil {
		return fmt.Errorf("cleanup: waiting until %d volumes are reclaimed: %w", len(volumes), err)
	}
	nodes, err := longhornNodes(ctx, c, o.SystemNamespace)
	if err != nil {
		return err
	}
	if err := setCordoned(ctx, c, o, nodes); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	var state string
	err = waitFor(ctx, o.Timeout, c, &dsv1.DiskScheduleList{}, o.SystemNamespace, func(objs objects) bool {
		for _, obj := range objs {
			ds := obj.(*dsv1.DiskSchedule)
			if ds.Status.StorageScheduled != 0 || len(ds.Spec.Replicas) > 0 || ds.Status.ObservedGeneration != ds.Generation {
				state = fmt.Sprintf("DiskSchedule %s (disk %s of node %s) grants %s to %d replica requests, observedGeneration %d of %d",
					ds.Name, ds.Spec.Name, ds.Spec.NodeID, Bytes(ds.Status.StorageScheduled), len(ds.Spec.Replicas),
					ds.Status.ObservedGeneration, ds.Generation)
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("cleanup: waiting until the ledgers grant nothing (%s): %w", state, err)
	}
	if len(classes) > 0 {
		waited, err := waitCapacityCurrent(ctx, c, o, classes...)
		if err != nil {
			return fmt.Errorf("cleanup: %w", err)
		}
		if waited > time.Second {
			o.Logf("waited %s until the storage capacity published for %s was current", round(waited), strings.Join(classes, ", "))
		}
	}
	o.Logf("cleaned up: %d volumes reclaimed, every ledger empty", len(volumes))
	return nil
}

// reclaimVolumes returns the PersistentVolumes bound, or once bound, to
// claims of namespace, after setting the reclaim policy of each to Delete,
// so that they go with their claims, and the claims' StorageClasses.
func reclaimVolumes(ctx context.Context, c client.Client, namespace string) (map[string]bool, []string, error) {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := c.List(ctx, claims, client.InNamespace(namespace)); err != nil {
		return nil, nil, fmt.Errorf("cleanup: listing the claims: %w", err)
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := c.List(ctx, pvs); err != nil {
		return nil, nil, fmt.Errorf("cleanup: listing the PersistentVolumes: %w", err)
	}
	volumes := map[string]bool{}
	var classes []string
	for _, pvc := range claims.Items {
		if pvc.Spec.VolumeName != "" {
			volumes[pvc.Spec.VolumeName] = true
		}
		if class := ptr.Deref(pvc.Spec.StorageClassName, ""); class != "" && !slices.Contains(classes, class) {
			classes = append(classes, class)
		}
	}
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == namespace {
			volumes[pv.Name] = true
		}
	}
	for name := range volumes {
		if err := setVolumeReclaimPolicy(ctx, c, name, corev1.PersistentVolumeReclaimDelete); client.IgnoreNotFound(err) != nil {
			return nil, nil, fmt.Errorf("cleanup: %w", err)
		}
	}
	sort.Strings(classes)
	return volumes, classes, nil
}

// waitEmpty waits until namespace holds none of list's kind.
func waitEmpty(ctx context.Context, c client.WithWatch, o Common, list client.ObjectList, namespace, what string) error {
	var left []string
	err := waitFor(ctx, o.Timeout, c, list, namespace, func(objs objects) bool {
		left = left[:0]
		for k := range objs {
			left = append(left, k)
		}
		return len(left) == 0
	})
	if err != nil {
		sort.Strings(left)
		return fmt.Errorf("cleanup: waiting until the %s are gone (left: %s): %w", what, strings.Join(left, ", "), err)
	}
	return nil
}
