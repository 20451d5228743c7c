package gate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/longhorn/diskschedule/internal/byname"
	"github.com/longhorn/diskschedule/internal/podmutator"
)

// DefaultSecretName is the Secret that holds the gate's CA and serving
// certificate. It must exist (empty is fine): config/default ships it, and
// the manager's rotator fills and rotates it.
const DefaultSecretName = "longhorn-diskschedule-webhook-cert"

// TLS says how the gate's serving certificate is kept.
type TLS struct {
	// SecretName is the Secret, in the manager's namespace, that holds the
	// CA and the serving certificate; DefaultSecretName when empty.
	SecretName string
	// DNSName is the name kube-apiserver calls the gate by: the webhook
	// Service's DNS name in a cluster, localhost in the sandbox.
	DNSName string
	// CertDir receives tls.crt and tls.key as they change, as a mounted
	// Secret would.
	CertDir string
	// ConfigurationName is the ValidatingWebhookConfiguration whose
	// caBundle is kept; ConfigurationName when empty.
	ConfigurationName string
	// PodsConfigurationName is the MutatingWebhookConfiguration of the pod
	// opt-in webhook, served by the same server, whose caBundle is kept as
	// well; podmutator.ConfigurationName when empty.
	PodsConfigurationName string
	// ControllerName names the rotator's controller; DefaultControllerName
	// when empty. Several managers in one process need distinct names.
	ControllerName string
}

// DefaultControllerName names the certificate rotator's controller.
const DefaultControllerName = "diskschedule-gate-certificates"

// Certificate serves the gate's certificate from its Secret: the manager's
// rotator (open-policy-agent/cert-controller) creates and rotates it in the
// Secret and injects the CA into the webhook configuration's caBundle;
// Certificate loads each new version for the webhook server's TLS and
// writes it into CertDir.
type Certificate struct {
	mu      sync.RWMutex
	current *tls.Certificate
	// roots is the CA of the current version, for the replicas' probes of
	// each other (ClientTLS).
	roots   *x509.CertPool
	version string
	opts    TLS
	secret  types.NamespacedName
	cache   cache.Cache
}

// NewCertificate returns the gate's certificate kept in its Secret in
// namespace. Give its TLSOption to the webhook server, then add it to the
// manager with SetupWithManager.
func NewCertificate(namespace string, opts TLS) (*Certificate, error) {
	if opts.SecretName == "" {
		opts.SecretName = DefaultSecretName
	}
	if opts.ConfigurationName == "" {
		opts.ConfigurationName = ConfigurationName
	}
	if opts.PodsConfigurationName == "" {
		opts.PodsConfigurationName = podmutator.ConfigurationName
	}
	if opts.ControllerName == "" {
		opts.ControllerName = DefaultControllerName
	}
	if opts.DNSName == "" || opts.CertDir == "" {
		return nil, fmt.Errorf("the gate's certificate needs a DNS name and a directory")
	}
	return &Certificate{opts: opts, secret: types.NamespacedName{Namespace: namespace, Name: opts.SecretName}}, nil
}

// SecretName is the Secret the certificate is kept in; the manager's cache
// watches it alone.
func (c *Certificate) SecretName() string { return c.secret.Name }

// SetupWithManager adds to mgr the rotator that keeps the certificate in
// its Secret and the CA in the caBundle of the gate's webhook configuration
// and of the pod opt-in webhook's, and the
// loader that serves each new version. Every manager replica runs both:
// each serves the gate.
func (c *Certificate) SetupWithManager(mgr ctrl.Manager) error {
	c.cache = mgr.GetCache()
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("adding the gate's certificate loader: %w", err)
	}
	webhooks := c.webhooks()
	// The rotator's own cache reads the Secret and the webhook
	// configurations by name only, so the manager's RBAC can name them.
	names := byname.Names{byname.SecretsPath(c.secret.Namespace): c.secret.Name}
	for _, wh := range webhooks {
		names[configurationsPath(wh.Type)] = wh.Name
	}
	restricted := names.Manager(mgr)
	err := rotator.AddRotator(restricted, &rotator.CertRotator{
		SecretKey:      c.secret,
		CertDir:        c.opts.CertDir,
		CAName:         "diskschedule-gate-ca",
		CAOrganization: "diskschedule",
		DNSName:        c.opts.DNSName,
		IsReady:        make(chan struct{}),
		// A configuration that is not installed is skipped (and logged).
		Webhooks: webhooks,
		// Every replica serves the gate, so every replica keeps the
		// certificate; the Secret's resourceVersion orders their writes.
		RequireLeaderElection: false,
		ControllerName:        c.opts.ControllerName,
	})
	if err != nil {
		return fmt.Errorf("adding the gate's certificate rotator: %w", err)
	}
	return nil
}

// webhooks are the webhook configurations whose caBundle the rotator
// keeps: the gate's and the pod opt-in webhook's.
func (c *Certificate) webhooks() []rotator.WebhookInfo {
	return []rotator.WebhookInfo{
		{Name: c.opts.ConfigurationName, Type: rotator.Validating},
		{Name: c.opts.PodsConfigurationName, Type: rotator.Mutating},
	}
}

// configurationsPath is the collection path of a kind of webhook
// configuration the rotator may keep.
// Collection paths of the webhook configurations the certificate rotator
// reads.
const (
	validatingConfigurationsPath = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
	mutatingConfigurationsPath   = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
)

// configurationsPath is the collection path of the webhook configurations
// of type t.
func configurationsPath(t rotator.WebhookType) string {
	if t == rotator.Mutating {
		return mutatingConfigurationsPath
	}
	return validatingConfigurationsPath
}

// NeedLeaderElection is false: every replica serves the gate.
func (c *Certificate) NeedLeaderElection() bool { return false }

// Start loads every version of the Secret the cache delivers.
func (c *Certificate) Start(ctx context.Context) error {
	informer, err := c.cache.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("getting the Secret informer: %w", err)
	}
	load := func(obj interface{}) {
		if s, ok := obj.(*corev1.Secret); ok && s.Namespace == c.secret.Namespace && s.Name == c.secret.Name {
			if err := c.load(s); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "loading the gate's certificate", "secret", c.secret)
			}
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj interface{}) { load(obj) },
	}); err != nil {
		return fmt.Errorf("watching the gate's Secret: %w", err)
	}
	return nil
}

// load parses the Secret's certificate and writes it into the directory.
func (c *Certificate) load(s *corev1.Secret) error {
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return nil // the rotator has not filled it yet
	}
	c.mu.RLock()
	same := c.version == s.ResourceVersion
	c.mu.RUnlock()
	if same {
		return nil
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return fmt.Errorf("parsing the certificate of Secret %s: %w", c.secret, err)
	}
	if err := writeFileAtomic(filepath.Join(c.opts.CertDir, corev1.TLSCertKey), crt); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(c.opts.CertDir, corev1.TLSPrivateKeyKey), key); err != nil {
		return err
	}
	var roots *x509.CertPool
	if ca := s.Data[caCertKey]; len(ca) > 0 {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca) {
			return fmt.Errorf("parsing the CA of Secret %s", c.secret)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current, c.roots, c.version = &pair, roots, s.ResourceVersion
	return nil
}

// caCertKey is the key of the CA in the gate's Secret, as the rotator
// writes it.
const caCertKey = "ca.crt"

// ClientTLS returns the configuration a replica calls another replica's
// gate with: the gate's CA as currently kept, and the name every replica's
// certificate is issued for; nil until a CA is loaded.
func (c *Certificate) ClientTLS() *tls.Config {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.roots == nil {
		return nil
	}
	return &tls.Config{RootCAs: c.roots, ServerName: c.opts.DNSName, MinVersion: tls.VersionTLS12}
}

// GetCertificate serves the current certificate (tls.Config.GetCertificate).
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.current == nil {
		return nil, fmt.Errorf("the gate's certificate is not in Secret %s yet", c.secret)
	}
	return c.current, nil
}

// Ready reports an error until a certificate is loaded.
func (c *Certificate) Ready() error {
	_, err := c.GetCertificate(nil)
	return err
}

// TLSOption makes a tls.Config serve the current certificate.
func (c *Certificate) TLSOption(cfg *tls.Config) {
	cfg.GetCertificate = c.GetCertificate
}

// writeFileAtomic replaces path with data, so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
