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

// Bind writes the reservations of the pod's volumes on node (Reserve), then
// binds the pod there: kube-scheduler calls it when the extender is its
// binder (bindVerb), so the node is known the moment it is chosen. A
// reservation the node's ledgers have no room for fails the bind, and
// kube-scheduler schedules the pod again.
func (e *Extender) Bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) error {
	key := types.NamespacedName{Namespace: args.PodNamespace, Name: args.PodName}
	if _, err := e.Reserve(ctx, key, args.PodUID, args.Node); err != nil {
		return err
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

// Reserve writes the reservations of the pod with key and uid on node into
// the node's ledgers, before the pod is bound there: Bind's first step, and
// the diskschedule scheduler plugin's PreBind. A pod not in flight (let
// through by another leader, or before a restart) is adopted on node first.
// A reservation a ledger has no room for fails with ErrRefused. It returns
// the pod's reservations the ledgers hold, for AwaitDecisions.
func (e *Extender) Reserve(ctx context.Context, key types.NamespacedName, uid types.UID, node string) ([]Reservation, error) {
	disks, later := e.flight.bindDisks(uid, node)
	e.adoptLater(e.background, later)
	if disks == nil {
		// Not in flight: filtered by another leader or before a restart.
		if _, err := e.adopt(ctx, key, uid, node, knownByBind); err != nil {
			return nil, fmt.Errorf("reserving the space of pod %s on node %s: %w", key, node, err)
		}
		disks, later = e.flight.bindDisks(uid, node)
		e.adoptLater(e.background, later)
	}
	var held []Reservation
	for _, disk := range disks {
		written, err := e.commitDisk(ctx, disk, uid)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				e.flight.expirePod(uid, "bind-failed")
			}
			return nil, fmt.Errorf("reserving the space of pod %s on node %s: %w", key, node, err)
		}
		held = append(held, written...)
	}
	return held, nil
}
