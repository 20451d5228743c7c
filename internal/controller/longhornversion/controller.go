package longhornversion

import (
	"context"
	"fmt"
	"sync"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/longhorn/diskschedule/internal/metrics"
)

// Event reasons, on the Setting current-longhorn-version.
const (
	// ReasonLonghornVersionChanged: Longhorn reports another release than before.
	ReasonLonghornVersionChanged = "LonghornVersionChanged"
	// ReasonLonghornVersionUntested: the release is outside the tested ones.
	ReasonLonghornVersionUntested = "LonghornVersionUntested"
)

// Reconciler follows the Setting current-longhorn-version of Longhorn's
// namespace. It reads the Setting and writes only Events and a metric.
type Reconciler struct {
	client    client.Reader
	recorder  events.EventRecorder
	namespace string
	metrics   *metrics.Longhorn

	mu   sync.Mutex
	seen *string // the version last reported; nil before the first
}

// NewReconciler returns a Reconciler that reads the Setting in namespace
// with c (the manager's cache) and exports the version to m.
func NewReconciler(c client.Reader, recorder events.EventRecorder, namespace string, m *metrics.Longhorn) *Reconciler {
	return &Reconciler{client: c, recorder: recorder, namespace: namespace, metrics: m}
}

// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=settings,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=longhorn-system,resources=events,verbs=create;patch

// Reconcile reports the version the Setting holds when it differs from the
// one last reported: a log line, the metric's label, an Event on the
// Setting when it changed, and a Warning when it is not tested.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	setting := &lhv1.Setting{}
	if err := r.client.Get(ctx, req.NamespacedName, setting); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("reading Longhorn's Setting %s: %w", req.NamespacedName, err)
		}
		setting = nil
	}
	version := ""
	if setting != nil {
		version = setting.Value
	}
	r.mu.Lock()
	prev := r.seen
	if prev != nil && *prev == version {
		r.mu.Unlock()
		return ctrl.Result{}, nil
	}
	r.seen = &version
	r.mu.Unlock()

	log := ctrl.LoggerFrom(ctx)
	if prev != nil {
		r.metrics.Version.DeleteLabelValues(*prev, boolLabel(Tested(*prev)))
	}
	r.metrics.Version.WithLabelValues(version, boolLabel(Tested(version))).Set(1)
	warning := Assessment(version)
	if prev == nil {
		log.Info("Longhorn version", "version", version, "tested", warning == "")
	} else {
		log.Info("Longhorn version changed", "from", *prev, "to", version, "tested", warning == "")
		if setting != nil {
			r.recorder.Eventf(setting, nil, corev1.EventTypeNormal, ReasonLonghornVersionChanged, "FollowLonghorn",
				"Longhorn changed from %s to %s", orUnknown(*prev), orUnknown(version))
		}
	}
	if warning != "" {
		log.Info("Warning: "+warning, "version", version)
		if setting != nil {
			r.recorder.Eventf(setting, nil, corev1.EventTypeWarning, ReasonLonghornVersionUntested, "FollowLonghorn", "%s", warning)
		}
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller; it watches only the Setting
// SettingName in the manager's namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	mine := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetNamespace() == r.namespace && obj.GetName() == SettingName
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&lhv1.Setting{}, builder.WithPredicates(mine)).
		Named("longhornversion").
		Complete(r)
}

// boolLabel is a metric label's value for b.
func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// orUnknown names an empty version.
func orUnknown(version string) string {
	if version == "" {
		return "an unknown release"
	}
	return version
}
