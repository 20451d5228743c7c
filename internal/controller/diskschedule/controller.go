package diskschedule

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/metrics"
)

// ReservationTimeouts is where the controller reads the extender's
// scheduler-extender-node-reservation-timeout (config.Store).
type ReservationTimeouts interface {
	// NodeReservationTimeout is how long a granted reservation lives.
	NodeReservationTimeout() time.Duration
	// ReservationTimeoutChanges delivers an event when the timeout changes.
	ReservationTimeoutChanges() <-chan event.GenericEvent
}

// conflictRetries bounds how many times one reconcile decides a ledger
// again, from the API server's version, after its status write lost to a
// concurrent spec write; then the ledger is requeued.
const conflictRetries = 3

// Reconciler decides the requests of every DiskSchedule.
type Reconciler struct {
	client client.Client
	// apiReader reads a ledger from the API server after a status write
	// lost on its resourceVersion (nil: the ledger is requeued instead).
	apiReader client.Reader
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	metrics   *metrics.Ledger
	workers   int
	timeouts  ReservationTimeouts
}

// NewReconciler returns a Reconciler. c reads from the manager's cache and
// writes DiskSchedule status; timeouts gives the reservation timeout;
// workers is how many ledgers are decided in parallel.
func NewReconciler(c client.Client, recorder events.EventRecorder, clk clock.PassiveClock, m *metrics.Ledger,
	workers int, timeouts ReservationTimeouts) *Reconciler {
	return &Reconciler{client: c, recorder: recorder, clock: clk, metrics: m, workers: workers, timeouts: timeouts}
}

// ReasonAdoptedOverLimit is the Warning Event reason on a DiskSchedule whose
// adopted allocations take it over its limit (rule 7).
const ReasonAdoptedOverLimit = "AdoptedOverLimit"

// ReasonReservationYielded is the Event reason on a pod whose volume's
// reservation was cut for a Longhorn placement or growth that fits what
// Longhorn counts on the disk (rule 6): the pod keeps its node, its
// volume's locality may be degraded.
const ReasonReservationYielded = "ReservationYielded"

// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=diskschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=diskschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=nodes;replicas;volumes;backingimages;settings,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=longhorn-system,resources=configmaps,resourceNames=diskschedule-config,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=longhorn-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile decides every undecided request of one DiskSchedule: get →
// compute → one status write. A status write that lost to a concurrent
// write of the spec (a requester's, the mirror's) is decided again at once
// from the API server's version, up to conflictRetries times, rather than
// from the cache, which has not seen the write that won yet: on a ledger
// that requesters write many times a second (a burst of placements, a new
// leader's first seconds) each decision from the cache would lose again.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ds := &dsv1.DiskSchedule{}
	if err := r.client.Get(ctx, req.NamespacedName, ds); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	for attempt := 0; ; attempt++ {
		result, conflict, err := r.decide(ctx, ds)
		if !conflict {
			return result, err
		}
		if r.apiReader == nil || attempt == conflictRetries {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		ds = &dsv1.DiskSchedule{}
		if err := r.apiReader.Get(ctx, req.NamespacedName, ds); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
}

// decide decides ds, as read, and has writeStatus write the decisions with
// the resourceVersion they were computed from (rule 9); conflict reports
// that the write lost to a concurrent writer (or found the ledger gone).
func (r *Reconciler) decide(ctx context.Context, ds *dsv1.DiskSchedule) (result ctrl.Result, conflict bool, err error) {
	if !ds.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, false, nil
	}
	// The requests waiting for this decision count as pending until the
	// decisions are written: a ledger that cannot be decided shows them.
	r.observePending(ds)
	in, err := r.input(ctx, ds)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	status, outcome := ledger.Decide(in)
	r.observeStorage(ds, status, in.Persisted)

	if !outcome.NextExpiry.IsZero() {
		result.RequeueAfter = max(outcome.NextExpiry.Sub(in.Now), 0) + 10*time.Millisecond
	}
	if equality.Semantic.DeepEqual(ds.Status, status) {
		return result, false, nil
	}
	written, conflict, err := r.writeStatus(ctx, statusPlan{ledger: ds, status: status, outcome: outcome})
	if !written {
		return ctrl.Result{}, conflict, err
	}
	return result, false, nil
}

// statusPlan is one decision to write: the ledger as read (its
// resourceVersion is the one the decision was computed from) and its next
// status, with the decision's outcome for metrics and Events.
type statusPlan struct {
	ledger  *dsv1.DiskSchedule
	status  dsv1.DiskScheduleStatus
	outcome ledger.Outcome
}

// ReasonInvariantViolation is the Warning Event reason on a DiskSchedule
// whose decided status would break the ledger's invariant
// (ledger.Violation): that status is not written.
const ReasonInvariantViolation = "InvariantViolation"

// writeStatus is the one writer of DiskSchedule status: it writes the
// plan's status with the resourceVersion it was decided from (rule 9),
// unless that status breaks the ledger's invariant (ledger.Violation,
// rule 2, adoption excepted), which it reports (Event, metric, log) and
// does not write. written reports a status written; conflict that the
// write lost to a concurrent writer (or found the ledger gone).
func (r *Reconciler) writeStatus(ctx context.Context, p statusPlan) (written, conflict bool, err error) {
	log := ctrl.LoggerFrom(ctx)
	ds, status, outcome := p.ledger, p.status, p.outcome
	if v := ledger.Violation(status); v != "" {
		r.metrics.InvariantViolations.WithLabelValues(ds.Spec.NodeID, ds.Spec.Name).Inc()
		log.Error(nil, "Not writing a ledger status that breaks the ledger's invariant", "diskSchedule", klog.KObj(ds),
			"violation", v, "storageScheduled", status.StorageScheduled, "storageLimit", status.StorageLimit)
		r.recorder.Eventf(ds, nil, corev1.EventTypeWarning, ReasonInvariantViolation, "Decide",
			"Decisions not written: %s; the ledger keeps its previous status until its inputs change", v)
		return false, false, nil
	}
	// Update (not a merge patch) carries the resourceVersion the decision was
	// computed from: a concurrent writer makes it fail with a conflict (rule 9).
	ds.Status = status
	if err := r.client.Status().Update(ctx, ds); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The version that won arrives through the watch and is decided
			// then; the retry is for a watch that lags.
			r.metrics.StatusWrites.WithLabelValues("conflict").Inc()
			return false, true, nil
		}
		r.metrics.StatusWrites.WithLabelValues("error").Inc()
		return false, false, fmt.Errorf("writing the decisions of DiskSchedule %s: %w", ds.Name, err)
	}
	r.observePending(ds)
	r.metrics.StatusWrites.WithLabelValues("ok").Inc()
	r.count(outcome)
	if outcome.Adopted > 0 && status.StorageScheduled > status.StorageLimit {
		r.recorder.Eventf(ds, nil, corev1.EventTypeWarning, ReasonAdoptedOverLimit, "Decide",
			"Adopted %d requests Longhorn already persisted on the disk: %d bytes scheduled, over the limit of %d; new growth is rejected until usage falls below it",
			outcome.Adopted, status.StorageScheduled, status.StorageLimit)
	}
	r.announceYields(ctx, ds, outcome.Yielded)
	if outcome.Granted+outcome.Rejected+outcome.Released > 0 {
		log.V(1).Info("Decided ledger requests", "diskSchedule", klog.KObj(ds), "granted", outcome.Granted,
			"rejected", outcome.Rejected, "released", outcome.Released, "adopted", outcome.Adopted,
			"storageScheduled", status.StorageScheduled, "storageLimit", status.StorageLimit)
	}
	return true, false, nil
}

// announceYields records, on the pod of each reservation cut for a
// Longhorn write (rule 6), an Event saying why.
func (r *Reconciler) announceYields(ctx context.Context, ds *dsv1.DiskSchedule, yields []ledger.Yield) {
	log := ctrl.LoggerFrom(ctx)
	for _, y := range yields {
		log.Info("Reservation yielded to a Longhorn write", "diskSchedule", klog.KObj(ds), "volume", y.Volume, "pod", y.Pod, "message", y.Message)
		namespace, name, ok := strings.Cut(y.Pod, "/")
		if !ok {
			continue
		}
		pod := &corev1.Pod{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
			if !apierrors.IsNotFound(err) {
				log.Error(err, "Reading the pod of a reservation that yielded", "pod", y.Pod)
			}
			continue
		}
		r.recorder.Eventf(pod, ds, corev1.EventTypeNormal, ReasonReservationYielded, "Decide",
			"Reservation of volume %s on disk %s of node %s: %s", y.Volume, ds.Spec.Name, ds.Spec.NodeID, y.Message)
	}
}

// observeStorage exports the disk's scheduled bytes and limit as decided,
// and what the decided ledger holds beyond Longhorn's own accounting given
// what Longhorn persisted on the disk.
func (r *Reconciler) observeStorage(ds *dsv1.DiskSchedule, status dsv1.DiskScheduleStatus, persisted ledger.Owners) {
	labels := []string{ds.Spec.NodeID, ds.Spec.Name}
	r.metrics.StorageScheduled.WithLabelValues(labels...).Set(float64(status.StorageScheduled))
	r.metrics.StorageLimit.WithLabelValues(labels...).Set(float64(status.StorageLimit))
	decided := dsv1.DiskSchedule{Spec: ds.Spec, Status: status}
	beyond := ledger.BeyondLonghorn(&decided, persisted)
	for kind, bytes := range map[string]int64{"pending": beyond.Pending, "unbacked": beyond.Unbacked, "reserved": beyond.Reserved} {
		r.metrics.BeyondLonghorn.WithLabelValues(ds.Spec.NodeID, ds.Spec.Name, kind).Set(float64(bytes))
	}
}

// observePending exports how many of ds's requests its status leaves
// undecided.
func (r *Reconciler) observePending(ds *dsv1.DiskSchedule) {
	r.metrics.Pending.WithLabelValues(ds.Spec.NodeID, ds.Spec.Name).Set(float64(ledger.PendingCount(ds)))
}

func (r *Reconciler) count(o ledger.Outcome) {
	r.metrics.Decisions.WithLabelValues("granted").Add(float64(o.Granted - o.Adopted))
	r.metrics.Decisions.WithLabelValues("adopted").Add(float64(o.Adopted))
	r.metrics.Decisions.WithLabelValues("rejected").Add(float64(o.Rejected))
	r.metrics.Decisions.WithLabelValues("released").Add(float64(o.Released))
}
