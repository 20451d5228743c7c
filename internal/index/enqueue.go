package index

import (
	"context"
	"fmt"
	"slices"
	"strings"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DiskKeys returns the UUIDs of the disks whose ledgers a Longhorn object
// concerns, and a fingerprint of what those ledgers read of it: an update
// that changes neither enqueues nothing.
type DiskKeys func(obj client.Object) (disks []string, fingerprint string)

// ReplicaDisks is the DiskKeys of a Longhorn Replica: its spec.diskID, and
// its diskID and volumeSize as fingerprint.
func ReplicaDisks(obj client.Object) ([]string, string) {
	r, ok := obj.(*lhv1.Replica)
	if !ok {
		return nil, ""
	}
	return nonEmpty(r.Spec.DiskID), fmt.Sprintf("%s/%d", r.Spec.DiskID, r.Spec.VolumeSize)
}

// BackingImageDisks is the DiskKeys of a Longhorn BackingImage: the disks
// of its spec.diskFileSpecMap, and those and its status.realSize (the size
// of a copy on a disk) as fingerprint.
func BackingImageDisks(obj client.Object) ([]string, string) {
	if _, ok := obj.(*lhv1.BackingImage); !ok {
		return nil, ""
	}
	disks := backingImageDisks(obj)
	slices.Sort(disks)
	return disks, fmt.Sprintf("%s/%d", strings.Join(disks, ","), obj.(*lhv1.BackingImage).Status.RealSize)
}

// EnqueueDisks returns an event handler that enqueues the DiskSchedule (in
// the object's namespace) of every disk keys names, before and after an
// update, so a ledger the object leaves hears of it as well as the one it
// joins. Updates that change neither the disks nor the fingerprint, such as
// Longhorn's frequent status writes, enqueue nothing.
func EnqueueDisks(keys DiskKeys) handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object) {
		disks, _ := keys(obj)
		for _, uuid := range disks {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: uuid}})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			oldDisks, oldPrint := keys(e.ObjectOld)
			newDisks, newPrint := keys(e.ObjectNew)
			if oldPrint == newPrint && slices.Equal(oldDisks, newDisks) {
				return
			}
			add(q, e.ObjectOld)
			add(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
	}
}
