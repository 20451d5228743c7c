package simlonghorn

import (
	"maps"
	"slices"
	"sort"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

// defaultReplicaCount is Longhorn's default-replica-count, which its
// admission webhook gives a volume that asks for 0.
const defaultReplicaCount = 3

// volumeInput is what planReplicas decides from: one volume and the volume
// controller's own cache of its replicas, the nodes and the settings.
type volumeInput struct {
	volume   *lhv1.Volume
	replicas []lhv1.Replica
	nodes    []lhv1.Node
	settings settings.Scheduling
	now      time.Time
	// newID returns a fresh random suffix for replica and directory names.
	newID func() string
}

// replicaPlan is one replica as the plan wants it.
type replicaPlan struct {
	// cur is the replica as cached; nil for a replica the plan creates.
	cur *lhv1.Replica
	// want is the replica as the plan wants it written.
	want *lhv1.Replica
	// choice is where this plan places the replica, if it does.
	choice *placement.Choice
}

// changed reports whether the plan changes the replica's spec or labels.
func (p *replicaPlan) changed() bool {
	if p.cur == nil {
		return true
	}
	return !equalSpec(p.cur, p.want)
}

// volumePlan is what the volume controller writes for one volume's replicas.
type volumePlan struct {
	// replicas are the live replicas and the new ones, by name.
	replicas []*replicaPlan
	// remove are replicas to delete.
	remove []*lhv1.Replica
	// failure is the first placement that found no disk, if any.
	failure *placement.Result
	// failurePinned tells that the failed replica was pinned to a node.
	failurePinned bool
	// localSkipped says why no local replica was created for best-effort
	// data locality, when one was wanted but no disk there can take it.
	localSkipped string
}

// wantedReplicas returns the volume's numberOfReplicas, with Longhorn's
// default for 0.
func wantedReplicas(v *lhv1.Volume) int {
	if v.Spec.NumberOfReplicas <= 0 {
		return defaultReplicaCount
	}
	return v.Spec.NumberOfReplicas
}

// planReplicas decides, as Longhorn v1.12's volume controller does, which
// replicas to create (unscheduled), where to place unscheduled ones (with
// package placement and Longhorn's own view of disk space), how each
// replica's spec follows the volume (size, desired state, health), and
// which surplus replicas to remove.
func planReplicas(in volumeInput) volumePlan {
	v := in.volume
	var plan volumePlan
	for i := range in.replicas {
		r := &in.replicas[i]
		if !r.DeletionTimestamp.IsZero() {
			continue
		}
		plan.replicas = append(plan.replicas, &replicaPlan{cur: r, want: r.DeepCopy()})
	}
	sort.Slice(plan.replicas, func(i, j int) bool { return plan.replicas[i].want.Name < plan.replicas[j].want.Name })

	want := wantedReplicas(v)
	attached := v.Spec.NodeID != "" && v.Status.State == lhv1.VolumeStateAttached && v.Status.CurrentNodeID == v.Spec.NodeID
	nodes := placementNodes(in.nodes, in.settings)

	// Replenish: a new volume gets all its replicas at once; an attached
	// one is rebuilt one replica at a time.
	if missing := want - usableReplicas(v, plan.replicas); missing > 0 && (len(plan.replicas) == 0 || attached) {
		if len(plan.replicas) > 0 {
			missing = 1
		}
		for range missing {
			plan.replicas = append(plan.replicas, &replicaPlan{want: NewReplica(v, "", in.newID())})
		}
	}

	// Best-effort data locality: a local replica, once every replica is
	// healthy, only when a disk of the attached node can take it.
	if v.Spec.DataLocality == lhv1.DataLocalityBestEffort && attached && !hasLocalReplica(plan.replicas, v.Spec.NodeID) &&
		healthyReplicas(plan.replicas) >= want {
		res := placement.Place(placement.Request{
			Volume: v, Size: v.Spec.Size, ActualSize: v.Status.ActualSize, Count: 1,
			Existing: existingReplicas(plan.replicas), HardNodeAffinity: v.Spec.NodeID, Nodes: nodes, Settings: in.settings,
		})
		if len(res.Choices) > 0 {
			plan.replicas = append(plan.replicas, &replicaPlan{want: NewReplica(v, v.Spec.NodeID, in.newID())})
		} else {
			plan.localSkipped = res.Message
		}
	}

	schedule(&plan, in, nodes)
	for _, p := range plan.replicas {
		followVolume(p, v, in.now)
	}
	plan.remove = surplus(v, plan.replicas)
	if len(plan.remove) > 0 {
		plan.replicas = slices.DeleteFunc(plan.replicas, func(p *replicaPlan) bool {
			return p.cur != nil && slices.Contains(plan.remove, p.cur)
		})
	}
	return plan
}

// placementNodes returns Longhorn's nodes as placement sees them, with
// Longhorn's own view of each disk's space (its status storageScheduled).
func placementNodes(nodes []lhv1.Node, s settings.Scheduling) []placement.Node {
	out := make([]placement.Node, 0, len(nodes))
	for i := range nodes {
		out = append(out, placement.FromLonghorn(&nodes[i], placement.LonghornSpace(&nodes[i], s)))
	}
	return out
}

// NewReplica returns a new, unscheduled replica of v as Longhorn creates
// one: owned by the volume, stopped, the volume's size, engine and image.
func NewReplica(v *lhv1.Volume, hardNodeAffinity, id string) *lhv1.Replica {
	r := &lhv1.Replica{
		ObjectMeta: metav1.ObjectMeta{
			Name: v.Name + "-r-" + id, Namespace: v.Namespace,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: lhv1.SchemeGroupVersion.String(), Kind: "Volume", Name: v.Name, UID: v.UID,
			}},
		},
		Spec: lhv1.ReplicaSpec{
			InstanceSpec: lhv1.InstanceSpec{
				VolumeName: v.Name, VolumeSize: v.Spec.Size, Image: volumeImage(v),
				DesireState: lhv1.InstanceStateStopped, DataEngine: dataEngine(v),
			},
			EngineName:              v.Name + "-e-0",
			Active:                  true,
			BackingImage:            v.Spec.BackingImage,
			HardNodeAffinity:        hardNodeAffinity,
			RevisionCounterDisabled: v.Spec.RevisionCounterDisabled,
			SnapshotMaxCount:        v.Spec.SnapshotMaxCount,
			SnapshotMaxSize:         v.Spec.SnapshotMaxSize,
		},
	}
	setReplicaLabels(r)
	return r
}

// volumeImage returns the engine image of v's replicas.
func volumeImage(v *lhv1.Volume) string {
	if v.Status.CurrentImage != "" {
		return v.Status.CurrentImage
	}
	if v.Spec.Image != "" {
		return v.Spec.Image
	}
	return EngineImage
}

// dataEngine returns v's data engine, v1 when unset.
func dataEngine(v *lhv1.Volume) lhv1.DataEngineType {
	if v.Spec.DataEngine == "" {
		return lhv1.DataEngineTypeV1
	}
	return v.Spec.DataEngine
}

// setReplicaLabels sets the labels Longhorn keeps on a replica.
func setReplicaLabels(r *lhv1.Replica) {
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	r.Labels[LabelVolume] = r.Spec.VolumeName
	r.Labels[LabelNode] = r.Spec.NodeID
	r.Labels[LabelDiskUUID] = r.Spec.DiskID
	r.Labels[LabelBackingImage] = r.Spec.BackingImage
}

// usableReplicas counts the replicas Longhorn counts towards
// numberOfReplicas: not failed, not evicting, active, and not a best-effort
// local replica that failed to schedule.
func usableReplicas(v *lhv1.Volume, plans []*replicaPlan) int {
	n := 0
	for _, p := range plans {
		r := p.want
		if v.Spec.DataLocality == lhv1.DataLocalityBestEffort && r.Spec.HealthyAt == "" && r.Spec.FailedAt == "" &&
			r.Spec.NodeID == "" && v.Status.CurrentNodeID != "" && r.Spec.HardNodeAffinity == v.Status.CurrentNodeID {
			continue
		}
		if r.Spec.FailedAt == "" && !r.Spec.EvictionRequested && r.Spec.Active {
			n++
		}
	}
	return n
}

// isHealthy reports whether Longhorn counts r as healthy: it has been
// read-write since its last rebuild and has not failed since.
func isHealthy(r *lhv1.Replica) bool {
	return r.Spec.HealthyAt != "" && r.Spec.FailedAt == "" && r.Spec.Active
}

// healthyReplicas counts the healthy replicas.
func healthyReplicas(plans []*replicaPlan) int {
	n := 0
	for _, p := range plans {
		if isHealthy(p.want) {
			n++
		}
	}
	return n
}

// hasLocalReplica reports whether a replica is on node or pinned to it.
func hasLocalReplica(plans []*replicaPlan, node string) bool {
	for _, p := range plans {
		if node != "" && (p.want.Spec.NodeID == node || p.want.Spec.HardNodeAffinity == node) {
			return true
		}
	}
	return false
}

// existingReplicas returns the scheduled replicas as placement counts them
// for anti-affinity and data locality.
func existingReplicas(plans []*replicaPlan) []placement.Replica {
	var out []placement.Replica
	for _, p := range plans {
		if p.want.Spec.NodeID != "" {
			out = append(out, placement.Replica{NodeID: p.want.Spec.NodeID, DiskUUID: p.want.Spec.DiskID, Healthy: p.want.Spec.FailedAt == ""})
		}
	}
	return out
}

// schedule places the unscheduled replicas that may be placed now, in
// groups by the node they are pinned to, as Longhorn's scheduler does for
// each in turn: best-effort and strict-local replicas wait for the volume
// to be attached; strict-local ones are pinned to its node.
func schedule(plan *volumePlan, in volumeInput, nodes []placement.Node) {
	v := in.volume
	var pins []string
	groups := map[string][]*replicaPlan{}
	for _, p := range plan.replicas {
		r := p.want
		if r.Spec.NodeID != "" || (r.Spec.HealthyAt == "" && r.Spec.FailedAt != "") {
			continue
		}
		switch v.Spec.DataLocality {
		case lhv1.DataLocalityStrictLocal:
			if v.Spec.NodeID == "" {
				continue
			}
			r.Spec.HardNodeAffinity = v.Spec.NodeID
		case lhv1.DataLocalityBestEffort:
			if v.Spec.NodeID == "" {
				continue
			}
		}
		pin := r.Spec.HardNodeAffinity
		if _, ok := groups[pin]; !ok {
			pins = append(pins, pin)
		}
		groups[pin] = append(groups[pin], p)
	}
	for _, pin := range pins {
		group := groups[pin]
		res := placement.Place(placement.Request{
			Volume: v, Size: v.Spec.Size, ActualSize: v.Status.ActualSize, Count: len(group),
			Existing: existingReplicas(plan.replicas), HardNodeAffinity: pin, Nodes: nodes, Settings: in.settings,
		})
		for i, c := range res.Choices {
			r := group[i].want
			r.Spec.NodeID, r.Spec.DiskID, r.Spec.DiskPath = c.NodeID, c.DiskUUID, c.DiskPath
			r.Spec.DataDirectoryName = v.Name + "-" + in.newID()
			group[i].choice = &res.Choices[i]
			charge(nodes, c, v.Spec.Size)
		}
		if res.Reason != "" && plan.failure == nil {
			plan.failure, plan.failurePinned = &res, pin != ""
		}
	}
}

// charge counts a replica of size bytes placed by c in the nodes' view, so
// the next group sees it.
func charge(nodes []placement.Node, c placement.Choice, size int64) {
	for i := range nodes {
		if nodes[i].Name != c.NodeID {
			continue
		}
		for j := range nodes[i].Disks {
			if nodes[i].Disks[j].UUID == c.DiskUUID {
				nodes[i].Disks[j].StorageScheduled += size
			}
		}
	}
}

// followVolume makes a replica's spec follow its volume: the volume's size
// (expansion), running while the volume is attached (requested on a node)
// and the replica scheduled, and marked healthy once it runs.
func followVolume(p *replicaPlan, v *lhv1.Volume, now time.Time) {
	r := p.want
	if r.Spec.VolumeSize < v.Spec.Size {
		r.Spec.VolumeSize = v.Spec.Size
	}
	r.Spec.DesireState = lhv1.InstanceStateStopped
	if v.Spec.NodeID != "" && r.Spec.NodeID != "" && r.Spec.FailedAt == "" {
		r.Spec.DesireState = lhv1.InstanceStateRunning
	}
	if p.cur != nil && p.cur.Status.CurrentState == lhv1.InstanceStateRunning && r.Spec.DesireState == lhv1.InstanceStateRunning &&
		r.Spec.HealthyAt == "" {
		r.Spec.HealthyAt = longhornTime(now)
		r.Spec.LastHealthyAt = r.Spec.HealthyAt
	}
	setReplicaLabels(r)
}

// surplus returns the replicas Longhorn's clean-up deletes: unscheduled
// replicas no longer needed, and one extra healthy replica (a remote one
// once a local one is healthy, for data locality).
func surplus(v *lhv1.Volume, plans []*replicaPlan) []*lhv1.Replica {
	want := wantedReplicas(v)
	healthy := healthyReplicas(plans)
	var out []*lhv1.Replica
	for _, p := range plans {
		r := p.want
		if p.cur == nil || r.Spec.NodeID != "" || r.Spec.HealthyAt != "" {
			continue
		}
		disabled := v.Spec.DataLocality == "" || v.Spec.DataLocality == lhv1.DataLocalityDisabled
		if (disabled && r.Spec.HardNodeAffinity != "") || (healthy >= want && r.Spec.HardNodeAffinity != v.Status.CurrentNodeID) {
			out = append(out, p.cur)
		}
	}
	if len(out) > 0 || healthy <= want {
		return out
	}
	// One extra healthy replica: with data locality, a remote one once a
	// replica is on (or pinned to) the attached node; the smallest name
	// otherwise, so repeated reconciles delete the same one.
	local := v.Spec.DataLocality != "" && v.Spec.DataLocality != lhv1.DataLocalityDisabled && hasLocalReplica(plans, v.Spec.NodeID)
	for _, p := range plans {
		if p.cur == nil || !isHealthy(p.want) {
			continue
		}
		if local && p.want.Spec.NodeID == v.Spec.NodeID {
			continue
		}
		return []*lhv1.Replica{p.cur}
	}
	return nil
}

// equalSpec reports whether two replicas have the same spec and labels.
func equalSpec(a, b *lhv1.Replica) bool {
	return a.Spec == b.Spec && maps.Equal(a.Labels, b.Labels)
}
