package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/longhorn/diskschedule/internal/podmutator"
	"github.com/longhorn/diskschedule/test/framework/schedulerconfig"
	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
)

// SecondarySchedulerComponent is the kustomize component of the second
// scheduler, relative to the config directory.
const SecondarySchedulerComponent = "scheduler/secondary"

// secondaryComponentLabel is the app.kubernetes.io/component label of the
// second scheduler's objects in its component.
const secondaryComponentLabel = "scheduler"

// registerPodWebhook creates the pod opt-in webhook's configuration
// (diskschedule-pods), as config/webhook ships it, pointed at the front of
// the managers' webhook servers, which serve it beside the gate.
func (s *Sandbox) registerPodWebhook(ctx context.Context) error {
	mwc, err := podmutator.LocalConfiguration(s.gateFront.url())
	if err != nil {
		return err
	}
	if err := s.admin.Create(ctx, mwc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating MutatingWebhookConfiguration %s: %w", mwc.Name, err)
	}
	s.progress("registered the pod opt-in webhook %s at %s (namespaces labelled %s=enabled)", mwc.Name, s.gateFront.url(), podmutator.NamespaceLabel)
	return nil
}

// waitPodWebhook waits until the managers' rotator injected the CA into
// diskschedule-pods and the front answers TLS with a certificate that CA
// signed, as kube-apiserver checks it: until then the webhook's failure
// policy (Ignore) would let pods through unchanged.
func (s *Sandbox) waitPodWebhook(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, s.opts.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := s.admin.Get(ctx, client.ObjectKey{Name: podmutator.ConfigurationName}, mwc); err != nil {
			return false, err
		}
		if len(mwc.Webhooks) == 0 || len(mwc.Webhooks[0].ClientConfig.CABundle) == 0 {
			last = errors.New("no caBundle injected yet")
			return false, nil
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(mwc.Webhooks[0].ClientConfig.CABundle)
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", s.gateFront.ln.Addr().String(),
			&tls.Config{RootCAs: pool, ServerName: "localhost"})
		if err != nil {
			last = err
			return false, nil
		}
		return true, conn.Close()
	})
	if err != nil {
		return fmt.Errorf("waiting for the pod opt-in webhook to serve (%v): %w", last, err)
	}
	return nil
}

// installSecondaryScheduler applies the ServiceAccount and RBAC of the
// second scheduler's component (config/scheduler/secondary, rendered into
// config/default as a cluster gets it) and returns its ServiceAccount's
// user name and groups, and the arguments its Deployment gives the
// scheduler but --config (the sandbox writes a configuration of its own,
// pointed at this API server).
func (s *Sandbox) installSecondaryScheduler(ctx context.Context) (string, []string, []string, error) {
	dir := filepath.Join(s.workDir, "secondary-scheduler")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, nil, fmt.Errorf("writing the second scheduler's kustomization: %w", err)
	}
	configDir, err := filepath.Abs(s.opts.ConfigDir)
	if err != nil {
		return "", nil, nil, fmt.Errorf("resolving the config directory: %w", err)
	}
	// kustomize takes no absolute path to a kustomization.
	base, err := filepath.Rel(dir, filepath.Join(configDir, "default"))
	if err != nil {
		return "", nil, nil, fmt.Errorf("finding config/default from the sandbox's directory: %w", err)
	}
	component, err := filepath.Rel(dir, filepath.Join(configDir, SecondarySchedulerComponent))
	if err != nil {
		return "", nil, nil, fmt.Errorf("finding %s from the sandbox's directory: %w", SecondarySchedulerComponent, err)
	}
	kustomization := fmt.Sprintf("resources:\n- %s\ncomponents:\n- %s\n", base, component)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return "", nil, nil, fmt.Errorf("writing the second scheduler's kustomization: %w", err)
	}
	objs, err := RenderDeployment(dir)
	if err != nil {
		return "", nil, nil, err
	}
	var account, namespace string
	var args []string
	for _, u := range objs {
		if u.GetLabels()["app.kubernetes.io/component"] != secondaryComponentLabel {
			continue
		}
		if u.GetKind() == "Deployment" {
			account, _, _ = unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
			namespace = u.GetNamespace()
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			if len(containers) > 0 {
				all, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
				for _, a := range all {
					if !strings.HasPrefix(a, "--config=") {
						args = append(args, a)
					}
				}
			}
		}
		if !installKinds[u.GetKind()] {
			continue
		}
		if err := s.admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return "", nil, nil, fmt.Errorf("applying %s %s of the second scheduler: %w", u.GetKind(), u.GetName(), err)
		}
	}
	if account == "" {
		return "", nil, nil, fmt.Errorf("%s renders no Deployment with a ServiceAccount for the second scheduler", SecondarySchedulerComponent)
	}
	name, groups := serviceAccountUser(namespace, account)
	return name, groups, args, nil
}

// schedulerCommand is the package of the second scheduler's command
// (cmd/diskschedule-scheduler): kube-scheduler with the diskschedule plugin
// compiled in.
const schedulerCommand = "github.com/longhorn/diskschedule/cmd/diskschedule-scheduler"

// secondaryHealthTimeout bounds the wait for the second scheduler to be
// healthy: it serves once the plugin's cache has listed what it follows.
const secondaryHealthTimeout = time.Minute

// startSecondaryScheduler starts the second scheduler, with
// Options.SecondaryScheduler: the plugin build (cmd/diskschedule-scheduler,
// Options.SchedulerBinary or built into bin/) running schedulerconfig.Local
// (the configuration the chart and config/scheduler/secondary ship,
// pointed at this API server) as its component's ServiceAccount, under the
// component's RBAC only. Its diskschedule plugin writes reservations into
// the ledgers, which the managers decide; it calls no extender.
func (s *Sandbox) startSecondaryScheduler(ctx context.Context) error {
	if !s.opts.SecondaryScheduler {
		return nil
	}
	bin := s.opts.SchedulerBinary
	if bin == "" {
		var err error
		if bin, err = s.build(ctx, "diskschedule-scheduler", schedulerCommand, "kube-scheduler with the diskschedule plugin; the first build takes minutes"); err != nil {
			return err
		}
	}
	name, groups, args, err := s.installSecondaryScheduler(ctx)
	if err != nil {
		return err
	}
	user, err := s.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, s.env.Config)
	if err != nil {
		return fmt.Errorf("adding the second scheduler's user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("writing the second scheduler's kubeconfig: %w", err)
	}
	kubeconfigPath := filepath.Join(s.workDir, "secondary-scheduler.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing the second scheduler's kubeconfig: %w", err)
	}
	cfg, err := schedulerconfig.Local(kubeconfigPath, SchedulerQPS, SchedulerBurst)
	if err != nil {
		return err
	}
	data, err := MarshalSchedulerConfig(cfg)
	if err != nil {
		return err
	}
	cfgDir := s.opts.LogDir
	if cfgDir == "" {
		cfgDir = s.workDir
	}
	cfgPath := filepath.Join(cfgDir, "secondary-scheduler-config.yaml")
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		return fmt.Errorf("writing the second scheduler's configuration: %w", err)
	}
	out, err := s.logFile("secondary-scheduler.log")
	if err != nil {
		return err
	}
	var port int
	s.secondary, port, err = controlplane.StartOnFreePort(func(port int) (*controlplane.Process, error) {
		return startSchedulerBinary(ctx, "diskschedule-scheduler", bin, cfgPath, port, secondaryHealthTimeout, out, args...)
	})
	if err != nil {
		return fmt.Errorf("starting the second scheduler: %w", err)
	}
	s.ports = append(s.ports, port)
	if err := s.track(Process{Name: "diskschedule-scheduler", PID: s.secondary.PID()}); err != nil {
		return err
	}
	go func() {
		<-s.secondary.Done()
		s.fail(fmt.Errorf("the second scheduler exited: %v", s.secondary.Err()))
	}()
	s.progress("started the second scheduler, kube-scheduler with the diskschedule plugin (pid %d, profile %s) as %s with %s", s.secondary.PID(),
		podmutator.SchedulerName, name, cfgPath)
	return nil
}

// checkSecondary refuses a second scheduler the sandbox cannot serve: pods
// reach it through the pod opt-in webhook, served beside the gate. It
// needs no extender: its plugin decides in its own process.
func checkSecondary(opts Options) error {
	if opts.SecondaryScheduler && opts.NoGate {
		return fmt.Errorf("the pod opt-in webhook that sends pods to the second scheduler is served beside the gate: --secondary-scheduler=true needs --gate=true")
	}
	return nil
}
