package scenario

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	ledgerrules "github.com/longhorn/diskschedule/internal/ledger"
)

// LedgerRow is one disk's DiskSchedule ledger after a run, with what it
// decided during the run.
type LedgerRow struct {
	// Node and Disk name the disk (the Longhorn node and its disk name).
	Node, Disk string
	// Scheduled and Limit are status.storageScheduled and
	// status.storageLimit at the end of the run, in bytes.
	Scheduled, Limit int64
	// Granted counts the replica requests the ledger granted during the run.
	Granted int
	// Rejected counts the replica requests and reservations it rejected.
	Rejected int
	// Reserved counts the reservations (made by the extender for a pod
	// placed on this disk's node) it granted.
	Reserved int
}

// ledgerMonitor watches every DiskSchedule during a run: it counts the
// decisions each ledger makes and checks the ledger's invariant in every
// version it sees.
type ledgerMonitor struct {
	c         client.WithWatch
	namespace string
	cancel    context.CancelFunc
	done      chan error

	mu sync.Mutex
	// rv is the last resourceVersion looked at, per DiskSchedule.
	rv map[string]string
	// states is the last state of each status entry, per DiskSchedule.
	states     map[string]map[entry]string
	rows       map[string]*LedgerRow
	versions   int
	violations []string
}

// entry names a status entry of a ledger.
type entry struct {
	kind entryKind
	name string
}

type entryKind int

const (
	kindReplica entryKind = iota
	kindBackingImage
	kindReservation
)

// startLedgerMonitor reads the current ledgers as the baseline (their
// existing decisions are not counted) and watches them until stop.
func startLedgerMonitor(ctx context.Context, c client.WithWatch, namespace string) (*ledgerMonitor, error) {
	m := &ledgerMonitor{
		c: c, namespace: namespace, done: make(chan error, 1),
		rv: map[string]string{}, states: map[string]map[entry]string{}, rows: map[string]*LedgerRow{},
	}
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the DiskSchedules: %w", err)
	}
	for i := range list.Items {
		m.see(&list.Items[i], true)
	}
	wctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		m.done <- observe(wctx, c, &dsv1.DiskScheduleList{}, namespace, func(objs objects) bool {
			for _, o := range objs {
				m.see(o.(*dsv1.DiskSchedule), false)
			}
			return false
		})
	}()
	return m, nil
}

// see looks at one DiskSchedule version, once per resourceVersion. The
// baseline version only records the states of its entries.
func (m *ledgerMonitor) see(ds *dsv1.DiskSchedule, baseline bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rv[ds.Name] == ds.ResourceVersion {
		return
	}
	m.rv[ds.Name] = ds.ResourceVersion
	row := m.rows[ds.Name]
	if row == nil {
		row = &LedgerRow{Node: ds.Spec.NodeID, Disk: ds.Spec.Name}
		m.rows[ds.Name] = row
	}
	row.Scheduled, row.Limit = ds.Status.StorageScheduled, ds.Status.StorageLimit
	states := map[entry]string{}
	for name, st := range ds.Status.Replicas {
		states[entry{kindReplica, name}] = string(st.State)
	}
	for name, st := range ds.Status.BackingImages {
		states[entry{kindBackingImage, name}] = string(st.State)
	}
	for name, st := range ds.Status.Reservations {
		states[entry{kindReservation, name}] = string(st.State)
	}
	if !baseline {
		m.versions++
		prev := m.states[ds.Name]
		for k, state := range states {
			if prev[k] == state {
				continue
			}
			switch {
			case state == string(dsv1.RequestStateRejected) && k.kind != kindBackingImage:
				row.Rejected++
			case state == string(dsv1.ReservationStateScheduled) && k.kind == kindReservation:
				row.Reserved++
			case state == string(dsv1.RequestStateScheduled) && k.kind == kindReplica:
				row.Granted++
			}
		}
		if why := ledgerrules.Violation(ds.Status); why != "" {
			m.violations = append(m.violations, fmt.Sprintf("DiskSchedule %s (disk %s of node %s) version %s: %s",
				ds.Name, ds.Spec.Name, ds.Spec.NodeID, ds.ResourceVersion, why))
		}
	}
	m.states[ds.Name] = states
}

// stop ends the watch, looks at the ledgers once more so that the final
// versions are counted, and returns every disk's row (by node, then disk),
// the number of ledger versions seen, and the invariant violations.
func (m *ledgerMonitor) stop(ctx context.Context) ([]LedgerRow, int, []string, error) {
	m.cancel()
	err := <-m.done
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	list := &dsv1.DiskScheduleList{}
	if lerr := m.c.List(ctx, list, client.InNamespace(m.namespace)); lerr != nil {
		return nil, 0, nil, errors.Join(err, fmt.Errorf("listing the DiskSchedules: %w", lerr))
	}
	for i := range list.Items {
		m.see(&list.Items[i], false)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rows := make([]LedgerRow, 0, len(m.rows))
	for _, r := range m.rows {
		rows = append(rows, *r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Node != rows[j].Node {
			return rows[i].Node < rows[j].Node
		}
		return rows[i].Disk < rows[j].Disk
	})
	return rows, m.versions, append([]string(nil), m.violations...), err
}

// Bytes formats a byte count as a binary quantity (400Gi).
func Bytes(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }
