package diskmonitor

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/nodestatus"
)

// Monitor measures the disks of one node on an interval.
type Monitor struct {
	client    client.Client
	source    Source
	clock     clock.PassiveClock
	namespace string
	nodeName  string
	interval  time.Duration
}

// New returns a Monitor of the named node's disks.
func New(c client.Client, source Source, clk clock.PassiveClock, namespace, nodeName string, interval time.Duration) *Monitor {
	return &Monitor{client: c, source: source, clock: clk, namespace: namespace, nodeName: nodeName, interval: interval}
}

// +kubebuilder:rbac:groups=longhorn.io,resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=longhorn.io,resources=nodes/status,verbs=get;update;patch

// Start measures the disks now and then every interval until ctx ends. It
// runs on every node, not only on a leader.
func (m *Monitor) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithValues("node", m.nodeName)
	ticker := time.NewTicker(m.interval)
	defer ticker.Stop()
	for {
		if err := m.Sync(ctx); err != nil {
			log.Error(err, "Measuring disks")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// NeedLeaderElection tells the manager to run the monitor on every replica.
func (m *Monitor) NeedLeaderElection() bool { return false }

// Sync measures every disk of the node once and applies the results.
func (m *Monitor) Sync(ctx context.Context) error {
	node := &longhornv1.Node{}
	if err := m.client.Get(ctx, types.NamespacedName{Namespace: m.namespace, Name: m.nodeName}, node); err != nil {
		return fmt.Errorf("getting node %s: %w", m.nodeName, client.IgnoreNotFound(err))
	}
	status := Measure(node, m.source, metav1.NewTime(m.clock.Now()))
	return nodestatus.Apply(ctx, m.client, m.namespace, m.nodeName, nodestatus.DiskMonitorManager, status)
}

// Measure returns the disk monitor's fields of the node's status: one entry
// per disk in the spec, Ready when the source could measure it.
func Measure(node *longhornv1.Node, source Source, now metav1.Time) longhornv1.NodeStatus {
	out := longhornv1.NodeStatus{}
	for name, spec := range node.Spec.Disks {
		var prev []metav1.Condition
		if old := node.Status.DiskStatus[name]; old != nil {
			prev = old.Conditions
		}
		disk := &longhornv1.DiskStatus{}
		measured, err := source.Measure(name, spec)
		if err != nil {
			disk.Conditions = []metav1.Condition{nodestatus.Condition(prev, longhornv1.DiskConditionReady, metav1.ConditionFalse,
				longhornv1.DiskReasonNoDiskInfo, err.Error(), now)}
		} else {
			disk.DiskUUID = measured.UUID
			disk.DiskType = measured.Type
			disk.StorageMaximum = measured.StorageMaximum
			disk.StorageAvailable = measured.StorageAvailable
			disk.Conditions = []metav1.Condition{nodestatus.Condition(prev, longhornv1.DiskConditionReady, metav1.ConditionTrue,
				longhornv1.DiskReasonReady, "the disk was measured", now)}
		}
		if out.DiskStatus == nil {
			out.DiskStatus = map[string]*longhornv1.DiskStatus{}
		}
		out.DiskStatus[name] = disk
	}
	return out
}
