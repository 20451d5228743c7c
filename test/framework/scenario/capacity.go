package scenario

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// waitCapacityCurrent waits until the storage capacity kube-scheduler reads
// is current for each of the named StorageClasses that kube-scheduler
// checks capacity for, and that the ledgers can
// speak for: WaitForFirstConsumer binding, a CSIDriver with storageCapacity,
// no nodeSelector or diskSelector parameter. For such a class every Longhorn
// node's CSIStorageCapacity must offer what its disks' ledgers have free.
// After a clean-up the published numbers lag (the external-provisioner
// refreshes them once per poll interval, and not when a volume is deleted),
// so without this a run would begin with nodes that look full. It returns
// how long it waited.
func waitCapacityCurrent(ctx context.Context, c client.WithWatch, o Common, classNames ...string) (time.Duration, error) {
	classes, err := capacityClasses(ctx, c, classNames)
	if err != nil || len(classes) == 0 {
		return 0, err
	}
	start := time.Now()
	err = waitAll(ctx, o.Timeout, c, []watched{
		{&corev1.NodeList{}, ""},
		{&dsv1.DiskScheduleList{}, o.SystemNamespace},
		{&storagev1.CSIStorageCapacityList{}, ""},
	}, func(objs []objects) (bool, string) {
		for _, class := range classes {
			why := capacityBehind(class, values[*corev1.Node](objs[0]), values[*dsv1.DiskSchedule](objs[1]), values[*storagev1.CSIStorageCapacity](objs[2]))
			if why != "" {
				return false, why
			}
		}
		return true, ""
	})
	if err != nil {
		return 0, fmt.Errorf("waiting until the storage capacity published for classes %v is current: %w", classes, err)
	}
	return time.Since(start), nil
}

// capacityClasses returns those of the named classes whose published
// capacity waitCapacityCurrent waits for; a class that does not exist has
// none.
func capacityClasses(ctx context.Context, c client.Client, names []string) ([]string, error) {
	var classes []storagev1.StorageClass
	for _, name := range names {
		class := &storagev1.StorageClass{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, class); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("getting StorageClass %s: %w", name, err)
		}
		classes = append(classes, *class)
	}
	tracking := map[string]bool{}
	var out []string
	for _, class := range classes {
		if ptr.Deref(class.VolumeBindingMode, storagev1.VolumeBindingImmediate) != storagev1.VolumeBindingWaitForFirstConsumer ||
			class.Parameters["nodeSelector"] != "" || class.Parameters["diskSelector"] != "" {
			continue
		}
		checks, known := tracking[class.Provisioner]
		if !known {
			driver := &storagev1.CSIDriver{}
			err := c.Get(ctx, client.ObjectKey{Name: class.Provisioner}, driver)
			if client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("getting CSIDriver %s: %w", class.Provisioner, err)
			}
			checks = err == nil && ptr.Deref(driver.Spec.StorageCapacity, false)
			tracking[class.Provisioner] = checks
		}
		if checks {
			out = append(out, class.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// values returns the objects as T, in no order.
func values[T client.Object](objs objects) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(T))
	}
	return out
}

// capacityBehind says which node's published capacity for class differs
// from what its ledgers have free, or "" when none does. Only nodes with
// ledgers are looked at. A node offers, over its Ready ledgers, the sum of
// storageLimit − storageScheduled (at least 0): Longhorn's GetCapacity over
// the same disks, as long as the ledgers hold what Longhorn scheduled (an
// idle cluster) and the class selects no tags.
func capacityBehind(class string, nodes []*corev1.Node, ledgers []*dsv1.DiskSchedule, capacities []*storagev1.CSIStorageCapacity) string {
	free := map[string]int64{}
	for _, ds := range ledgers {
		if _, ok := free[ds.Spec.NodeID]; !ok {
			free[ds.Spec.NodeID] = 0
		}
		if meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady) {
			free[ds.Spec.NodeID] += max(ds.Status.StorageLimit-ds.Status.StorageScheduled, 0)
		}
	}
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	names := make([]string, 0, len(free))
	for name := range free {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		node := byName[name]
		if node == nil {
			return "node " + name + " not found"
		}
		published, found := int64(0), 0
		for _, c := range capacities {
			if c.StorageClassName != class || !selects(c.NodeTopology, node.Labels) || c.Capacity == nil {
				continue
			}
			published, found = c.Capacity.Value(), found+1
		}
		switch {
		case found == 0:
			return fmt.Sprintf("no CSIStorageCapacity of class %s for node %s yet", class, name)
		case found > 1:
			return fmt.Sprintf("%d CSIStorageCapacity objects of class %s for node %s", found, class, name)
		case published != free[name]:
			return fmt.Sprintf("node %s: %s published, %s free in its ledgers", name, Bytes(published), Bytes(free[name]))
		}
	}
	return ""
}

// selects reports whether a CSIStorageCapacity's node topology selects a
// node with these labels; a nil topology selects none.
func selects(topology *metav1.LabelSelector, nodeLabels map[string]string) bool {
	if topology == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(topology)
	return err == nil && s.Matches(labels.Set(nodeLabels))
}
