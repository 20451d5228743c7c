package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControllerManagerUser is the user kube-controller-manager authenticates
// as; Kubernetes' bootstrap RBAC authorizes it (and, with
// --use-service-account-credentials, each controller's ServiceAccount in
// kube-system).
const ControllerManagerUser = "system:kube-controller-manager"

// Controller names of kube-controller-manager's --controllers flag.
const (
	DeploymentController                      = "deployment-controller"
	ReplicaSetController                      = "replicaset-controller"
	StatefulSetController                     = "statefulset-controller"
	GarbageCollectorController                = "garbage-collector-controller"
	PersistentVolumeBinderController          = "persistentvolume-binder-controller"
	PersistentVolumeExpanderController        = "persistentvolume-expander-controller"
	PersistentVolumeProtectionController      = "persistentvolume-protection-controller"
	PersistentVolumeClaimProtectionController = "persistentvolumeclaim-protection-controller"
	NodeLifecycleController                   = "node-lifecycle-controller"
	TaintEvictionController                   = "taint-eviction-controller"
	DisruptionController                      = "disruption-controller"
	EndpointSliceController                   = "endpointslice-controller"
	ServiceAccountController                  = "serviceaccount-controller"
	ServiceAccountTokenController             = "serviceaccount-token-controller"
)

// VolumeControllers returns the controllers a CSI driver's claims go
// through: the PV binder (binds provisioned PersistentVolumes, releases
// them), the expander, and the protection controllers that let a claim and
// its PersistentVolume go once nothing uses them.
func VolumeControllers() []string {
	return []string{
		PersistentVolumeBinderController, PersistentVolumeExpanderController,
		PersistentVolumeProtectionController, PersistentVolumeClaimProtectionController,
	}
}

// DefaultControllers returns the controllers the sandbox runs: workloads
// (Deployments, ReplicaSets, StatefulSets, PodDisruptionBudgets and the
// garbage collector), the volume controllers, node lifecycle with its
// taint-based eviction, EndpointSlices, and ServiceAccounts with their
// tokens.
func DefaultControllers() []string {
	return append([]string{
		DeploymentController, ReplicaSetController, StatefulSetController, GarbageCollectorController,
		DisruptionController, NodeLifecycleController, TaintEvictionController, EndpointSliceController,
		ServiceAccountController, ServiceAccountTokenController,
	}, VolumeControllers()...)
}

// ControllerManagerOptions configures a kube-controller-manager process.
type ControllerManagerOptions struct {
	// Path is the kube-controller-manager binary. Required.
	Path string
	// Dir receives its kubeconfig and the API server's CA bundle. Required.
	Dir string
	// ServiceAccountKeyFile is the private key the token controller signs
	// service-account tokens with, shared with kube-apiserver
	// (ShareServiceAccountKey). Required when Controllers holds
	// ServiceAccountTokenController.
	ServiceAccountKeyFile string
	// Controllers are the controllers to run; nil is DefaultControllers().
	Controllers []string
	// NodeMonitorGracePeriod is how long a node may go without a heartbeat
	// (Lease renewal or Ready condition) before node lifecycle marks it
	// unhealthy; zero keeps kube-controller-manager's default (50s).
	NodeMonitorGracePeriod time.Duration
	// StartTimeout bounds the wait until it is healthy; zero is a minute.
	StartTimeout time.Duration
	// Out receives its log; nil discards it.
	Out io.Writer
}

// ControllerManager is a running kube-controller-manager.
type ControllerManager struct {
	*Process
	// Port is the loopback port it serves /healthz on.
	Port int
}

// StartControllerManager adds kube-controller-manager's user to env's API
// server, writes its kubeconfig and the API server's CA bundle (the root CA
// of the tokens it issues) to opts.Dir, starts it on a free loopback port
// without leader election, each controller under its own ServiceAccount as
// in a cluster, and waits until it is healthy. Stop it with Stop.
func StartControllerManager(ctx context.Context, env *envtest.Environment, opts ControllerManagerOptions) (*ControllerManager, error) {
	if opts.Path == "" || opts.Dir == "" {
		return nil, errors.New("kube-controller-manager needs its binary's path and a directory")
	}
	if opts.Controllers == nil {
		opts.Controllers = DefaultControllers()
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = time.Minute
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	files, err := writeControllerManagerFiles(env, opts.Dir)
	if err != nil {
		return nil, err
	}
	p, port, err := StartOnFreePort(func(port int) (*Process, error) {
		p, err := StartProcess("kube-controller-manager", opts.Path, controllerManagerArgs(opts, files, port), opts.Out)
		if err != nil {
			return nil, err
		}
		return p, p.WaitHealthy(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), opts.StartTimeout)
	})
	if err != nil {
		return nil, err
	}
	return &ControllerManager{Process: p, Port: port}, nil
}

// controllerManagerFiles are the files kube-controller-manager reads.
type controllerManagerFiles struct {
	kubeconfig, rootCA string
}

// writeControllerManagerFiles provisions kube-controller-manager's user and
// writes its kubeconfig and the API server's CA bundle to dir.
func writeControllerManagerFiles(env *envtest.Environment, dir string) (controllerManagerFiles, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: ControllerManagerUser}, env.Config)
	if err != nil {
		return controllerManagerFiles{}, fmt.Errorf("adding kube-controller-manager's user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return controllerManagerFiles{}, fmt.Errorf("writing kube-controller-manager's kubeconfig: %w", err)
	}
	files := controllerManagerFiles{
		kubeconfig: filepath.Join(dir, "kube-controller-manager.kubeconfig"),
		rootCA:     filepath.Join(dir, "kube-controller-manager-root-ca.crt"),
	}
	if err := os.WriteFile(files.kubeconfig, kubeconfig, 0o600); err != nil {
		return controllerManagerFiles{}, fmt.Errorf("writing kube-controller-manager's kubeconfig: %w", err)
	}
	if err := os.WriteFile(files.rootCA, env.ControlPlane.APIServer.SecureServing.CA, 0o600); err != nil {
		return controllerManagerFiles{}, fmt.Errorf("writing the API server's CA bundle: %w", err)
	}
	return files, nil
}

// controllerManagerArgs returns kube-controller-manager's command line.
// Without delegated authentication and authorization, only its
// always-allowed paths (/healthz, /readyz, /livez) answer; that is all
// that is read.
func controllerManagerArgs(opts ControllerManagerOptions, files controllerManagerFiles, port int) []string {
	args := []string{
		"--kubeconfig=" + files.kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--controllers=" + strings.Join(opts.Controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--root-ca-file=" + files.rootCA,
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--v=2",
	}
	if opts.ServiceAccountKeyFile != "" {
		args = append(args, "--service-account-private-key-file="+opts.ServiceAccountKeyFile)
	}
	if opts.NodeMonitorGracePeriod > 0 {
		args = append(args, "--node-monitor-grace-period="+opts.NodeMonitorGracePeriod.String())
	}
	return args
}
