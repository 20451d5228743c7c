package simcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/settings"
)

// bootstrap creates, once at start, what longhorn-manager and the nodes'
// kubelets create when a cluster comes up: Longhorn's default settings,
// each node's Kubernetes Node and each Longhorn Node. Objects that exist are
// left as they are.
type bootstrap struct {
	sim *sim
}

// bootstrapRetry is how often a failed start-up write is tried again.
const bootstrapRetry = time.Second

// Start creates the missing objects, retrying until it succeeds or ctx ends.
func (b *bootstrap) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("simcluster")
	err := wait.PollUntilContextCancel(ctx, bootstrapRetry, true, func(ctx context.Context) (bool, error) {
		if err := b.createAll(ctx); err != nil {
			log.Error(err, "Creating Longhorn's start-up objects; retrying")
			return false, nil
		}
		return true, nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("creating Longhorn's start-up objects: %w", err)
	}
	log.Info("Created Longhorn's settings and nodes", "namespace", b.sim.namespace, "nodes", len(b.sim.nodes))
	return nil
}

func (b *bootstrap) createAll(ctx context.Context) error {
	for _, s := range DefaultSettings(b.sim.namespace) {
		if err := createIfMissing(ctx, b.sim, s); err != nil {
			return fmt.Errorf("creating setting %s: %w", s.Name, err)
		}
	}
	for i := range b.sim.nodes {
		n := &b.sim.nodes[i]
		if err := createIfMissing(ctx, b.sim, KubernetesNode(*n)); err != nil {
			return fmt.Errorf("registering Kubernetes node %s: %w", n.Name, err)
		}
	}
	// The instance managers run before a Longhorn Node can turn Ready:
	// Longhorn's replica scheduler skips a node whose instance manager is
	// not running, and retries a volume it could not place only at its
	// 30 s resync.
	if err := createInstances(ctx, b.sim); err != nil {
		return err
	}
	for i := range b.sim.nodes {
		n := &b.sim.nodes[i]
		if err := createIfMissing(ctx, b.sim, LonghornNode(*n, b.sim.namespace)); err != nil {
			return fmt.Errorf("creating Longhorn node %s: %w", n.Name, err)
		}
	}
	return nil
}

// createIfMissing creates obj unless an object of its name exists.
func createIfMissing(ctx context.Context, s *sim, obj client.Object) error {
	if err := s.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// DefaultSettings returns the Setting objects of Longhorn's scheduling
// settings at Longhorn v1.12's defaults, as longhorn-manager creates them
// at start.
func DefaultSettings(namespace string) []*lhv1.Setting {
	var out []*lhv1.Setting
	for name, value := range settings.Defaults() {
		if !settings.IsLonghorn(name) {
			continue
		}
		out = append(out, &lhv1.Setting{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Value: value})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// KubernetesNode returns the Kubernetes Node a simulated node's kubelet
// registers: hostname, zone and region labels. Its status is the kubelet's
// job once it exists.
func KubernetesNode(n NodeSpec) *corev1.Node {
	kn := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{corev1.LabelHostname: n.Name}}}
	if n.Zone != "" {
		kn.Labels[corev1.LabelTopologyZone] = n.Zone
	}
	if n.Region != "" {
		kn.Labels[corev1.LabelTopologyRegion] = n.Region
	}
	return kn
}

// LonghornNode returns the Longhorn Node of n in namespace, shaped as
// longhorn-manager v1.12 creates one: scheduling allowed, no eviction, every
// disk a schedulable filesystem disk at DiskPath with its reservation and
// tags. Its status is the node controller's job.
func LonghornNode(n NodeSpec, namespace string) *lhv1.Node {
	ln := &lhv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: namespace},
		Spec: lhv1.NodeSpec{
			Name: n.Name, AllowScheduling: true, Tags: nonNil(n.Tags),
			Disks: make(map[string]lhv1.DiskSpec, len(n.Disks)),
		},
	}
	for _, d := range n.Disks {
		ln.Spec.Disks[d.Name] = lhv1.DiskSpec{
			Type: lhv1.DiskTypeFilesystem, Path: DiskPath(n.Name, d.Name), DiskDriver: lhv1.DiskDriverNone,
			AllowScheduling: true, StorageReserved: d.Reserved, Tags: nonNil(d.Tags),
		}
	}
	return ln
}

// nonNil returns a copy of s, empty rather than nil, as Longhorn writes lists.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}
