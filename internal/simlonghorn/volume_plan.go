package simlonghorn

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/longhorn/go-common-libs/multierr"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/longhorn/longhorn-manager/scheduler"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// defaultReplicaCount is Longhorn's default-replica-count, which its
// admission webhook gives a volume that asks for 0.
const defaultReplicaCount = 3

// replicaScheduler is the part of Longhorn v1.12.0's own replica scheduler
// (scheduler.ReplicaScheduler) the volume controller calls. It reads the
// nodes, disks, settings, instance managers and engine images from its
// longhorn-manager pod's datastore.
type replicaScheduler interface {
	ScheduleReplica(r *lhv1.Replica, rs map[string]*lhv1.Replica, v *lhv1.Volume) (*lhv1.Replica, multierr.MultiError)
	FindDiskCandidates(r *lhv1.Replica, rs map[string]*lhv1.Replica, v *lhv1.Volume) (map[string]*scheduler.Disk, multierr.MultiError)
	CheckAndReuseFailedReplica(rs map[string]*lhv1.Replica, v *lhv1.Volume, hardNodeAffinity string) (*lhv1.Replica, error)
}

// volumeInput is what planReplicas decides from: one volume, the volume
// controller's own cache of its replicas, and the replica scheduler of the
// longhorn-manager pod that owns the volume.
type volumeInput struct {
	volume    *lhv1.Volume
	replicas  []lhv1.Replica
	scheduler replicaScheduler
	now       time.Time
	// newID returns a fresh random suffix for replica names.
	newID func() string
}

// replicaPlan is one replica as the plan wants it.
type replicaPlan struct {
	// cur is the replica as cached; nil for a replica the plan creates.
	cur *lhv1.Replica
	// want is the replica as the plan wants it written.
	want *lhv1.Replica
	// placed tells that Longhorn's scheduler placed the replica in this plan.
	placed bool
	// reused tells that the plan reuses this failed replica.
	reused bool
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
	// failure is why the first replica Longhorn's scheduler could not
	// place found no disk, if any.
	failure *scheduleFailure
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

// scheduleFailure is a replica Longhorn's scheduler found no disk for.
type scheduleFailure struct {
	// reason is the volume's Scheduled condition reason.
	reason string
	// message is the scheduler's reasons, joined, as Longhorn's condition
	// message says them.
	message string
	// detail is the scheduler's errors in full.
	detail string
}

// planReplicas decides, as Longhorn v1.12's volume controller does, which
// replicas to create (unscheduled) or reuse, where to place unscheduled ones
// (with Longhorn's own replica scheduler), how each replica's spec follows
// the volume (size, desired state, health), and which surplus replicas to
// remove.
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

	// Replenish: a new volume gets all its replicas at once; an attached
	// one is rebuilt one replica at a time, reusing a failed replica when
	// Longhorn's scheduler says one can be reused.
	if missing := want - usableReplicas(v, plan.replicas); missing > 0 && (len(plan.replicas) == 0 || attached) {
		if len(plan.replicas) > 0 {
			missing = 1
			if r, err := in.scheduler.CheckAndReuseFailedReplica(replicaMap(plan.replicas), v, ""); err == nil && r != nil {
				reuse(plan.replicas, r.Name)
				missing = 0
			}
		}
		for range missing {
			plan.replicas = append(plan.replicas, &replicaPlan{want: NewReplica(v, "", in.newID())})
		}
	}

	// Best-effort data locality: a local replica, once every replica is
	// healthy, only when Longhorn's scheduler finds a disk on the attached
	// node for it.
	if v.Spec.DataLocality == lhv1.DataLocalityBestEffort && attached && !hasLocalReplica(plan.replicas, v.Spec.NodeID) &&
		healthyReplicas(plan.replicas) >= want {
		local := NewReplica(v, v.Spec.NodeID, in.newID())
		disks, errs := in.scheduler.FindDiskCandidates(local, replicaMap(plan.replicas), v)
		if len(disks) > 0 {
			plan.replicas = append(plan.replicas, &replicaPlan{want: local})
		} else {
			_, plan.localSkipped = reasons(errs)
		}
	}

	schedule(&plan, in)
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

// replicaMap returns the plan's replicas by name, as Longhorn's volume
// controller passes them to its scheduler.
func replicaMap(plans []*replicaPlan) map[string]*lhv1.Replica {
	out := make(map[string]*lhv1.Replica, len(plans))
	for _, p := range plans {
		out[p.want.Name] = p.want
	}
	return out
}

// reuse marks the named failed replica to be rebuilt, as Longhorn's volume
// controller reuses one: no longer failed, not healthy until rebuilt.
func reuse(plans []*replicaPlan, name string) {
	for _, p := range plans {
		if p.want.Name == name {
			p.want.Spec.FailedAt, p.want.Spec.HealthyAt = "", ""
			p.reused = true
		}
	}
}

// reasons returns the reasons of a scheduler's errors as Longhorn's volume
// controller writes them into the Scheduled condition (JoinReasons: the
// reasons only, "to avoid spamming the condition with too lengthy
// messages"), and the errors in full, for logs and Events.
func reasons(errs multierr.MultiError) (short, full string) {
	if len(errs) == 0 {
		return "no disk candidate", "no disk candidate"
	}
	return errs.JoinReasons(), errs.Error()
}

// schedule places the unscheduled replicas that may be placed now with
// Longhorn's own ScheduleReplica, one after another in name order as
// Longhorn's volume controller does, each seeing the ones placed before it:
// best-effort and strict-local replicas wait for the volume to be attached;
// strict-local ones are pinned to its node.
func schedule(plan *volumePlan, in volumeInput) {
	v := in.volume
	rs := replicaMap(plan.replicas)
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
		placed, errs := in.scheduler.ScheduleReplica(r, rs, v)
		if placed == nil {
			if plan.failure == nil {
				reason := lhv1.VolumeConditionReasonReplicaSchedulingFailure
				if r.Spec.HardNodeAffinity != "" {
					reason = lhv1.VolumeConditionReasonLocalReplicaSchedulingFailure
				}
				short, full := reasons(errs)
				plan.failure = &scheduleFailure{reason: reason, message: short, detail: full}
			}
			continue
		}
		p.want, p.placed = placed, true
		rs[placed.Name] = placed
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
