package config

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
)

// Event reasons of the config controller, on the ConfigMap.
const (
	// ReasonInvalidSetting: a key holds an invalid value; the previous value stays in effect.
	ReasonInvalidSetting = "InvalidSetting"
	// ReasonSettingsApplied: the settings in effect changed.
	ReasonSettingsApplied = "SettingsApplied"
)

// Reconciler keeps a Store equal to the ConfigMap diskschedule-config.
type Reconciler struct {
	client    client.Reader
	recorder  events.EventRecorder
	store     *Store
	namespace string
	metrics   *metrics.Config
}

// NewReconciler returns a Reconciler that reads the ConfigMap in namespace
// with c (the manager's cache), keeps store up to date and exports the
// settings in effect to m.
func NewReconciler(c client.Reader, recorder events.EventRecorder, store *Store, namespace string, m *metrics.Config) *Reconciler {
	return &Reconciler{client: c, recorder: recorder, store: store, namespace: namespace, metrics: m}
}

// +kubebuilder:rbac:groups="",namespace=longhorn-system,resources=configmaps,resourceNames=diskschedule-config,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=longhorn-system,resources=events,verbs=create;patch

// Reconcile reads the ConfigMap and applies its valid values.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cm := &corev1.ConfigMap{}
	if err := r.client.Get(ctx, req.NamespacedName, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("reading ConfigMap %s: %w", req.NamespacedName, err)
		}
		cm = nil
	}
	next, invalid := Next(r.store.Get(), cm)
	r.metrics.ExtenderEnabled.WithLabelValues().Set(gaugeValue(next.Enabled))
	for _, key := range slices.Sorted(maps.Keys(invalid)) {
		log.Info("Keeping the previous value of an invalid setting", "key", key, "error", invalid[key].Error())
		r.recorder.Eventf(cm, nil, corev1.EventTypeWarning, ReasonInvalidSetting, "ReadSettings",
			"%v; keeping the value in effect (%s)", invalid[key], next)
	}
	if r.store.set(next, cmOrKey(cm, req)) {
		log.Info("Applied the extender's settings", "settings", next.String())
		if cm != nil {
			r.recorder.Eventf(cm, nil, corev1.EventTypeNormal, ReasonSettingsApplied, "ReadSettings", "Settings in effect: %s", next)
		}
	}
	return ctrl.Result{}, nil
}

// Next returns the settings in effect after reading cm (nil when the
// ConfigMap does not exist) over prev: a missing key is the default, a
// valid value is taken and an invalid one keeps prev's value and is
// returned by key.
func Next(prev Extender, cm *corev1.ConfigMap) (Extender, map[string]error) {
	values := map[string]string{}
	if cm != nil {
		for _, key := range []string{settings.SchedulerExtenderEnabled, settings.SchedulerExtenderPodSchedulingTimeout,
			settings.SchedulerExtenderNodeReservationTimeout} {
			if v, ok := cm.Data[key]; ok {
				values[key] = v
			}
		}
	}
	parsed, invalid := settings.Parse(values)
	next := fromScheduling(parsed)
	if invalid[settings.SchedulerExtenderEnabled] != nil {
		next.Enabled = prev.Enabled
	}
	if invalid[settings.SchedulerExtenderPodSchedulingTimeout] != nil {
		next.PodSchedulingTimeout = prev.PodSchedulingTimeout
	}
	if invalid[settings.SchedulerExtenderNodeReservationTimeout] != nil {
		next.NodeReservationTimeout = prev.NodeReservationTimeout
	}
	return next, invalid
}

// gaugeValue is 1 for true and 0 for false.
func gaugeValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// cmOrKey returns cm, or an empty ConfigMap with req's name when it is gone,
// to name the cause of a change.
func cmOrKey(cm *corev1.ConfigMap, req ctrl.Request) client.Object {
	if cm != nil {
		return cm
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
}

// SetupWithManager registers the controller; it watches only the ConfigMap
// named settings.ConfigMapName in the manager's namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	mine := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetNamespace() == r.namespace && obj.GetName() == settings.ConfigMapName
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}, builder.WithPredicates(mine)).
		Named("config").
		Complete(r)
}
