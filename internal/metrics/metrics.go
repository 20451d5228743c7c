// Package metrics defines diskschedule's Prometheus metrics, registered with
// controller-runtime's registry so the manager's /metrics endpoint serves them.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Ledger holds the DiskSchedule controller's metrics.
type Ledger struct {
	// Decisions counts ledger decisions by result (granted, rejected,
	// released, adopted).
	Decisions *prometheus.CounterVec
	// Pending is the number of requests per disk without a decision in the
	// ledger's status: set when the controller reads the ledger, lowered
	// once its decisions are written.
	Pending *prometheus.GaugeVec
	// StorageScheduled is each disk's storageScheduled in bytes.
	StorageScheduled *prometheus.GaugeVec
	// StorageLimit is each disk's storageLimit in bytes.
	StorageLimit *prometheus.GaugeVec
	// StatusWrites counts ledger status writes by result (ok, conflict, error).
	StatusWrites *prometheus.CounterVec
	// BeyondLonghorn is what each ledger holds or is asked for beyond
	// Longhorn's own accounting, by kind (ledger.BeyondLonghorn).
	BeyondLonghorn *prometheus.GaugeVec
	// InvariantViolations counts, per disk, the status writes the
	// controller did not make because the status would have broken the
	// ledger's invariant (ledger.Violation).
	InvariantViolations *prometheus.CounterVec
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
			Help: "Requests in a ledger's spec without a decision in its status, as the ledger controller last read it: they count until its decisions are written.",
		}, []string{"node", "disk"})),
		StorageScheduled: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "longhorn_diskschedule_storage_scheduled_bytes",
			Help: "Bytes granted on a disk (status.storageScheduled).",
		}, []string{"node", "disk"})),
		StorageLimit: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "longhorn_diskschedule_storage_limit_bytes",
			Help: "Bytes that may be granted on a disk (status.storageLimit).",
		}, []string{"node", "disk"})),
		BeyondLonghorn: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "longhorn_diskschedule_beyond_longhorn_bytes",
			Help: "Bytes a ledger holds or is asked for beyond what Longhorn's own accounting counts on the disk, by kind: pending (requested, not decided), unbacked (granted to a replica or backing-image copy Longhorn has not persisted there) and reserved (the extender's granted reservations). Short-lived by design; while it is not zero, a placement Longhorn finds room for may be denied.",
		}, []string{"node", "disk", "kind"})),
		StatusWrites: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_diskschedule_status_writes_total",
			Help: "Ledger status writes by result: ok, conflict or error.",
		}, []string{"result"})),
		InvariantViolations: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_diskschedule_invariant_violations_total",
			Help: "Ledger status writes not made because the status would have broken the ledger's invariant (storageScheduled the sum of its entries, and at most storageLimit unless Overcommitted=True). Any increase is a defect: the disk's decisions wait until its inputs change.",
		}, []string{"node", "disk"})),
	}
}

// Mirror holds the mirror's metrics.
type Mirror struct {
	// Changes counts ledger entries changed by the mirror, by action:
	// adopted, raised, lowered or released.
	Changes *prometheus.CounterVec
	// Writes counts the mirror's spec writes by result (ok, conflict, error).
	Writes *prometheus.CounterVec
}

// NewMirror creates the mirror metrics and registers them with reg, sharing
// collectors already registered.
func NewMirror(reg prometheus.Registerer) *Mirror {
	return &Mirror{
		Changes: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_diskschedule_mirror_changes_total",
			Help: "Ledger entries the mirror changed to match what Longhorn persisted, by action: adopted, raised, lowered or released.",
		}, []string{"action"})),
		Writes: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_diskschedule_mirror_writes_total",
			Help: "Ledger spec writes of the mirror by result: ok, conflict or error.",
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

// Extender holds the kube-scheduler extender's metrics.
type Extender struct {
	// Heartbeat is 1 while this manager serves the extender, per node.
	Heartbeat *prometheus.GaugeVec
	// FilterDuration is the time from request decode to response.
	FilterDuration prometheus.Histogram
	// PodSchedulingWait is the time from a pod's filter until its node is
	// known, by pod_scheduled (false: it expired first).
	PodSchedulingWait *prometheus.HistogramVec
	// NodeReservation is the time from a pod's node being known until the
	// ledgers show its space, by replicas_scheduled (false: refused).
	NodeReservation *prometheus.HistogramVec
	// InFlight is the number of pods let through whose space the ledgers do
	// not show yet (the in-flight overlay).
	InFlight prometheus.Gauge
	// FilterWait is how long filters waited for pods in flight to leave
	// room, by passed (whether the pod then fit on some node).
	FilterWait *prometheus.HistogramVec
	// Expired counts overlay entries dropped before the ledgers showed their
	// space, by reason.
	Expired *prometheus.CounterVec
	// Fenced is 1 while a new leader waits for the old leader's pods to bind.
	Fenced prometheus.Gauge
	// FencedFilters counts filters refused during the fence.
	FencedFilters prometheus.Counter
	// PackingSteps is the number of search steps per node evaluation.
	PackingSteps prometheus.Histogram
	// PackingFallbacks counts evaluations decided by the greedy fallback.
	PackingFallbacks prometheus.Counter
	// Reservations counts reservations by the ledger's decision, and those
	// refused before writing.
	Reservations *prometheus.CounterVec
	// ReservationBatch is the number of pods being bound whose
	// reservations on one disk went out in one write (a group commit).
	ReservationBatch prometheus.Histogram
}

// NewExtender creates the extender metrics and registers them with reg,
// sharing collectors already registered.
func NewExtender(reg prometheus.Registerer) *Extender {
	return &Extender{
		Heartbeat: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "longhorn_scheduler_extender_heartbeat",
			Help: "1 while this manager serves the scheduler extender; the node label names where it runs.",
		}, []string{"node"})),
		FilterDuration: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "longhorn_scheduler_extender_filter_duration_seconds",
			Help:    "Time from filter request decode to response sent.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		})),
		PodSchedulingWait: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "longhorn_scheduler_extender_pod_scheduling_wait_duration_seconds",
			Help:    "Time from a pod's filter until its node is known (binding, selected-node, nomination or /bind); pod_scheduled=false when it expired first.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"pod_scheduled"})),
		NodeReservation: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "longhorn_scheduler_extender_node_reservation_duration_seconds",
			Help:    "Time from a pod's node being known until the ledgers show its space; replicas_scheduled=false when a reservation was refused.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"replicas_scheduled"})),
		PackingSteps: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "longhorn_scheduler_extender_packing_steps",
			Help:    "Search steps used to pack a pod's volumes onto one node's disks.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		})),
		PackingFallbacks: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "longhorn_scheduler_extender_packing_fallbacks_total",
			Help: "Node evaluations decided by the greedy fallback after the exact search ran out of steps.",
		})),
		Reservations: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_scheduler_extender_reservations_total",
			Help: "Reservations written by the extender, by the ledger's decision (scheduled, rejected, fulfilled, expired), and those refused before writing for lack of room (refused).",
		}, []string{"result"})),
		ReservationBatch: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "longhorn_scheduler_extender_reservation_batch_pods",
			Help:    "Pods being bound (the plugin's PreBind, the extender's /bind) whose reservations on one disk went out in one write: those that came while the disk's previous write was in flight join the next.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 8),
		})),
		InFlight: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "longhorn_scheduler_extender_inflight_pods",
			Help: "Pods let through by the filter whose space the ledgers do not show yet.",
		})),
		FilterWait: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "longhorn_scheduler_extender_filter_wait_duration_seconds",
			Help:    "Time filters waited for pods in flight to leave room; passed tells whether the pod then fit.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"passed"})),
		Expired: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_scheduler_extender_inflight_expired_total",
			Help: "Pods in flight dropped before the ledgers showed their space, by reason (deleted, no-node, no-reservation, bind-failed).",
		}, []string{"reason"})),
		Fenced: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "longhorn_scheduler_extender_fenced",
			Help: "1 while a new leader answers no filter, until the pods the previous leader let through have bound.",
		})),
		FencedFilters: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "longhorn_scheduler_extender_fenced_filters_total",
			Help: "Filters refused while the extender was fenced after a leader change.",
		})),
	}
}

// Longhorn holds the metrics of the Longhorn release the add-on runs next to.
type Longhorn struct {
	// Version is 1 for the release Longhorn's Setting
	// current-longhorn-version holds (label version, "" when unknown), with
	// tested "true" when it is a release the project is tested against;
	// exported by the leader.
	Version *prometheus.GaugeVec
}

// NewLonghorn registers the Longhorn release's metrics with reg.
func NewLonghorn(reg prometheus.Registerer) *Longhorn {
	return &Longhorn{
		Version: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "longhorn_diskschedule_longhorn_version_info",
			Help: "1 for the Longhorn release of the Setting current-longhorn-version (version), tested \"true\" when the project is tested against it (v1.10.x, v1.11.x, v1.12.x); exported by the leader.",
		}, []string{"version", "tested"})),
	}
}

// Config holds the metrics of the extender's settings, the ConfigMap
// diskschedule-config.
type Config struct {
	// ExtenderEnabled is 1 while the settings in effect enable the scheduler
	// extender (scheduler-extender-enabled), 0 while they disable it. It has
	// no labels and is exported once the config controller, which runs on
	// the leader, has read the settings.
	ExtenderEnabled *prometheus.GaugeVec
}

// NewConfig creates the settings' metrics and registers them with reg
// (shared when already registered).
func NewConfig(reg prometheus.Registerer) *Config {
	return &Config{
		ExtenderEnabled: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "longhorn_scheduler_extender_enabled",
			Help: "1 while the ConfigMap diskschedule-config enables the scheduler extender (scheduler-extender-enabled in effect), 0 while it disables it; exported by the leader.",
		}, nil)),
	}
}

// Gate holds the admission gate's metrics.
type Gate struct {
	// Decisions counts the gate's answers by kind (replica, volume,
	// backingimage) and result (admitted, denied, undecided, error, malformed).
	Decisions *prometheus.CounterVec
	// LedgerRoundTrips counts the gate's answers, by kind, that took a
	// ledger round trip (a request written, or found pending, and its
	// decision awaited); Decisions less these were answered from what the
	// gate read.
	LedgerRoundTrips *prometheus.CounterVec
	// Latency is how long the gate took to answer, by kind.
	Latency *prometheus.HistogramVec
	// LedgerConflicts counts the gate's ledger writes that lost the
	// optimistic lock and were retried.
	LedgerConflicts prometheus.Counter
	// BatchSize is how many requests each ledger write of the gate
	// carried (requirement.Batcher's group commit per disk).
	BatchSize prometheus.Histogram
	// BatchWait is how long the first request of each batch waited for
	// the write in flight ahead of it.
	BatchWait prometheus.Histogram
}

// NewGate creates the gate's metrics and registers them with reg (shared
// when already registered).
func NewGate(reg prometheus.Registerer) *Gate {
	return &Gate{
		Decisions: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_diskschedule_gate_decisions_total",
			Help: "Admission gate answers by kind (replica, volume, backingimage) and result (admitted, denied, undecided, error, malformed).",
		}, []string{"kind", "result"})),
		LedgerRoundTrips: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_diskschedule_gate_ledger_round_trips_total",
			Help: "Admission gate answers, by kind (replica, volume, backingimage), that took a ledger round trip: a request written into a DiskSchedule (or found there undecided) and the leader's decision awaited. The rest of longhorn_diskschedule_gate_decisions_total was answered from what the gate read.",
		}, []string{"kind"})),
		Latency: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "longhorn_diskschedule_gate_duration_seconds",
			Help:    "Time the admission gate took to answer, by kind.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"kind"})),
		LedgerConflicts: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "longhorn_diskschedule_gate_ledger_conflicts_total",
			Help: "Ledger writes of the admission gate that lost the optimistic lock and were retried.",
		})),
		BatchSize: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "longhorn_diskschedule_gate_ledger_batch_size",
			Help:    "Requests the admission gate wrote to a disk's ledger in one write: requests arriving while a write to the ledger is in flight go together in the next.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		})),
		BatchWait: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "longhorn_diskschedule_gate_ledger_batch_wait_seconds",
			Help:    "Time the first request of each of the admission gate's ledger writes waited for the write in flight ahead of it.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		})),
	}
}

// PodWebhook holds the pod opt-in webhook's (diskschedule-pods) metrics.
type PodWebhook struct {
	// Decisions counts the webhook's answers by result (mutated,
	// unchanged, not-longhorn, claim-missing, error).
	Decisions *prometheus.CounterVec
	// Latency is how long the webhook took to answer.
	Latency prometheus.Histogram
}

// NewPodWebhook creates the pod webhook's metrics and registers them with
// reg (shared when already registered).
func NewPodWebhook(reg prometheus.Registerer) *PodWebhook {
	return &PodWebhook{
		Decisions: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_diskschedule_pod_webhook_decisions_total",
			Help: "Answers of the pod opt-in webhook (diskschedule-pods) by result: mutated, unchanged, not-longhorn, claim-missing or error. Every pod is allowed.",
		}, []string{"result"})),
		Latency: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "longhorn_diskschedule_pod_webhook_duration_seconds",
			Help:    "Time the pod opt-in webhook (diskschedule-pods) took to answer.",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		})),
	}
}
