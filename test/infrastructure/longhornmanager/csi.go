package longhornmanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	longhornclient "github.com/longhorn/longhorn-manager/client"
	lhcsi "github.com/longhorn/longhorn-manager/csi"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// CSIVersion is the vendor version Longhorn's CSI identity service
// reports: longhorn-manager's (the CSI plugin runs longhorn-manager's
// image).
const CSIVersion = "v1.12.0"

// Longhorn's ClusterRole and its binding to longhorn-service-account, as
// Longhorn's chart names them; here they grant only what Longhorn's CSI
// controller server reads with its own clientset (Longhorn's Nodes and
// Settings).
const (
	csiClusterRole        = "longhorn-role"
	csiClusterRoleBinding = "longhorn-bind"
)

// serviceAccountTokenLifetime is how long each token asked for Longhorn's
// service account lives; it is asked again well before it expires.
const serviceAccountTokenLifetime = time.Hour

// ServeCSI serves Longhorn v1.12.0's own CSI Identity and Controller
// services (csi.NewIdentityServer, csi.NewControllerServer, unmodified)
// on the Unix socket socket until ctx ends, with node as the controller
// server's node and apiURL as the Longhorn API its client calls, as
// longhorn-csi-plugin runs them (csi.Manager.Run). It returns once the
// socket listens.
//
// NewControllerServer builds its Longhorn clientset with
// rest.InClusterConfig and reads Longhorn's namespace from POD_NAMESPACE,
// which it finds here as in longhorn-csi-plugin's pod:
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (set in this
// process's environment) name the API server of cfg, and
// ServiceAccountDir holds a token of longhorn-service-account (a
// TokenRequest, asked again before it expires) and cfg's CA, in a tmpfs of
// the process's own mount namespace (MountServiceAccountDir). The account
// is bound to a ClusterRole that lets it read and write Longhorn's
// resources. The socket is removed when ctx ends.
func ServeCSI(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, namespace, node, apiURL, socket string, log logrus.FieldLogger) error {
	if err := grantServiceAccount(ctx, kube, namespace); err != nil {
		return err
	}
	ca, err := caData(cfg)
	if err != nil {
		return err
	}
	apiServer, err := url.Parse(cfg.Host)
	if err != nil || apiServer.Hostname() == "" {
		return fmt.Errorf("Longhorn's CSI controller server: the API server's URL %q: %v", cfg.Host, err)
	}
	port := apiServer.Port()
	if port == "" {
		port = "443"
	}
	if err := MountServiceAccountDir(ServiceAccountDir); err != nil {
		return fmt.Errorf("Longhorn's CSI controller server: %w", err)
	}
	if err := writeServiceAccountFile(lhcsiCAFile, ca); err != nil {
		return err
	}
	expires, err := writeServiceAccountToken(ctx, kube, namespace)
	if err != nil {
		return err
	}
	go refreshServiceAccountToken(ctx, kube, namespace, expires, log)
	for k, v := range map[string]string{
		"KUBERNETES_SERVICE_HOST": apiServer.Hostname(), "KUBERNETES_SERVICE_PORT": port, lhtypes.EnvPodNamespace: namespace,
	} {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("Longhorn's CSI controller server: setting %s: %w", k, err)
		}
	}

	apiClient, err := longhornclient.NewRancherClient(&longhornclient.ClientOpts{Url: apiURL})
	if err != nil {
		return fmt.Errorf("Longhorn's CSI controller server: reaching Longhorn's API at %s: %w", apiURL, err)
	}
	cs, err := lhcsi.NewControllerServer(apiClient, node)
	if err != nil {
		return fmt.Errorf("Longhorn's CSI controller server: %w", err)
	}
	ids := lhcsi.NewIdentityServer(lhtypes.LonghornDriverName, CSIVersion)

	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("Longhorn's CSI controller server: removing a stale %s: %w", socket, err)
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("Longhorn's CSI controller server: %w", err)
	}
	srv := grpc.NewServer()
	csispec.RegisterIdentityServer(srv, ids)
	csispec.RegisterControllerServer(srv, cs)
	go func() {
		<-ctx.Done()
		srv.Stop() // closes the listener, which removes the socket
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			log.WithError(err).Error("Longhorn's CSI controller server stopped")
		}
	}()
	return nil
}

// The files of a pod's service account mount that rest.InClusterConfig
// reads.
var (
	lhcsiTokenFile = filepath.Join(ServiceAccountDir, corev1.ServiceAccountTokenKey)
	lhcsiCAFile    = filepath.Join(ServiceAccountDir, corev1.ServiceAccountRootCAKey)
)

// caData returns the CA cfg trusts the API server with.
func caData(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("Longhorn's CSI controller server: reading the API server's CA: %w", err)
		}
		return b, nil
	}
	return nil, errors.New("Longhorn's CSI controller server: the configuration names no CA of the API server")
}

// grantServiceAccount makes sure longhorn-service-account exists and is
// bound to Longhorn's ClusterRole, which here lets it do anything with
// Longhorn's resources (longhorn.io), as Longhorn's chart's longhorn-role
// does. Existing objects are kept.
func grantServiceAccount(ctx context.Context, kube kubernetes.Interface, namespace string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount, Namespace: namespace}}
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating service account %s: %w", ServiceAccount, err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: csiClusterRole},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"longhorn.io"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterRole %s: %w", csiClusterRole, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: csiClusterRoleBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: csiClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccount, Namespace: namespace}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterRoleBinding %s: %w", csiClusterRoleBinding, err)
	}
	return nil
}

// writeServiceAccountToken asks the API server for a token of
// longhorn-service-account and writes it to the service account's token
// file. It returns when the token expires.
func writeServiceAccountToken(ctx context.Context, kube kubernetes.Interface, namespace string) (time.Time, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(serviceAccountTokenLifetime / time.Second)),
	}}
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, ServiceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("asking for a token of service account %s: %w", ServiceAccount, err)
	}
	if err := writeServiceAccountFile(lhcsiTokenFile, []byte(tr.Status.Token)); err != nil {
		return time.Time{}, err
	}
	return tr.Status.ExpirationTimestamp.Time, nil
}

// refreshServiceAccountToken writes a new token once 80% of the current
// one's life has passed, until ctx ends; client-go rereads the file.
func refreshServiceAccountToken(ctx context.Context, kube kubernetes.Interface, namespace string, expires time.Time, log logrus.FieldLogger) {
	for {
		wait := time.Until(expires) * 4 / 5
		if wait < 10*time.Second {
			wait = 10 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		next, err := writeServiceAccountToken(ctx, kube, namespace)
		if err != nil {
			if ctx.Err() == nil {
				log.WithError(err).Warn("Renewing the token of Longhorn's CSI controller server")
			}
			continue
		}
		expires = next
	}
}

// writeServiceAccountFile replaces the file at path with data at once (a
// reader never sees it partly written).
func writeServiceAccountFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
