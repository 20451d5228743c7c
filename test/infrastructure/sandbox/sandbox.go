package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	schedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/scheme"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/extendertls"
	"github.com/longhorn/diskschedule/test/framework/longhorncrds"
	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// Options configures a sandbox.
type Options struct {
	// Topology is the simulated cluster. Required.
	Topology *Topology
	// Extender registers the diskschedule extender with kube-scheduler;
	// without it, scheduler-extender-enabled is "false" in the extender's
	// ConfigMap.
	Extender bool
	// LonghornNodesOnly is the sandbox's --simulated-longhorn=false: the
	// topology's Longhorn Nodes and disks exist and report their space, but
	// nothing creates or places replicas. The Nodes, their disks' status
	// (storageScheduled, scheduledReplica) and the instance managers are
	// kept by longhorn-manager v1.12.0's own node, instance manager and
	// Kubernetes node controllers on the simulated data plane
	// (longhornmanager.NodeControllers), behind Longhorn's own admission
	// webhooks. Without it, longhorn-manager v1.12.0's whole control plane
	// runs, one longhorn-manager per node, with Longhorn's own admission
	// webhooks and REST API (test/infrastructure/longhornmanager) on the simulated
	// data plane (test/infrastructure/dataplane): volumes are created, given engines
	// and replicas, placed, attached, rebuilt and expanded by Longhorn's
	// own code.
	LonghornNodesOnly bool
	// LonghornBinary is the sandbox-longhorn command that runs Longhorn's
	// own controllers; "" builds it into the repository's bin directory
	// (the parent of ConfigDir), which go build leaves alone when it is up
	// to date.
	LonghornBinary string
	// NoGate is the sandbox's --gate=false: the admission gate is not
	// registered, so Longhorn's writes do not ask the ledger, as with
	// Longhorn today (the mirror adopts them, rule 7).
	NoGate bool
	// KubeconfigPath is where an administrator's kubeconfig is written (and
	// removed again by Stop); "" writes none.
	KubeconfigPath string
	// ConfigDir is the repository's config directory: the CRDs in
	// crd/bases and the deployment in default. "" is "config".
	ConfigDir string
	// AssetsDir holds the etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler binaries; "" is $KUBEBUILDER_ASSETS, else "bin/k8s".
	AssetsDir string
	// LogDir receives etcd.log, kube-apiserver.log,
	// kube-controller-manager.log, kube-scheduler.log,
	// kube-scheduler-config.yaml, longhorn-manager.log (what Longhorn's
	// own scheduler and datastore log), longhorn-controllers.log
	// (sandbox-longhorn's output) and csi-sidecars.log (sandbox-csi's);
	// "" discards the logs.
	LogDir string
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// ReadyTimeout bounds the wait for every ledger to be Ready; zero is 2 minutes.
	ReadyTimeout time.Duration
	// NodeMonitorGracePeriod is how long a node may go without renewing
	// its Lease before kube-controller-manager's node lifecycle controller
	// marks it unhealthy (and taints it); zero keeps
	// kube-controller-manager's default (50s).
	NodeMonitorGracePeriod time.Duration
	// Managers, when not empty, runs one manager per entry instead of one,
	// in this order (failover tests). Each entry adjusts its manager's
	// Options, built as for the one manager (leader election, its own
	// metrics port and, with the extender, its own extender port), and its
	// own copy of the manager's rest.Config, before the manager is created.
	// StopManager stops one.
	Managers []ManagerHook
	// ExtenderBind, with Extender, makes kube-scheduler bind the pods the
	// extender manages through its /bind (bindVerb), so the extender knows
	// a pod's node the moment it is chosen, and the managers serve /bind
	// (manager.Options.ExtenderBind).
	ExtenderBind bool
	// CapacityPollInterval is how often the simulated cluster's CSI
	// external-provisioner refreshes the CSIStorageCapacity objects; zero is
	// its default, a minute.
	CapacityPollInterval time.Duration
	// ExtenderURL, with Extender, is the URL kube-scheduler calls instead of
	// the manager's extender: a proxy in front of several managers that
	// follows the leader, say. The sandbox then waits until any manager's
	// extender answers.
	ExtenderURL string
	// OnRefusedWrite is called, without blocking, for every replica write
	// of Longhorn's own controllers the gate denies, with its time:
	// Longhorn only logs them, so tests measure how long a denial stalls a
	// volume through it. Not with LonghornNodesOnly, where no controller of
	// Longhorn's writes replicas.
	OnRefusedWrite func(RefusedWrite)
	// SecondaryScheduler is the sandbox's --secondary-scheduler=true: a
	// second scheduler process, kube-scheduler with the diskschedule plugin
	// compiled in (cmd/diskschedule-scheduler), with the profile
	// diskschedule-scheduler (config/scheduler/secondary's configuration,
	// run as its ServiceAccount under its RBAC), and the managers' pod
	// opt-in webhook told it exists. It needs the gate, beside which the
	// webhook is served, and not the extender.
	SecondaryScheduler bool
	// SchedulerBinary, with SecondaryScheduler, is the second scheduler's
	// command (bin/diskschedule-scheduler, make build-scheduler); "" builds
	// it into the repository's bin directory (the parent of ConfigDir),
	// which go build leaves alone when it is up to date.
	SchedulerBinary string
}

// ManagerHook adjusts one manager's Options and rest.Config before it is
// created: say, its extender address, AdvertiseIP, NodeName and leader
// election timings, or a transport that can cut it off from the API server.
type ManagerHook func(opts *manager.Options, cfg *rest.Config)

// Namespace is the sandbox's system namespace.
const Namespace = "longhorn-system"

// runnerStopTimeout bounds how long Stop waits for each in-process manager.
const runnerStopTimeout = 20 * time.Second

// Sandbox is a running sandbox. Stop it with Stop.
type Sandbox struct {
	opts   Options
	scheme *runtime.Scheme
	env    *envtest.Environment
	admin  client.Client

	adminConfig, managerConfig *rest.Config
	adminKubeconfig            []byte
	managerUser                string

	workDir string
	// reaper kills the sandbox's processes and removes its directories if
	// the sandbox dies without Stop.
	reaper            *controlplane.Reaper
	serviceAccountKey string
	logs              []*os.File
	scheduler         *controlplane.Process
	secondary         *controlplane.Process
	controllers       *controlplane.ControllerManager
	processes         []Process
	ports             []int
	extenderURL       string
	// extenderTLS are the certificates of the extender and of the
	// schedulers that call it, issued at start.
	extenderTLS *extendertls.Files
	gateFront   *gateFront
	// longhorn runs longhorn-manager's own controllers and webhooks;
	// longhornUsable is the file it writes once Longhorn accepts volumes.
	longhorn       *controlplane.Process
	longhornUsable string
	// dataPlane is the simulated data plane Longhorn's controllers reach
	// (nil without them).
	dataPlane *dataplane.Plan
	// longhornControl is sandbox-longhorn's control socket (StopNode);
	// outages the nodes whose kubelets StopNode stopped.
	longhornControl string
	outages         *simcluster.Outages
	// longhornCSI is the Unix socket of Longhorn's CSI controller server
	// in sandbox-longhorn, which the CSI sidecars (csiSidecars, nil with
	// LonghornNodesOnly) call; "" with LonghornNodesOnly.
	longhornCSI string
	csiSidecars *controlplane.Process

	runners []*runner
	// managers are the runners of the managers, in Options.Managers order;
	// managerExtenders their extender addresses.
	managers         []*runner
	managerExtenders []string

	failOnce sync.Once
	failed   chan struct{}
	failErr  error
	stopOnce sync.Once
	stopErr  error
}

// runner is a controller manager the sandbox runs in-process.
type runner struct {
	name   string
	cancel context.CancelFunc
	done   chan error

	stopOnce sync.Once
	stopErr  error
}

// stop cancels the runner and waits until it has returned, once.
func (r *runner) stop() error {
	r.stopOnce.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				r.stopErr = fmt.Errorf("%s: %w", r.name, err)
			}
		case <-time.After(runnerStopTimeout):
			// A controller-runtime manager whose cache never synced (a
			// Forbidden list, say) does not return from Start when
			// cancelled; it is left behind rather than hang Stop.
			r.stopErr = fmt.Errorf("%s did not stop within %s (did its cache ever sync?); %s", r.name, runnerStopTimeout, dumpGoroutines())
		}
	})
	return r.stopErr
}

// Start starts a sandbox and returns once it is ready: kube-scheduler is
// healthy, every disk's DiskSchedule is Ready (so the simulated cluster's
// nodes, the node and DiskSchedule controllers and the kubelets all work)
// and, with the extender, the extender answers. ctx bounds the start only:
// the sandbox runs until Stop. On error, whatever was started is stopped
// again.
func Start(ctx context.Context, opts Options) (_ *Sandbox, retErr error) {
	if opts.Topology == nil || len(opts.Topology.Nodes) == 0 {
		return nil, fmt.Errorf("the sandbox needs a topology with at least one node")
	}
	if opts.ConfigDir == "" {
		opts.ConfigDir = "config"
	}
	if opts.AssetsDir == "" {
		opts.AssetsDir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if opts.AssetsDir == "" {
		opts.AssetsDir = filepath.Join("bin", "k8s")
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.KubeconfigPath != "" {
		abs, err := filepath.Abs(opts.KubeconfigPath)
		if err != nil {
			return nil, fmt.Errorf("resolving the kubeconfig path: %w", err)
		}
		opts.KubeconfigPath = abs
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	if err := checkSecondary(opts); err != nil {
		return nil, err
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(opts.AssetsDir, bin)); err != nil {
			return nil, fmt.Errorf("finding %s in %s (run `make controlplane`): %w", bin, opts.AssetsDir, err)
		}
	}
	s := &Sandbox{opts: opts, failed: make(chan struct{})}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, s.Stop())
		}
	}()
	var err error
	// Whatever kills the sandbox, its processes and directories go with it.
	if s.reaper, err = controlplane.StartReaper(); err != nil {
		return nil, err
	}
	if s.scheme, err = scheme.New(); err != nil {
		return nil, err
	}
	if s.workDir, err = os.MkdirTemp("", "diskschedule-sandbox-"); err == nil {
		err = s.reaper.RemoveDir(s.workDir)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the sandbox's directory: %w", err)
	}
	for _, step := range []func(context.Context) error{
		s.startControlPlane, s.install, s.startControllerManager, s.startLonghorn, s.startManager, s.startScheduler, s.startSecondaryScheduler, s.waitReady,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	s.progress("sandbox ready")
	if opts.KubeconfigPath != "" {
		s.progress("  kubectl --kubeconfig %s get diskschedules -A", opts.KubeconfigPath)
	}
	return s, nil
}

func (s *Sandbox) progress(format string, args ...any) {
	fmt.Fprintf(s.opts.Out, format+"\n", args...)
}

// logFile opens name in the log directory, or returns io.Discard.
func (s *Sandbox) logFile(name string) (io.Writer, error) {
	if s.opts.LogDir == "" {
		return io.Discard, nil
	}
	if err := os.MkdirAll(s.opts.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the log directory: %w", err)
	}
	f, err := os.Create(filepath.Join(s.opts.LogDir, name))
	if err != nil {
		return nil, fmt.Errorf("creating a log file: %w", err)
	}
	s.logs = append(s.logs, f)
	return f, nil
}

// startControlPlane starts etcd and kube-apiserver with Longhorn v1.12.0's
// own CRDs (from the longhorn-manager module) and DiskSchedule's installed
// and the service-account key it shares with kube-controller-manager,
// finds their PIDs, and provisions the administrator, whose kubeconfig it
// writes.
func (s *Sandbox) startControlPlane(context.Context) error {
	s.progress("starting etcd and kube-apiserver from %s", s.opts.AssetsDir)
	etcdLog, err := s.logFile("etcd.log")
	if err != nil {
		return err
	}
	apiLog, err := s.logFile("kube-apiserver.log")
	if err != nil {
		return err
	}
	longhorn, err := longhorncrds.Load()
	if err != nil {
		return fmt.Errorf("loading Longhorn's CRDs: %w", err)
	}
	if s.serviceAccountKey, err = controlplane.WriteServiceAccountKey(s.workDir); err != nil {
		return err
	}
	api := &envtest.APIServer{Out: apiLog, Err: apiLog}
	controlplane.ShareServiceAccountKey(api, s.serviceAccountKey)
	s.env = &envtest.Environment{
		CRDs:                  longhorn,
		CRDDirectoryPaths:     []string{filepath.Join(s.opts.ConfigDir, "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: s.opts.AssetsDir,
		Scheme:                s.scheme,
		ControlPlane: envtest.ControlPlane{
			Etcd:      &envtest.Etcd{Out: etcdLog, Err: etcdLog},
			APIServer: api,
		},
	}
	if _, err := s.env.Start(); err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	apiPort, _ := strconv.Atoi(api.SecureServing.Port)
	etcdPort, _ := strconv.Atoi(s.env.ControlPlane.Etcd.URL.Port())
	s.ports = append(s.ports, apiPort, etcdPort)
	pids, err := controlplane.ReapEnvtest(s.reaper, s.env)
	if err != nil {
		return err
	}
	s.processes = append(s.processes, Process{Name: "etcd", PID: pids.Etcd}, Process{Name: "kube-apiserver", PID: pids.APIServer})
	s.progress("kube-apiserver at %s (pid %d), etcd at %s (pid %d)",
		s.env.Config.Host, s.processes[1].PID, s.env.ControlPlane.Etcd.URL, s.processes[0].PID)

	admin, err := s.env.ControlPlane.AddUser(envtest.User{Name: "sandbox-admin", Groups: []string{"system:masters"}}, s.env.Config)
	if err != nil {
		return fmt.Errorf("adding the administrator: %w", err)
	}
	s.adminConfig = tune(admin.Config())
	if s.admin, err = client.New(s.adminConfig, client.Options{Scheme: s.scheme}); err != nil {
		return fmt.Errorf("creating the administrator's client: %w", err)
	}
	if s.adminKubeconfig, err = admin.KubeConfig(); err != nil {
		return fmt.Errorf("writing the administrator's kubeconfig: %w", err)
	}
	if s.opts.KubeconfigPath != "" {
		data := s.adminKubeconfig
		if err := os.MkdirAll(filepath.Dir(s.opts.KubeconfigPath), 0o755); err != nil {
			return fmt.Errorf("writing the administrator's kubeconfig: %w", err)
		}
		if err := os.WriteFile(s.opts.KubeconfigPath, data, 0o600); err != nil {
			return fmt.Errorf("writing the administrator's kubeconfig: %w", err)
		}
		s.progress("wrote an administrator's kubeconfig to %s", s.opts.KubeconfigPath)
	}
	return nil
}

// tune raises a client's rate limits: the sandbox is one machine's worth
// of controllers, not a shared cluster.
func tune(cfg *rest.Config) *rest.Config {
	cfg.QPS, cfg.Burst = 200, 400
	return cfg
}

// install applies the deployment's namespace, RBAC and Service, creates
// the manager's user, the StorageClasses, Longhorn's
// csi-storage-capacity-tracking setting (true), the topology's nodes and,
// with the extender, its setting.
func (s *Sandbox) install(ctx context.Context) error {
	dir := filepath.Join(s.opts.ConfigDir, "default")
	ids, err := installDeployment(ctx, s.admin, dir)
	if err != nil {
		return err
	}
	if ids.namespace != Namespace {
		return fmt.Errorf("the deployment in %s installs into %q, not %s", dir, ids.namespace, Namespace)
	}
	name, groups := serviceAccountUser(ids.namespace, ids.manager)
	mgrUser, err := s.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, s.env.Config)
	if err != nil {
		return fmt.Errorf("adding the manager's user: %w", err)
	}
	s.managerConfig, s.managerUser = tune(mgrUser.Config()), name
	s.progress("installed Longhorn v1.12.0's CRDs, DiskSchedule's and the RBAC of %s; the manager runs as %s", dir, s.managerUser)

	for _, class := range []*storagev1.StorageClass{StorageClass(), WaitForFirstConsumerClass()} {
		if err := s.admin.Create(ctx, class); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating StorageClass %s: %w", class.Name, err)
		}
	}
	// Before the simulated cluster starts, which creates the setting at
	// Longhorn's default (false) only when it is missing.
	if err := s.admin.Create(ctx, capacityTracking()); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("turning on Longhorn's %s: %w", simcluster.SettingCSIStorageCapacityTracking, err)
	}
	if err := s.setExtenderEnabled(ctx, s.opts.Extender); err != nil {
		return err
	}
	if !s.opts.NoGate {
		if err := s.registerGate(ctx); err != nil {
			return err
		}
		if err := s.registerPodWebhook(ctx); err != nil {
			return err
		}
	}
	s.progress("created StorageClasses %s (immediate binding, the default) and %s (WaitForFirstConsumer); Longhorn's %s is true",
		StorageClassName, WaitForFirstConsumerClassName, simcluster.SettingCSIStorageCapacityTracking)
	return nil
}

// setExtenderEnabled sets scheduler-extender-enabled in the extender's
// ConfigMap, which the deployment installed.
func (s *Sandbox) setExtenderEnabled(ctx context.Context, enabled bool) error {
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: Namespace, Name: settings.ConfigMapName}
	if err := s.admin.Get(ctx, key, cm); err != nil {
		return fmt.Errorf("reading ConfigMap %s: %w", key.Name, err)
	}
	patch := client.MergeFrom(cm.DeepCopy())
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[settings.SchedulerExtenderEnabled] = strconv.FormatBool(enabled)
	if err := s.admin.Patch(ctx, cm, patch); err != nil {
		return fmt.Errorf("setting %s in ConfigMap %s: %w", settings.SchedulerExtenderEnabled, key.Name, err)
	}
	return nil
}

// startControllerManager starts kube-controller-manager with the
// workload, volume, node lifecycle, EndpointSlice and ServiceAccount
// controllers, each under its own ServiceAccount, its log beside the others.
func (s *Sandbox) startControllerManager(ctx context.Context) error {
	out, err := s.logFile("kube-controller-manager.log")
	if err != nil {
		return err
	}
	s.controllers, err = controlplane.StartControllerManager(ctx, s.env, controlplane.ControllerManagerOptions{
		Path:                   filepath.Join(s.opts.AssetsDir, "kube-controller-manager"),
		Dir:                    s.workDir,
		ServiceAccountKeyFile:  s.serviceAccountKey,
		NodeMonitorGracePeriod: s.opts.NodeMonitorGracePeriod,
		Out:                    out,
	})
	if err != nil {
		return err
	}
	s.ports = append(s.ports, s.controllers.Port)
	if err := s.track(Process{Name: "kube-controller-manager", PID: s.controllers.PID()}); err != nil {
		return err
	}
	go func() {
		<-s.controllers.Done()
		s.fail(fmt.Errorf("kube-controller-manager exited: %v", s.controllers.Err()))
	}()
	s.progress("started kube-controller-manager (pid %d): %s", s.controllers.PID(), strings.Join(controlplane.DefaultControllers(), ", "))
	return nil
}

// run starts mgr in the background, recording a failure if it stops
// before Stop asks it to.
func (s *Sandbox) run(name string, mgr ctrl.Manager) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{name: name, cancel: cancel, done: make(chan error, 1)}
	s.runners = append(s.runners, r)
	go func() {
		err := mgr.Start(ctx)
		if ctx.Err() == nil {
			s.fail(fmt.Errorf("%s stopped: %v", name, err))
		}
		r.done <- err
	}()
	return r
}

// track records a process the sandbox started and hands it to the reaper.
func (s *Sandbox) track(p Process) error {
	s.processes = append(s.processes, p)
	return s.reaper.Watch(p.PID)
}

// fail records the first component failure and closes Done.
func (s *Sandbox) fail(err error) {
	s.failOnce.Do(func() {
		s.failErr = err
		close(s.failed)
	})
}

// startLonghorn runs Longhorn: longhorn-manager v1.12.0's own control
// plane in sandbox-longhorn on the simulated data plane, and the simulated
// cluster around it (the nodes' kubelets and Leases, the CSI driver's
// provisioner, capacity and resizer) in its own manager with the
// administrator's credentials, like the components it stands in for.
func (s *Sandbox) startLonghorn(ctx context.Context) error {
	longhornLog, err := s.logFile("longhorn-manager.log")
	if err != nil {
		return err
	}
	// Longhorn's own code in this process (its API client, a test's
	// replica writers) logs through logrus's standard logger, which
	// belongs to the process.
	logrus.SetOutput(longhornLog)
	if s.dataPlane, err = newDataPlane(s.opts.Topology); err != nil {
		return err
	}
	nodeIPs := map[string]string{}
	for _, n := range s.dataPlane.Nodes {
		nodeIPs[n.Name] = n.IP
	}
	// Longhorn's CSI controller server serves here (sandbox-longhorn's
	// --csi-socket), unless only Longhorn's node controllers run.
	if !s.opts.LonghornNodesOnly {
		s.longhornCSI = filepath.Join(s.workDir, "longhorn-csi.sock")
	}
	s.outages = simcluster.NewOutages()
	// Longhorn's webhooks first, so that the simulation's start-up objects
	// pass Longhorn's mutators and validators as in a cluster.
	if err := s.startLonghornControllers(ctx); err != nil {
		return err
	}
	mgr, err := simcluster.NewManager(s.adminConfig, s.scheme, simcluster.Options{
		Namespace:         Namespace,
		Nodes:             s.opts.Topology.Longhorn(),
		CSI:               !s.opts.LonghornNodesOnly,
		NodeIPs:           nodeIPs,
		NodeLeaseDuration: nodeLeaseDuration(s.opts.NodeMonitorGracePeriod),
		Outages:           s.outages,
		Writer:            s,
	})
	if err != nil {
		return err
	}
	s.run("the simulated cluster", mgr)
	if !s.opts.LonghornNodesOnly {
		if err := s.startCSISidecars(ctx); err != nil {
			return err
		}
	}
	if s.opts.LonghornNodesOnly {
		s.progress("started the simulated cluster: %d nodes with %d disks, kubelets, no replica placement", len(s.opts.Topology.Nodes), s.opts.Topology.DiskCount())
	} else {
		s.progress("started the simulated cluster: %d nodes with %d disks, CSI, kubelets", len(s.opts.Topology.Nodes), s.opts.Topology.DiskCount())
	}
	return nil
}

// nodeLeaseDuration returns the simulated nodes' lease duration for a node
// monitor grace period: the kubelet's default (40s) is four fifths of node
// lifecycle's default grace period (50s), and so is this; zero keeps the
// default.
func nodeLeaseDuration(grace time.Duration) time.Duration {
	return grace * 4 / 5
}

// startManager runs the manager under its own user, with leader election
// and, with the extender, the extender on a free loopback port; or one such
// manager per Options.Managers entry, as the entry adjusts it.
func (s *Sandbox) startManager(context.Context) error {
	hooks := s.opts.Managers
	if len(hooks) == 0 {
		hooks = []ManagerHook{nil}
	}
	for i, hook := range hooks {
		name := "the manager"
		if len(hooks) > 1 {
			name = fmt.Sprintf("manager %d", i)
		}
		if err := s.startOneManager(name, hook); err != nil {
			return err
		}
	}
	if s.opts.Extender && s.opts.ExtenderURL != "" {
		s.extenderURL = s.opts.ExtenderURL
		s.progress("kube-scheduler calls the extender at %s", s.extenderURL)
	}
	return nil
}

// startOneManager starts one manager, adjusted by hook when not nil.
func (s *Sandbox) startOneManager(name string, hook ManagerHook) error {
	metricsPort, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(metricsPort)
	s.ports = append(s.ports, metricsPort)
	opts := manager.Options{
		Namespace:                    Namespace,
		MetricsBindAddress:           metricsAddr,
		HealthProbeBindAddress:       "0",
		LeaderElection:               true,
		SkipControllerNameValidation: true,
		// The manager runs on this machine, not on a simulated node; the
		// extender's heartbeat is labelled with the machine's name.
		NodeName:           hostname(),
		SecondaryScheduler: s.opts.SecondaryScheduler,
	}
	if s.opts.OnRefusedWrite != nil && !s.opts.LonghornNodesOnly {
		// Longhorn's own controllers write the replicas: their refused
		// writes are the gate's denials.
		opts.OnGateDenied = refusedReplicaWrite(s.opts.OnRefusedWrite)
	}
	if s.opts.Extender {
		port, err := controlplane.FreePort()
		if err != nil {
			return err
		}
		opts.ExtenderBindAddress = "127.0.0.1:" + strconv.Itoa(port)
		// kube-scheduler's bindVerb and the extender's /bind go together.
		opts.ExtenderBind = s.opts.ExtenderBind
		if s.extenderTLS == nil {
			// The extender serves HTTPS only, to callers with a client
			// certificate of its CA: the sandbox issues both, as the
			// manager's rotators do in a cluster.
			if s.extenderTLS, err = extendertls.Write(filepath.Join(s.workDir, "extender-certs"), extender.ServiceDNSName(Namespace)); err != nil {
				return err
			}
		}
		opts.ExtenderCertDir, opts.ExtenderClientCAFile = s.extenderTLS.CertDir, s.extenderTLS.CAFile
		if s.extenderURL == "" {
			s.extenderURL = "https://" + opts.ExtenderBindAddress
		}
		s.ports = append(s.ports, port)
	}
	if s.gateFront != nil {
		port, err := controlplane.FreePort()
		if err != nil {
			return err
		}
		opts.Gate = &manager.GateOptions{Host: "127.0.0.1", Port: port, TLS: gate.TLS{
			DNSName: "localhost",
			CertDir: filepath.Join(s.workDir, fmt.Sprintf("webhook-certs-%d", len(s.managers))),
			// Controller names are unique per process; sandboxes share one in tests.
			ControllerName: fmt.Sprintf("%s-%s-%d", gate.DefaultControllerName, filepath.Base(s.workDir), len(s.managers)),
		}}
		s.gateFront.add("127.0.0.1:" + strconv.Itoa(port))
		s.ports = append(s.ports, port)
	}
	cfg := rest.CopyConfig(s.managerConfig)
	if hook != nil {
		hook(&opts, cfg)
	}
	mgr, err := manager.New(cfg, s.scheme, opts)
	if err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	s.managers = append(s.managers, s.run(name, mgr))
	s.managerExtenders = append(s.managerExtenders, opts.ExtenderBindAddress)
	if s.opts.Extender {
		s.progress("started %s (metrics at http://%s/metrics, extender at https://%s)", name, opts.MetricsBindAddress, opts.ExtenderBindAddress)
	} else {
		s.progress("started %s (metrics at http://%s/metrics, no extender)", name, opts.MetricsBindAddress)
	}
	return nil
}

// RefusedWrite is a replica write of Longhorn's the gate denied.
type RefusedWrite struct {
	// Volume and Replica name the replica.
	Volume, Replica string
	// Write says what the write did ("scheduling it to node … disk …").
	Write string
	// Err is the gate's answer.
	Err error
	// At is when it was denied.
	At time.Time
}

// refusedReplicaWrite reports the gate's denials of Replica writes to
// report.
func refusedReplicaWrite(report func(RefusedWrite)) func(client.Object, string, time.Time) {
	return func(obj client.Object, message string, at time.Time) {
		r, ok := obj.(*lhv1.Replica)
		if !ok {
			return
		}
		report(RefusedWrite{
			Volume: r.Spec.VolumeName, Replica: r.Name,
			Write: fmt.Sprintf("scheduling it to node %q disk %q", r.Spec.NodeID, r.Spec.DiskID),
			Err:   errors.New(message), At: at,
		})
	}
}

// hostname returns this machine's name, or "sandbox".
func hostname() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "sandbox"
}

// startScheduler writes kube-scheduler's kubeconfig and configuration and
// starts it as the system:kube-scheduler user.
func (s *Sandbox) startScheduler(ctx context.Context) error {
	user, err := s.env.ControlPlane.AddUser(envtest.User{Name: "system:kube-scheduler"}, s.env.Config)
	if err != nil {
		return fmt.Errorf("adding kube-scheduler's user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("writing kube-scheduler's kubeconfig: %w", err)
	}
	kubeconfigPath := filepath.Join(s.workDir, "kube-scheduler.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing kube-scheduler's kubeconfig: %w", err)
	}
	cfg, err := MarshalSchedulerConfig(SchedulerConfig(kubeconfigPath, s.extenderURL, s.opts.ExtenderBind, s.schedulerTLS()))
	if err != nil {
		return err
	}
	cfgDir := s.opts.LogDir
	if cfgDir == "" {
		cfgDir = s.workDir
	}
	cfgPath := filepath.Join(cfgDir, "kube-scheduler-config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return fmt.Errorf("writing kube-scheduler's configuration: %w", err)
	}
	out, err := s.logFile("kube-scheduler.log")
	if err != nil {
		return err
	}
	var port int
	s.scheduler, port, err = controlplane.StartOnFreePort(func(port int) (*controlplane.Process, error) {
		return startScheduler(ctx, filepath.Join(s.opts.AssetsDir, "kube-scheduler"), cfgPath, port, out)
	})
	if err != nil {
		return err
	}
	s.ports = append(s.ports, port)
	if err := s.track(Process{Name: "kube-scheduler", PID: s.scheduler.PID()}); err != nil {
		return err
	}
	go func() {
		<-s.scheduler.Done()
		s.fail(fmt.Errorf("kube-scheduler exited: %v", s.scheduler.Err()))
	}()
	s.progress("started kube-scheduler (pid %d) with %s", s.scheduler.PID(), cfgPath)
	return nil
}

// waitReady waits until every disk's DiskSchedule is Ready and, with the
// extender, the extender answers /healthz.
func (s *Sandbox) waitReady(ctx context.Context) error {
	if err := s.waitLonghornUsable(ctx); err != nil {
		return err
	}
	if s.gateFront != nil {
		if err := s.waitGate(ctx); err != nil {
			return err
		}
		if err := s.waitPodWebhook(ctx); err != nil {
			return err
		}
		s.progress("the admission gate and the pod opt-in webhook serve")
	}
	s.progress("waiting for the %d disks' ledgers to be Ready", s.opts.Topology.DiskCount())
	var notReady string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, s.opts.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-s.failed:
			return false, s.failErr
		default:
		}
		for _, n := range s.opts.Topology.Nodes {
			for _, d := range n.Disks {
				ds := &dsv1.DiskSchedule{}
				key := client.ObjectKey{Namespace: Namespace, Name: DiskUUID(n.Name, d.Name)}
				if err := s.admin.Get(ctx, key, ds); err != nil {
					notReady = fmt.Sprintf("disk %s of node %s has no DiskSchedule %s yet", d.Name, n.Name, key.Name)
					return false, client.IgnoreNotFound(err)
				}
				if !meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady) {
					notReady = fmt.Sprintf("DiskSchedule %s (disk %s of node %s) is not Ready", key.Name, d.Name, n.Name)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the sandbox to be ready (%s; a Forbidden error in the log means the RBAC of config/default lacks a rule): %w", notReady, err)
	}
	if s.extenderURL == "" {
		return nil
	}
	// The leader serves the extender: behind a proxy of the caller's, any
	// manager's extender answering will do.
	urls := []string{s.extenderURL}
	if s.opts.ExtenderURL != "" {
		urls = nil
		for _, addr := range s.managerExtenders {
			urls = append(urls, "https://"+addr)
		}
	}
	hc, err := s.extenderTLS.HTTPClient(time.Second)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, s.opts.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		for _, url := range urls {
			if controlplane.Healthy(ctx, hc, url+"/healthz") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the scheduler extender at %v/healthz: %w", urls, err)
	}
	return nil
}

// Stop stops kube-scheduler, kube-controller-manager, the manager, the
// simulated cluster, the CSI sidecars, Longhorn, kube-apiserver and etcd,
// in that order, waits until every one has stopped, and removes the kubeconfig it wrote. It may be called more than
// once.
func (s *Sandbox) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.secondary != nil {
			errs = append(errs, s.secondary.Stop(10*time.Second))
		}
		if s.scheduler != nil {
			errs = append(errs, s.scheduler.Stop(10*time.Second))
		}
		if s.controllers != nil {
			errs = append(errs, s.controllers.Stop(10*time.Second))
		}
		// Stop in reverse order of start: the manager before the simulated cluster.
		for i := len(s.runners) - 1; i >= 0; i-- {
			errs = append(errs, s.runners[i].stop())
		}
		if s.csiSidecars != nil {
			errs = append(errs, s.csiSidecars.Stop(10*time.Second))
		}
		if s.longhorn != nil {
			errs = append(errs, s.longhorn.Stop(10*time.Second))
		}
		if s.gateFront != nil {
			errs = append(errs, s.gateFront.close())
		}
		if s.env != nil {
			if err := s.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping kube-apiserver and etcd: %w", err))
			}
		}
		for _, f := range s.logs {
			errs = append(errs, f.Close())
		}
		if s.workDir != "" {
			errs = append(errs, os.RemoveAll(s.workDir))
		}
		if s.opts.KubeconfigPath != "" && s.adminConfig != nil {
			if err := os.Remove(s.opts.KubeconfigPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		if s.reaper != nil {
			errs = append(errs, s.reaper.Stop())
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// Done is closed when a component of the sandbox stopped on its own
// (kube-scheduler or kube-controller-manager exited, a manager failed);
// Err says which.
func (s *Sandbox) Done() <-chan struct{} { return s.failed }

// Err returns why the sandbox failed, once Done is closed.
func (s *Sandbox) Err() error {
	select {
	case <-s.failed:
		return s.failErr
	default:
		return nil
	}
}

// StopManager stops the i-th manager (of Options.Managers; 0 is the one
// manager without them), as a graceful shutdown of its process would, and
// waits until it has stopped. It returns the error its Start returned.
// Stopping a stopped manager returns the same result again.
func (s *Sandbox) StopManager(i int) error {
	if i < 0 || i >= len(s.managers) {
		return fmt.Errorf("no manager %d: the sandbox runs %d", i, len(s.managers))
	}
	return s.managers[i].stop()
}

// StartManager starts one more manager, adjusted by hook when not nil, as
// a restarted or added replica of the Deployment would start; it serves the
// gate beside the others and joins the leader election. It returns the
// manager's index for StopManager.
func (s *Sandbox) StartManager(hook ManagerHook) (int, error) {
	i := len(s.managers)
	if err := s.startOneManager(fmt.Sprintf("manager %d", i), hook); err != nil {
		return 0, err
	}
	return i, nil
}

// AdminConfig returns a rest.Config of an administrator (system:masters).
func (s *Sandbox) AdminConfig() *rest.Config { return rest.CopyConfig(s.adminConfig) }

// ManagerConfig returns the rest.Config the manager runs with: its
// ServiceAccount's identity, authorized only by the deployment's RBAC.
func (s *Sandbox) ManagerConfig() *rest.Config { return rest.CopyConfig(s.managerConfig) }

// ManagerUser returns the user name the manager runs as.
func (s *Sandbox) ManagerUser() string { return s.managerUser }

// Client returns an administrator's client with the project's scheme.
func (s *Sandbox) Client() client.Client { return s.admin }

// Scheme returns the scheme of the sandbox's clients.
func (s *Sandbox) Scheme() *runtime.Scheme { return s.scheme }

// KubeconfigPath returns where the administrator's kubeconfig was
// written, or "".
func (s *Sandbox) KubeconfigPath() string { return s.opts.KubeconfigPath }

// ExtenderURL returns the extender's URL kube-scheduler calls, or "" without the extender.
func (s *Sandbox) ExtenderURL() string { return s.extenderURL }

// ExtenderTLS returns the certificates of the extender and of its callers
// (kube-scheduler's client pair), or nil without the extender.
func (s *Sandbox) ExtenderTLS() *extendertls.Files { return s.extenderTLS }

// schedulerTLS is the tlsConfig of the schedulers' extender: the client
// pair and the CA the sandbox issued, and the extender Service's name,
// which its serving certificate is issued for, whatever address the URL
// names.
func (s *Sandbox) schedulerTLS() *schedulerconfigv1.ExtenderTLSConfig {
	if s.extenderTLS == nil {
		return nil
	}
	return &schedulerconfigv1.ExtenderTLSConfig{ServerName: s.extenderTLS.ServerName, CertFile: s.extenderTLS.ClientCertFile,
		KeyFile: s.extenderTLS.ClientKeyFile, CAFile: s.extenderTLS.CAFile}
}

// Processes returns the processes the sandbox started, in order: etcd,
// kube-apiserver, kube-controller-manager, sandbox-longhorn, sandbox-csi
// (unless Longhorn's node controllers alone run), kube-scheduler and the
// second scheduler, diskschedule-scheduler (with
// Options.SecondaryScheduler).
func (s *Sandbox) Processes() []Process { return append([]Process(nil), s.processes...) }

// Ports returns the loopback ports the sandbox listens on: kube-apiserver,
// etcd's client port, kube-controller-manager's health port, the manager's
// metrics, the extender and kube-scheduler's health port.
func (s *Sandbox) Ports() []int { return append([]int(nil), s.ports...) }

// dumpGoroutines writes every goroutine's stack to a file, to show what a
// runner that does not stop is waiting for, and says where.
func dumpGoroutines() string {
	f, err := os.CreateTemp("", "sandbox-stop-goroutines-*.txt")
	if err != nil {
		return "its goroutines could not be written: " + err.Error()
	}
	defer func() { _ = f.Close() }()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return "its goroutines could not be written: " + err.Error()
	}
	return "the goroutines then are in " + f.Name()
}
