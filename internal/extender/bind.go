package extender

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// +kubebuilder:rbac:groups="",resources=pods/binding,verbs=create

// Bind writes the reservations of the pod's volumes on node, then binds the
// pod there: kube-scheduler calls it when the extender is its binder
// (bindVerb), so the node is known the moment it is chosen. A reservation
// the node's ledgers have no room for fails the bind, and kube-scheduler
// schedules the pod again.
func (e *Extender) Bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) error {
	key := types.NamespacedName{Namespace: args.PodNamespace, Name: args.PodName}
	disks, later := e.flight.bindDisks(args.PodUID, args.Node)
	e.adoptLater(e.background, later)
	if disks == nil {
		// Not in flight: filtered by another leader or before a restart.
		if _, err := e.adopt(ctx, key, args.PodUID, args.Node, knownByBind); err != nil {
			return fmt.Errorf("reserving the space of pod %s on node %s: %w", key, args.Node, err)
		}
		disks, later = e.flight.bindDisks(args.PodUID, args.Node)
		e.adoptLater(e.background, later)
	}
	for _, disk := range disks {
		if err := e.writeDisk(ctx, disk, args.PodUID); err != nil {
			if !errors.Is(err, errRefused) {
				e.flight.expirePod(args.PodUID, "bind-failed")
			}
			return fmt.Errorf("reserving the space of pod %s on node %s: %w", key, args.Node, err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: args.PodUID}}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: args.PodUID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: args.Node},
	}
	if err := e.opts.Client.SubResource("binding").Create(ctx, pod, binding); err != nil {
		return fmt.Errorf("binding pod %s to node %s: %w", key, args.Node, err)
	}
	return nil
}
