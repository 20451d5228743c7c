package failover_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// attachLatency is how long attaching a Longhorn volume to its pod's node
// takes. In a cluster the attach follows the pod's binding by a second or
// more (the attach/detach controller's VolumeAttachment, the CSI attacher,
// Longhorn's engine), so the extender's reservation, written as soon as the
// pod's node is known, is granted well before Longhorn places a replica of
// a best-effort volume there, and the handoff gives it to that replica. In
// the sandbox nothing stands between the binding and the attach (its
// attacher hands Longhorn's VolumeManager the ticket at once), so Longhorn
// may place the local replica before the extender has looked: the extender
// then finds the replica's request holding the space and reserves nothing,
// and no reservation is in flight when the leader stops. attachDelay gives
// the attach its time back.
const attachLatency = 500 * time.Millisecond

// attachDelayWebhook is the name of the ValidatingWebhookConfiguration.
const attachDelayWebhook = "failover-attach-latency"

// attachDelay is a validating admission webhook, served on loopback, that
// answers an update of a Longhorn Volume which attaches it (spec.nodeID
// from empty to a node) only after a delay, and allows every request. It
// changes nothing but the time the attach takes.
type attachDelay struct {
	latency time.Duration
	ln      net.Listener
	srv     *http.Server
	caPEM   []byte
	done    chan struct{}

	mu sync.Mutex
	// reviewed counts the requests reviewed; delayed, the attaches delayed.
	reviewed, delayed int
}

// startAttachDelay serves the webhook with a self-signed certificate for 127.0.0.1.
func startAttachDelay(latency time.Duration) (*attachDelay, error) {
	cert, caPEM, err := loopbackCert()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the admission webhook: %w", err)
	}
	d := &attachDelay{latency: latency, ln: ln, caPEM: caPEM, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/attach", d.review)
	d.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(d.done)
		_ = d.srv.ServeTLS(ln, "", "")
	}()
	return d, nil
}

// Close stops serving.
func (d *attachDelay) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.srv.Shutdown(ctx)
	<-d.done
}

// Counts returns how many requests were reviewed and how many attaches delayed.
func (d *attachDelay) Counts() (reviewed, delayed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reviewed, d.delayed
}

// register installs the webhook for updates of Longhorn Volumes. It fails
// open: should the test's server be gone, the API server lets the update through.
func (d *attachDelay) register(ctx context.Context, c client.Client) error {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: attachDelayWebhook},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "attach-latency.failover.diskschedule.longhorn.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL:      ptr.To("https://" + d.ln.Addr().String() + "/attach"),
				CABundle: d.caPEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{lhv1.SchemeGroupVersion.Group},
					APIVersions: []string{lhv1.SchemeGroupVersion.Version},
					Resources:   []string{"volumes"},
					Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				"kubernetes.io/metadata.name": sandbox.Namespace,
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(10)),
		}},
	}
	if err := c.Create(ctx, cfg); err != nil {
		return fmt.Errorf("registering the attach-latency webhook: %w", err)
	}
	return nil
}

// waitActive waits until the API server calls the webhook: it updates a
// Volume of the sandbox with a server-side dry run until the webhook has
// reviewed a request. The burst must not start before attaches are delayed.
func (d *attachDelay) waitActive(ctx context.Context, c client.Client, timeout time.Duration) error {
	state, err := testenv.Poll(ctx, timeout, func(ctx context.Context) (bool, string, error) {
		vols := &lhv1.VolumeList{}
		if err := c.List(ctx, vols, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		if len(vols.Items) == 0 {
			return false, "", errors.New("no Longhorn volume to probe the attach-latency webhook with")
		}
		before, _ := d.Counts()
		vol := vols.Items[0].DeepCopy()
		base := vol.DeepCopy()
		if vol.Annotations == nil {
			vol.Annotations = map[string]string{}
		}
		vol.Annotations["failover.diskschedule.longhorn.io/probe"] = time.Now().Format(time.RFC3339Nano)
		if err := c.Patch(ctx, vol, client.MergeFrom(base), client.DryRunAll); err != nil {
			return false, "", fmt.Errorf("probing the attach-latency webhook: %w", err)
		}
		after, _ := d.Counts()
		return after > before, fmt.Sprintf("%d reviews", after), nil
	}, testenv.Every(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("the API server did not call the attach-latency webhook within %s (%s): %w", timeout, state, err)
	}
	return nil
}

// review allows every request, after attachLatency for one that attaches a volume.
func (d *attachDelay) review(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	var now, old lhv1.Volume
	attach := json.Unmarshal(review.Request.Object.Raw, &now) == nil &&
		json.Unmarshal(review.Request.OldObject.Raw, &old) == nil &&
		old.Spec.NodeID == "" && now.Spec.NodeID != "" && !ptr.Deref(review.Request.DryRun, false)
	d.mu.Lock()
	d.reviewed++
	if attach {
		d.delayed++
	}
	d.mu.Unlock()
	if attach {
		select {
		case <-time.After(d.latency):
		case <-r.Context().Done():
		}
	}
	resp := admissionv1.AdmissionReview{
		TypeMeta: review.TypeMeta,
		Response: &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// loopbackCert returns a self-signed serving certificate for 127.0.0.1 and
// its PEM, which the webhook configuration trusts as its CA bundle.
func loopbackCert() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "failover-attach-latency"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return cert, certPEM, err
}
