// Package clusterview reads what every scheduling decision starts from: the
// scheduling settings, Longhorn's nodes and the DiskSchedule ledgers of
// Longhorn's namespace, usually from the manager's cache.
package clusterview

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/settings"
)

// View is a snapshot of the settings, nodes and ledgers of one namespace.
type View struct {
	// Settings are the scheduling settings; invalid values keep their defaults.
	Settings settings.Scheduling
	// Nodes are Longhorn's nodes.
	Nodes []lhv1.Node
	// Ledgers are the DiskSchedules by disk UUID.
	Ledgers map[string]*dsv1.DiskSchedule
}

// Settings reads the scheduling settings of namespace: Longhorn's Setting
// objects and the extender's ConfigMap. Invalid values keep their defaults
// and are returned by name, for the caller to report. opts apply to the
// list of Settings (client.UnsafeDisableDeepCopy for read-only callers).
func Settings(ctx context.Context, r client.Reader, namespace string, opts ...client.ListOption) (settings.Scheduling, map[string]error, error) {
	list := &lhv1.SettingList{}
	if err := r.List(ctx, list, append([]client.ListOption{client.InNamespace(namespace)}, opts...)...); err != nil {
		return settings.Scheduling{}, nil, fmt.Errorf("listing Longhorn settings: %w", err)
	}
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: settings.ConfigMapName}, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			return settings.Scheduling{}, nil, fmt.Errorf("reading ConfigMap %s: %w", settings.ConfigMapName, err)
		}
		cm = nil
	}
	s, invalid := settings.FromObjects(list.Items, cm)
	return s, invalid, nil
}

// Load reads the settings, nodes and ledgers of namespace. opts apply to the
// node and ledger lists (client.UnsafeDisableDeepCopy for read-only callers).
func Load(ctx context.Context, r client.Reader, namespace string, opts ...client.ListOption) (*View, error) {
	sched, _, err := Settings(ctx, r, namespace)
	if err != nil {
		return nil, err
	}
	opts = append([]client.ListOption{client.InNamespace(namespace)}, opts...)
	nodes := &lhv1.NodeList{}
	if err := r.List(ctx, nodes, opts...); err != nil {
		return nil, fmt.Errorf("listing Longhorn nodes: %w", err)
	}
	ledgers := &dsv1.DiskScheduleList{}
	if err := r.List(ctx, ledgers, opts...); err != nil {
		return nil, fmt.Errorf("listing DiskSchedules: %w", err)
	}
	v := &View{Settings: sched, Nodes: nodes.Items, Ledgers: make(map[string]*dsv1.DiskSchedule, len(ledgers.Items))}
	for i := range ledgers.Items {
		v.Ledgers[ledgers.Items[i].Name] = &ledgers.Items[i]
	}
	return v, nil
}
