// Package metrics defines diskschedule's Prometheus metrics, registered with
// controller-runtime's registry so the manager's /metrics endpoint serves them.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Ledger holds the DiskSchedule controller's metrics.
type Ledger struct {
	// Decisions counts ledger decisions by kind (replica, backingImage,
	// reservation) and result (granted, rejected, released, adopted).
	Decisions *prometheus.CounterVec
	// Pending is the number of undecided requests per disk, as last seen.
	Pending *prometheus.GaugeVec
	// StorageScheduled is each disk's storageScheduled in bytes.
	StorageScheduled *prometheus.GaugeVec
	// StorageLimit is each disk's storageLimit in bytes.
	StorageLimit *prometheus.GaugeVec
	// StatusWrites counts ledger status writes by result (ok, conflict, error).
	StatusWrites *prometheus.CounterVec
}

// NewLedger creates the ledger metrics and registers them with reg. When
// they are already registered (a second manager in one process), the
// registered collectors are shared.
func NewLedger(reg prometheus.Registerer) *Ledger {
	return &Ledger{
		Decisions: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_diskschedule_decisions_total",
			Help: "Ledger decisions by result: granted, rejected, released or adopted.",
		}, []string{"result"})),
		Pending: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "longhorn_diskschedule_pending_requests",
			Help: "Requests in a ledger's spec not decided yet, as last reconciled.",
		}, []string{"node", "disk"})),
		StorageScheduled: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "longhorn_diskschedule_storage_scheduled_bytes",
			Help: "Bytes granted on a disk (status.storageScheduled).",
		}, []string{"node", "disk"})),
		StorageLimit: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "longhorn_diskschedule_storage_limit_bytes",
			Help: "Bytes that may be granted on a disk (status.storageLimit).",
		}, []string{"node", "disk"})),
		StatusWrites: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_diskschedule_status_writes_total",
			Help: "Ledger status writes by result: ok, conflict or error.",
		}, []string{"result"})),
	}
}

// register registers c with reg, or returns the collector already registered
// under the same descriptor.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(T); ok {
				return existing
			}
		}
		panic(err) // a programming error: two metrics share a name with different shapes
	}
	return c
}
