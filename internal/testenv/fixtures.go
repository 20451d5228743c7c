package testenv

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/diskmonitor"
	"github.com/longhorn/diskschedule/internal/nodestatus"
)

// Disk describes a simulated disk of a test node.
type Disk struct {
	// UUID names the disk's DiskSchedule.
	UUID string
	// Size is storageMaximum and the initial storageAvailable, in bytes.
	Size int64
	// Reserved is storageReserved, in bytes.
	Reserved int64
	// Tags are the disk's tags.
	Tags []string
}

// NodeFixture describes a simulated node: a Ready Kubernetes Node and a
// Longhorn Node whose disks the static disk monitor has measured.
type NodeFixture struct {
	// Name is the node's name.
	Name string
	// Zone is the topology.kubernetes.io/zone label, if any.
	Zone string
	// Tags are the Longhorn node tags.
	Tags []string
	// Disks are the node's disks by name.
	Disks map[string]Disk
}

// KubeNode returns a Ready, untainted Kubernetes Node for the fixture.
func (f NodeFixture) KubeNode() *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.Name, Labels: map[string]string{corev1.LabelHostname: f.Name}}}
	if f.Zone != "" {
		n.Labels[corev1.LabelTopologyZone] = f.Zone
	}
	return n
}

// CreateNode creates the fixture's Kubernetes Node (made Ready, the
// not-ready taint cleared, as no node lifecycle controller runs here) and
// its Longhorn Node in namespace, and applies the disk monitor's
// measurements of its disks.
func (f NodeFixture) CreateNode(ctx context.Context, c client.Client, namespace string) error {
	kn := f.KubeNode()
	if err := c.Create(ctx, kn); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Kubernetes node %s: %w", f.Name, err)
	}
	if err := MakeKubeNodeReady(ctx, c, f.Name, nil); err != nil {
		return err
	}
	ln := &longhornv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: f.Name, Namespace: namespace},
		Spec:       longhornv1.NodeSpec{AllowScheduling: true, Tags: f.Tags, Disks: map[string]longhornv1.DiskSpec{}},
	}
	for name, d := range f.Disks {
		ln.Spec.Disks[name] = longhornv1.DiskSpec{
			Path: "/var/lib/longhorn/" + name, DiskType: longhornv1.DiskTypeFilesystem,
			AllowScheduling: true, StorageReserved: d.Reserved, Tags: d.Tags,
		}
	}
	if err := c.Create(ctx, ln); err != nil {
		return fmt.Errorf("creating Longhorn node %s: %w", f.Name, err)
	}
	return f.Measure(ctx, c, namespace)
}

// Source returns the static disk-monitor source of the fixture's disks.
func (f NodeFixture) Source() diskmonitor.Static {
	src := diskmonitor.Static{}
	for name, d := range f.Disks {
		src[name] = diskmonitor.Measurement{UUID: d.UUID, Type: longhornv1.DiskTypeFilesystem, StorageMaximum: d.Size, StorageAvailable: d.Size}
	}
	return src
}

// Measure applies the disk monitor's fields for the fixture's disks, as the
// disk monitor of the node would.
func (f NodeFixture) Measure(ctx context.Context, c client.Client, namespace string) error {
	ln := &longhornv1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: f.Name}, ln); err != nil {
		return fmt.Errorf("getting Longhorn node %s: %w", f.Name, err)
	}
	status := diskmonitor.Measure(ln, f.Source(), metav1.Now())
	return nodestatus.Apply(ctx, c, namespace, f.Name, nodestatus.DiskMonitorManager, status)
}

// MakeKubeNodeReady sets the Kubernetes node Ready with allocatable
// resources (plus extra), and removes the not-ready taint.
func MakeKubeNodeReady(ctx context.Context, c client.Client, name string, extra corev1.ResourceList) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		taints := n.Spec.Taints[:0]
		for _, t := range n.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				taints = append(taints, t)
			}
		}
		n.Spec.Taints = taints
		if err := c.Update(ctx, n); err != nil {
			return err
		}
		resources := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("250"),
		}
		for k, v := range extra {
			resources[k] = v
		}
		n.Status.Capacity, n.Status.Allocatable = resources, resources
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "simulated node", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}
		return c.Status().Update(ctx, n)
	})
}

// DiskUUIDs returns the UUIDs of every disk of the fixtures, sorted.
func DiskUUIDs(fixtures ...NodeFixture) []string {
	var out []string
	for _, f := range fixtures {
		for _, d := range f.Disks {
			out = append(out, d.UUID)
		}
	}
	sort.Strings(out)
	return out
}
