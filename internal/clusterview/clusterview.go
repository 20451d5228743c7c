// Package clusterview reads what every placement decision starts from: the
// scheduling settings, the Longhorn nodes and the DiskSchedule ledgers of
// the system namespace, usually from the manager's cache.
package clusterview

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/settings"
)

// View is a snapshot of the settings, nodes and ledgers of one namespace.
type View struct {
	// Settings are the scheduling settings; invalid values keep their
	// defaults (the setting controller reports them).
	Settings settings.Scheduling
	// Nodes are the Longhorn nodes.
	Nodes []longhornv1.Node
	// Ledgers are the DiskSchedules by disk UUID.
	Ledgers map[string]*longhornv1.DiskSchedule
}

// Settings reads the scheduling settings of namespace.
func Settings(ctx context.Context, r client.Reader, namespace string) (settings.Scheduling, error) {
	list := &longhornv1.SettingList{}
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return settings.Scheduling{}, fmt.Errorf("listing settings: %w", err)
	}
	s, _ := settings.FromObjects(list.Items)
	return s, nil
}

// Load reads the settings, nodes and ledgers of namespace. opts apply to the
// node and ledger lists (client.UnsafeDisableDeepCopy for read-only callers).
func Load(ctx context.Context, r client.Reader, namespace string, opts ...client.ListOption) (*View, error) {
	sched, err := Settings(ctx, r, namespace)
	if err != nil {
		return nil, err
	}
	opts = append([]client.ListOption{client.InNamespace(namespace)}, opts...)
	nodes := &longhornv1.NodeList{}
	if err := r.List(ctx, nodes, opts...); err != nil {
		return nil, fmt.Errorf("listing Longhorn nodes: %w", err)
	}
	ledgers := &longhornv1.DiskScheduleList{}
	if err := r.List(ctx, ledgers, opts...); err != nil {
		return nil, fmt.Errorf("listing DiskSchedules: %w", err)
	}
	v := &View{Settings: sched, Nodes: nodes.Items, Ledgers: make(map[string]*longhornv1.DiskSchedule, len(ledgers.Items))}
	for i := range ledgers.Items {
		v.Ledgers[ledgers.Items[i].Name] = &ledgers.Items[i]
	}
	return v, nil
}
