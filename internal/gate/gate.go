package gate

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/backingimage"
	"github.com/longhorn/diskschedule/internal/controller/replica"
	"github.com/longhorn/diskschedule/internal/controller/volume"
	"github.com/longhorn/diskschedule/internal/leader"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/requirement"
)

const (
	// ConfigurationName is the ValidatingWebhookConfiguration the gate serves.
	ConfigurationName = "diskschedule-gate"
	// ReplicaPath, VolumePath and BackingImagePath are the gate's webhook paths.
	ReplicaPath      = "/validate-longhorn-io-v1beta2-replica"
	VolumePath       = "/validate-longhorn-io-v1beta2-volume"
	BackingImagePath = "/validate-longhorn-io-v1beta2-backingimage"
	// DefaultDecisionTimeout bounds how long one admission waits for the
	// ledger; it stays under the webhook configuration's timeoutSeconds (10).
	DefaultDecisionTimeout = 8 * time.Second
)

// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=diskschedules,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=replicas,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=longhorn-system,resources=events,verbs=create;patch
// The rotator keeps one Secret and two webhook configurations, read by
// name only (byName), so the rules name them.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=diskschedule-gate,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=diskschedule-pods,verbs=get;list;watch;update
// +kubebuilder:rbac:groups="",namespace=longhorn-system,resources=secrets,resourceNames=longhorn-diskschedule-webhook-cert,verbs=get;list;watch;update

// Gate answers the admission requests of Longhorn's space-taking writes:
// each kind's package plans the answer, one executor carries the plans out.
type Gate struct {
	decoder  admission.Decoder
	recorder events.EventRecorder
	metrics  *metrics.Gate
	waiter   *requirement.Waiter
	exec     *requirement.Executor
	lease    *leader.Lease
	log      logr.Logger
	timeout  time.Duration
	// watching is set once DiskSchedule updates wake waiting requests.
	watching atomic.Bool
	// onDenied, when set, is told of every write denied (OnDenied).
	onDenied func(obj client.Object, message string, at time.Time)
}

// OnDenied makes the gate call f, without waiting, for every write it
// denies (not dry runs or malformed requests): the Longhorn object as
// written, the denial's words and when. Tests and the sandbox measure
// from it how long a denial stalls a volume. Call before the manager
// starts.
func (g *Gate) OnDenied(f func(obj client.Object, message string, at time.Time)) {
	g.onDenied = f
}

// New returns the gate of mgr for Longhorn's namespace; timeout bounds
// each admission's wait for the ledger (DefaultDecisionTimeout when not
// positive). lease, when not nil, is the leader-election Lease the gate
// follows so that a write is answered at once, denied, while no leader
// decides (requirement.ErrNoLeader) rather than held for timeout; nil
// counts a leader as always deciding (a manager without leader election).
func New(mgr ctrl.Manager, m *metrics.Gate, namespace string, timeout time.Duration, lease *leader.Lease) *Gate {
	if timeout <= 0 {
		timeout = DefaultDecisionTimeout
	}
	waiter := requirement.NewWaiter(clock.RealClock{})
	log := mgr.GetLogger().WithName("gate")
	var l requirement.Leader
	if lease != nil {
		l = lease
	}
	return &Gate{
		decoder:  admission.NewDecoder(mgr.GetScheme()),
		recorder: mgr.GetEventRecorder("diskschedule-gate"),
		metrics:  m,
		waiter:   waiter,
		// The gate's waits run on the real clock: a manager's Options.Clock
		// is the ledger's and the mirror's.
		exec:    requirement.NewExecutor(mgr.GetClient(), mgr.GetAPIReader(), waiter, l, clock.RealClock{}, m, log, namespace),
		lease:   lease,
		log:     log,
		timeout: timeout,
	}
}

// SetupWithManager registers the three kinds' handlers on mgr's webhook
// server and the DiskSchedule informer handler that wakes waiting
// requests. Both run on every manager replica, leader or not.
func (g *Gate) SetupWithManager(mgr ctrl.Manager) error {
	srv := mgr.GetWebhookServer()
	srv.Register(ReplicaPath, &webhook.Admission{Handler: g.handler("replica", func() client.Object { return &lhv1.Replica{} },
		replica.NewHandler(g.exec))})
	srv.Register(VolumePath, &webhook.Admission{Handler: g.handler("volume", func() client.Object { return &lhv1.Volume{} },
		volume.NewHandler(g.exec))})
	srv.Register(BackingImagePath, &webhook.Admission{Handler: g.handler("backingimage", func() client.Object { return &lhv1.BackingImage{} },
		backingimage.NewHandler(g.exec))})
	if err := mgr.Add(watchLedgers{g: g, cache: mgr.GetCache()}); err != nil {
		return fmt.Errorf("adding the gate's ledger watch: %w", err)
	}
	if g.lease != nil {
		if err := mgr.Add(leader.Watch{Lease: g.lease, Cache: mgr.GetCache()}); err != nil {
			return fmt.Errorf("adding the gate's leader-election Lease watch: %w", err)
		}
	}
	return nil
}

// Ready reports an error until the gate is woken by ledger updates and,
// with a Lease, knows whether a leader decides.
func (g *Gate) Ready() error {
	if !g.watching.Load() {
		return fmt.Errorf("the gate does not watch the ledgers yet")
	}
	if g.lease != nil {
		return g.lease.Ready()
	}
	return nil
}

// watchLedgers subscribes the gate's waiter to DiskSchedule updates once
// the cache runs, on every replica.
type watchLedgers struct {
	g     *Gate
	cache cache.Cache
}

// NeedLeaderElection is false: every replica serves the gate.
func (watchLedgers) NeedLeaderElection() bool { return false }

// Start adds the informer handler and returns.
func (w watchLedgers) Start(ctx context.Context) error {
	informer, err := w.cache.GetInformer(ctx, &dsv1.DiskSchedule{})
	if err != nil {
		return fmt.Errorf("getting the DiskSchedule informer: %w", err)
	}
	if _, err := informer.AddEventHandler(w.g.waiter.Handler()); err != nil {
		return fmt.Errorf("watching DiskSchedules: %w", err)
	}
	w.g.watching.Store(true)
	return nil
}

// handler returns the admission handler of one kind: it bounds the time,
// records the metrics, logs, and puts an Event on the Longhorn object for
// every denial.
func (g *Gate) handler(kind string, newObject func() client.Object,
	answer func(context.Context, requirement.Admission) requirement.Answer) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		start := time.Now()
		ctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		a := answer(ctx, requirement.Admission{Request: req, Decoder: g.decoder})
		elapsed := time.Since(start)
		g.metrics.Decisions.WithLabelValues(kind, a.Result).Inc()
		if a.RoundTrip {
			g.metrics.LedgerRoundTrips.WithLabelValues(kind).Inc()
		}
		g.metrics.Latency.WithLabelValues(kind).Observe(elapsed.Seconds())
		log := g.log.WithValues("kind", kind, "name", req.Name, "operation", req.Operation, "result", a.Result, "ledgerRoundTrip", a.RoundTrip, "duration", elapsed)
		if a.Allowed {
			log.V(1).Info("admitted", "reason", a.Message)
			return a.Response()
		}
		log.Info("refused", "reason", a.Message)
		if a.Result != requirement.ResultMalformed && !(req.DryRun != nil && *req.DryRun) {
			obj := newObject()
			if err := g.decoder.DecodeRaw(req.Object, obj); err == nil {
				g.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "DiskScheduleDenied", "Admit", "%s", a.Message)
				if g.onDenied != nil {
					g.onDenied(obj, a.Message, start.Add(elapsed))
				}
			}
		}
		return a.Response()
	})
}
