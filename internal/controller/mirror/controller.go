package mirror

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/metrics"
)

// DefaultGrace is how long an entry may stay unbacked by what Longhorn
// persisted before the mirror releases it (--gate-grace).
const DefaultGrace = 30 * time.Second

// conflictRetry is how soon a ledger whose spec write lost a conflict is
// planned again: a status write that won brings no event past the watch's
// generation predicate.
const conflictRetry = 50 * time.Millisecond

// Event reasons of the mirror, on DiskSchedules.
const (
	// ReasonAdopted: entries were added for replicas or backing-image copies Longhorn persisted on the disk.
	ReasonAdopted = "Adopted"
	// ReasonReleased: entries nothing persisted backs any more were removed.
	ReasonReleased = "Released"
)

// cacheRetry is how soon a ledger is looked at again when the API server
// showed that the cache is behind on a replica whose entry the plan would
// release.
const cacheRetry = time.Second

// Reconciler mirrors what Longhorn persisted into each DiskSchedule's spec.
type Reconciler struct {
	client   client.Client
	live     client.Reader
	recorder events.EventRecorder
	clock    clock.PassiveClock
	grace    time.Duration
	metrics  *metrics.Mirror

	mu     sync.Mutex
	memory map[types.NamespacedName]*Memory
}

// NewReconciler returns a mirror Reconciler; c reads from the manager's
// cache and writes DiskSchedule specs; live reads from the API server
// itself (the manager's APIReader), to confirm a release the cache alone
// would decide; grace is how long an unbacked entry is kept (DefaultGrace
// when not positive).
func NewReconciler(c client.Client, live client.Reader, recorder events.EventRecorder, clk clock.PassiveClock, grace time.Duration, m *metrics.Mirror) *Reconciler {
	if grace <= 0 {
		grace = DefaultGrace
	}
	return &Reconciler{client: c, live: live, recorder: recorder, clock: clk, grace: grace, metrics: m,
		memory: map[types.NamespacedName]*Memory{}}
}

// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=diskschedules,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=replicas;backingimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=longhorn-system,resources=events,verbs=create;patch

// Reconcile brings one DiskSchedule's spec in line with what Longhorn
// persisted on its disk: get → plan → one merge patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ds := &dsv1.DiskSchedule{}
	if err := r.client.Get(ctx, req.NamespacedName, ds); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ds.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	persisted, err := r.persisted(ctx, ds)
	if err != nil {
		return ctrl.Result{}, err
	}

	// The memory is updated with the plan; a write that fails leaves it
	// ahead of the spec, which the next plan corrects: an entry seen backed
	// stays so, and a waiting entry keeps its start.
	r.mu.Lock()
	mem := r.memory[req.NamespacedName]
	if mem == nil {
		mem = &Memory{}
		r.memory[req.NamespacedName] = mem
	}
	next, changes, recheck := Plan(ds.Spec, persisted, mem, r.clock.Now(), r.grace)
	r.mu.Unlock()

	result := ctrl.Result{}
	if recheck > 0 {
		result.RequeueAfter = recheck + 10*time.Millisecond
	}
	if len(changes) == 0 || reflect.DeepEqual(next, ds.Spec) {
		return result, nil
	}
	behind, err := r.cacheBehind(ctx, ds, changes)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(behind) > 0 {
		// The writes the gate admitted for these landed; the cache has not
		// seen them yet. Releasing them now would free space Longhorn
		// holds: their entries stay as they are and are looked at again,
		// while every other change is written (one replica the cache lags
		// on must not hold back the releases of the others).
		ctrl.LoggerFrom(ctx).V(1).Info("The cache is behind the API server: these releases wait", "diskSchedule", klog.KObj(ds), "replicas", behind)
		next, changes = keepEntries(next, ds.Spec, changes, behind)
		if result.RequeueAfter == 0 || result.RequeueAfter > cacheRetry {
			result.RequeueAfter = cacheRetry
		}
		if len(changes) == 0 || reflect.DeepEqual(next, ds.Spec) {
			return result, nil
		}
	}
	base := ds.DeepCopy()
	ds.Spec = next
	err = r.client.Patch(ctx, ds, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err):
		// A status write or another spec write won: plan again from the
		// latest.
		r.metrics.Writes.WithLabelValues("conflict").Inc()
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case err != nil:
		r.metrics.Writes.WithLabelValues("error").Inc()
		return ctrl.Result{}, fmt.Errorf("mirroring Longhorn's state into DiskSchedule %s: %w", ds.Name, err)
	}
	r.metrics.Writes.WithLabelValues("ok").Inc()
	r.report(ctx, ds, changes)
	return result, nil
}

// cacheBehind returns the names of the replicas whose entries the changes
// release or lower because their grace period ended unbacked in the cache,
// while the API server shows them persisted on ds's disk at the entry's
// size or more. Only those changes rest on the cache not having seen
// something yet: under load an informer can lag longer than the grace
// period, and releasing then would free space a placed replica holds (the
// gate would grant it again and the disk overfill).
func (r *Reconciler) cacheBehind(ctx context.Context, ds *dsv1.DiskSchedule, changes []Change) ([]string, error) {
	var behind []string
	for _, c := range changes {
		if c.Kind != ledger.Replica || c.Why != "" || (c.Action != Released && c.Action != Lowered) {
			continue
		}
		rep := &lhv1.Replica{}
		err := r.live.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: c.Name}, rep)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading replica %s from the API server: %w", c.Name, err)
		}
		if rep.DeletionTimestamp.IsZero() && rep.Spec.DiskID == ds.Name && rep.Spec.VolumeSize >= c.From {
			behind = append(behind, c.Name)
		}
	}
	return behind, nil
}

// keepEntries returns next with the replica entries of names (and their
// admitted versions) as they are in spec, and changes without theirs.
func keepEntries(next, spec dsv1.DiskScheduleSpec, changes []Change, names []string) (dsv1.DiskScheduleSpec, []Change) {
	next = *next.DeepCopy()
	for _, name := range names {
		if b, ok := spec.Replicas[name]; ok {
			if next.Replicas == nil {
				next.Replicas = map[string]dsv1.RequestedBytes{}
			}
			next.Replicas[name] = b
		}
		if v, ok := spec.ReplicaVersions[name]; ok {
			if next.ReplicaVersions == nil {
				next.ReplicaVersions = map[string]string{}
			}
			next.ReplicaVersions[name] = v
		}
	}
	kept := changes[:0:0]
	for _, c := range changes {
		if c.Kind == ledger.Replica && slices.Contains(names, c.Name) {
			continue
		}
		kept = append(kept, c)
	}
	return next, kept
}

// report logs, counts and records the changes written to ds.
func (r *Reconciler) report(ctx context.Context, ds *dsv1.DiskSchedule, changes []Change) {
	counts := map[Action]int{}
	for _, c := range changes {
		counts[c.Action]++
		r.metrics.Changes.WithLabelValues(string(c.Action)).Inc()
	}
	ctrl.LoggerFrom(ctx).Info("Mirrored Longhorn's persisted state into the ledger", "diskSchedule", klog.KObj(ds),
		"adopted", counts[Adopted], "raised", counts[Raised], "lowered", counts[Lowered], "released", counts[Released])
	if counts[Adopted] > 0 {
		r.recorder.Eventf(ds, nil, corev1.EventTypeNormal, ReasonAdopted, "Mirror",
			"Requested what Longhorn persisted on the disk without a ledger entry: %s", describe(changes, Adopted))
	}
	if counts[Released] > 0 {
		r.recorder.Eventf(ds, nil, corev1.EventTypeNormal, ReasonReleased, "Mirror",
			"Released entries Longhorn has nothing persisted for on the disk: %s", describe(changes, Released))
	}
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.memory, key)
}
