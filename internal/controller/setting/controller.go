package setting

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/settings"
)

// Reconciler reports whether each Setting's value is valid.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
}

// NewReconciler returns a Reconciler writing through c and recording Events with recorder.
func NewReconciler(c client.Client, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, recorder: recorder}
}

// +kubebuilder:rbac:groups=longhorn.io,resources=settings,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=settings/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile sets the Valid condition and status.applied of one Setting.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &longhornv1.Setting{}
	if err := r.client.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cond := metav1.Condition{
		Type: longhornv1.SettingConditionValid, Status: metav1.ConditionTrue,
		Reason: longhornv1.SettingReasonValid, Message: "the value is in effect", ObservedGeneration: s.Generation,
	}
	applied := true
	if err := settings.Validate(s.Name, s.Value); err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, longhornv1.SettingReasonInvalidValue,
			fmt.Sprintf("%v; the last valid value stays in effect", err)
		applied = false
		r.recorder.Eventf(s, nil, corev1.EventTypeWarning, longhornv1.SettingReasonInvalidValue, "Validate", "%s", cond.Message)
	}
	base := s.DeepCopy()
	s.Status.Applied = applied
	if !meta.SetStatusCondition(&s.Status.Conditions, cond) && base.Status.Applied == applied {
		return ctrl.Result{}, nil
	}
	if err := r.client.Status().Patch(ctx, s, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, fmt.Errorf("patching the status of setting %s: %w", s.Name, err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&longhornv1.Setting{}).Named("setting").Complete(r)
}

// EnsureDefaults creates every scheduling setting missing from namespace with
// its default value; existing settings are left as they are.
func EnsureDefaults(ctx context.Context, c client.Client, namespace string) error {
	for name, value := range settings.Defaults() {
		s := &longhornv1.Setting{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Value: value}
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating default setting %s: %w", name, err)
		}
	}
	return nil
}
