// Package uninstall takes the add-on off a cluster in the order that keeps
// Longhorn writing (DESIGN §7): the webhook configurations that send
// Longhorn's writes to the managers go first, while the managers still
// serve them, so no write meets a gate whose server is gone; the
// DiskSchedule CRD goes only when it carries the add-on's own label, since
// Longhorn's own proposals use the same CRD name and deleting Longhorn's
// would delete every object in it.
//
// The manager binary runs it as `manager uninstall` (cmd), from the Helm
// chart's pre-delete hook and from `make undeploy` and `make uninstall`.
package uninstall

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/podmutator"
)

const (
	// LabelKey and LabelValue are the label the add-on's own DiskSchedule
	// CRD carries (api/v1beta2's kubebuilder marker): a CRD of that name
	// without it is not the add-on's and is never deleted.
	LabelKey   = "app.kubernetes.io/name"
	LabelValue = "diskschedule"
	// CRDName is the DiskSchedule CRD's name.
	CRDName = "diskschedules.longhorn.io"
)

// WebhookConfigurations are the add-on's webhook configurations, deleted by
// name: the gate's and the pod opt-in webhook's.
func WebhookConfigurations() []client.Object {
	return []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: gate.ConfigurationName}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: podmutator.ConfigurationName}},
	}
}

// Webhooks deletes the add-on's webhook configurations and returns once
// kube-apiserver no longer has them (it calls no webhook of a configuration
// it no longer holds). One already gone is fine.
func Webhooks(ctx context.Context, c client.Client, timeout time.Duration) error {
	for _, obj := range WebhookConfigurations() {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			return fmt.Errorf("waiting for %s to be gone: %w", obj.GetName(), err)
		}
	}
	return nil
}

// RefusedError says why the CRD of the DiskSchedule name was not deleted.
type RefusedError struct{ Labels map[string]string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refusing to delete the CustomResourceDefinition %s: it does not carry the label %s=%s, so it is not diskschedule's "+
		"(Longhorn's own DiskSchedule proposal uses the same name, and deleting its CRD would delete every object in it); its labels: %v. "+
		"Delete it yourself if you are sure it is diskschedule's", CRDName, LabelKey, LabelValue, e.Labels)
}

// CRD deletes the DiskSchedule CRD, and with it every DiskSchedule, when it
// carries the add-on's label (LabelKey=LabelValue), and otherwise deletes
// nothing and returns a *RefusedError saying why. A CRD already gone is
// fine. The deletion is made on the resourceVersion that was checked, so a
// CRD replaced in between is not deleted either.
func CRD(ctx context.Context, c client.Client) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: CRDName}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading the CustomResourceDefinition %s: %w", CRDName, err)
	}
	if crd.Labels[LabelKey] != LabelValue {
		return &RefusedError{Labels: crd.Labels}
	}
	pre := client.Preconditions{UID: &crd.UID, ResourceVersion: &crd.ResourceVersion}
	if err := c.Delete(ctx, crd, pre); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the CustomResourceDefinition %s: %w", CRDName, err)
	}
	return nil
}

// NewClient returns a client for cfg that knows the kinds uninstall deletes.
func NewClient(cfg *rest.Config) (client.Client, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding the built-in kinds to the scheme: %w", err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding CustomResourceDefinition to the scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	return c, nil
}
