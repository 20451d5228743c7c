package manager

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// leaseLock is the manager's leader-election lock: controller-runtime's
// own (a Lease named LeaderElectionID in Longhorn's namespace, with its
// client timeout), except that the identity also names the address this
// replica's gate serves on (leader.Identity), so that the other replicas'
// gates can ask the holder itself whether it still decides.
type leaseLock struct {
	resourcelock.Interface
	identity string
	events   *lateRecorder
}

// newLeaseLock builds the lock for identity on cfg.
func newLeaseLock(cfg *rest.Config, opts Options, identity string) (*leaseLock, error) {
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// As controller-runtime does: a hung request must not cost the lease.
	renewDeadline := opts.RenewDeadline
	if renewDeadline <= 0 {
		renewDeadline = 10 * time.Second
	}
	cfg.Timeout = max(renewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the leader-election client: %w", err)
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the leader-election client: %w", err)
	}
	events := &lateRecorder{}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.Namespace, opts.LeaderElectionID, core, coordination,
		resourcelock.ResourceLockConfig{Identity: identity, EventRecorder: events})
	if err != nil {
		return nil, fmt.Errorf("building the leader-election lock: %w", err)
	}
	return &leaseLock{Interface: lock, identity: identity, events: events}, nil
}

// replicaName is this replica's unique name, as controller-runtime makes
// it: its hostname (the pod's name) and a random suffix.
func replicaName() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("reading the hostname for the leader-election identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// gateAddress is where the other replicas reach this replica's gate: the
// host it listens on when that is one address, else the pod IP; "" when
// neither is known.
func gateAddress(opts Options) string {
	if opts.Gate == nil {
		return ""
	}
	host := opts.Gate.Host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = opts.AdvertiseIP
	}
	if host == "" {
		return ""
	}
	port := opts.Gate.Port
	if port == 0 {
		port = defaultGatePort
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// defaultGatePort is the gate's port when GateOptions.Port is 0.
const defaultGatePort = 9443

// lateRecorder is the lock's event recorder: the manager's, once the
// manager that makes it exists; events before that are dropped.
type lateRecorder struct {
	to atomic.Pointer[record.EventRecorder]
}

// set makes r record to rec.
func (r *lateRecorder) set(rec record.EventRecorder) { r.to.Store(&rec) }

// Eventf records through the manager's recorder, once set.
func (r *lateRecorder) Eventf(obj runtime.Object, eventType, reason, message string, args ...interface{}) {
	if rec := r.to.Load(); rec != nil {
		(*rec).Eventf(obj, eventType, reason, message, args...)
	}
}
