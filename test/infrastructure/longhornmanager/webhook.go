package longhornmanager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	lhtypes "github.com/longhorn/longhorn-manager/types"
	"github.com/longhorn/longhorn-manager/webhook/admission"
	"github.com/longhorn/longhorn-manager/webhook/server"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/infrastructure/longhornpod"
)

// Paths of Longhorn's admission webhooks, as longhorn-manager serves them.
const (
	validationPath = "/v1/webhook/" + admission.AdmissionTypeValidation
	mutationPath   = "/v1/webhook/" + admission.AdmissionTypeMutation
)

// webhookTimeout is the webhook configurations' timeoutSeconds: Longhorn
// leaves kube-apiserver's default.
const webhookTimeout = 10

// Webhooks serves Longhorn's own admission webhooks (webhook/server's
// Mutation and Validation: every mutator and validator longhorn-manager
// v1.12.0 registers) over one datastore, on loopback with a certificate of
// its own.
type Webhooks struct {
	srv       *http.Server
	ln        net.Listener
	caBundle  []byte
	mutating  []admission.Resource
	validated []admission.Resource
	done      chan error
}

// StartWebhooks serves Longhorn's admission webhooks over pod's datastore
// (as the longhorn-manager of pod's node serves them), which must have
// synced, until ctx ends or Stop is called.
func StartWebhooks(ctx context.Context, pod *longhornpod.Pod) (*Webhooks, error) {
	ds := pod.DataStore
	validation, validated, err := server.Validation(ds)
	if err != nil {
		return nil, fmt.Errorf("Longhorn's validating webhook: %w", err)
	}
	mutation, mutating, err := server.Mutation(ds)
	if err != nil {
		return nil, fmt.Errorf("Longhorn's mutating webhook: %w", err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		return nil, fmt.Errorf("Longhorn's webhooks: certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("Longhorn's webhooks: certificate: %w", err)
	}
	// longhorn-manager serves its webhooks through rancher/dynamiclistener,
	// which offers HTTP/2 before HTTP/1.1: kube-apiserver then sends the
	// admission calls over one multiplexed connection, as in a cluster,
	// rather than opening, pooling and dropping an HTTP/1.1 connection per
	// concurrent call.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	})
	if err != nil {
		return nil, fmt.Errorf("Longhorn's webhooks: listening: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(validationPath, validation)
	mux.Handle(mutationPath, mutation)
	w := &Webhooks{
		srv:      &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:       ln,
		caBundle: certPEM, mutating: mutating, validated: validated,
		done: make(chan error, 1),
	}
	go func() {
		err := w.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		w.done <- err
	}()
	go func() {
		<-ctx.Done()
		_ = w.Stop()
	}()
	return w, nil
}

// URL is the webhooks' base URL.
func (w *Webhooks) URL() string { return "https://" + w.ln.Addr().String() }

// Stop stops serving.
func (w *Webhooks) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return w.srv.Shutdown(ctx)
}

// Register creates Longhorn's webhook configurations (longhorn-manager's
// names, rules, failure policy and side effects) pointed at the webhooks.
func (w *Webhooks) Register(ctx context.Context, c client.Client) error {
	mutatingURL, validatingURL := w.URL()+mutationPath, w.URL()+validationPath
	objs := []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: lhtypes.MutatingWebhookName},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name:                    "mutator.longhorn.io",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &mutatingURL, CABundle: w.caBundle},
				Rules:                   rules(w.mutating),
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				MatchPolicy:             ptr.To(admissionregistrationv1.Exact),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				TimeoutSeconds:          ptr.To[int32](webhookTimeout),
				AdmissionReviewVersions: []string{"v1"},
			}},
		},
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: lhtypes.ValidatingWebhookName},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:                    "validator.longhorn.io",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &validatingURL, CABundle: w.caBundle},
				Rules:                   rules(w.validated),
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				MatchPolicy:             ptr.To(admissionregistrationv1.Exact),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				TimeoutSeconds:          ptr.To[int32](webhookTimeout),
				AdmissionReviewVersions: []string{"v1"},
			}},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Longhorn's webhook configuration %s: %w", o.GetName(), err)
		}
	}
	return nil
}

// rules are the webhook rules of Longhorn's admitters' resources, one per
// resource, as longhorn-manager builds them.
func rules(resources []admission.Resource) []admissionregistrationv1.RuleWithOperations {
	out := make([]admissionregistrationv1.RuleWithOperations, 0, len(resources))
	for _, r := range resources {
		out = append(out, admissionregistrationv1.RuleWithOperations{
			Operations: r.OperationTypes,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{r.APIGroup}, APIVersions: []string{r.APIVersion}, Resources: []string{r.Name},
				Scope: ptr.To(r.Scope),
			},
		})
	}
	return out
}
