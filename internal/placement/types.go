package placement

import (
	"strings"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/internal/settings"
)

// Machine-readable reasons a Result carries when not every replica was placed.
// They are the Volume condition reasons of the API, so callers can copy them
// into the volume's Scheduled condition.
const (
	// ReasonWaitingForAttachment means the volume has data locality
	// best-effort or strict-local and is not attached yet: no replica is
	// placed until spec.nodeID is set.
	ReasonWaitingForAttachment = "WaitingForAttachment"
	// ReasonReplicaSchedulingFailure means some replica found no disk; the
	// Result's Message and Failures say why each candidate failed.
	ReasonReplicaSchedulingFailure = "ReplicaSchedulingFailure"
)

// Node is one Longhorn node as the caller sees it. Pass every node, eligible
// or not: the zones of existing replicas are looked up here, and ineligible
// nodes are reported in the failure message. Node names must be unique.
type Node struct {
	// Name is the node's name (the Kubernetes node name).
	Name string
	// Zone is the node's status.zone. The empty zone is a zone like any
	// other: all unlabelled nodes share it, as in Longhorn.
	Zone string
	// Ready is the node's Ready condition.
	Ready bool
	// Schedulable is the node's Schedulable condition, already cordon-aware
	// (see NodeSchedulable). False is reported as "node is cordoned".
	Schedulable bool
	// AllowScheduling is the node's spec.allowScheduling.
	AllowScheduling bool
	// EvictionRequested is the node's spec.evictionRequested.
	EvictionRequested bool
	// Tags are the node's spec.tags.
	Tags []string
	// Disks are the node's disks; disk names must be unique on the node.
	Disks []Disk
}

// Disk is one disk of a node, with the ledger's view of its space.
type Disk struct {
	// Name is the disk's key in the node's spec.disks.
	Name string
	// UUID is status.diskStatus[name].diskUUID; it names the disk's ledger.
	// A disk without a UUID takes no replica.
	UUID string
	// Path is the disk's spec path.
	Path string
	// Type is the disk's spec diskType; empty means filesystem.
	Type lhv1.DiskType
	// FSType is status.diskStatus[name].fsType, the file system the disk
	// monitor found ("ext4", "xfs"; empty for block disks). It bounds the
	// size of a data engine v1 volume (see DiskFailuresForVolume).
	FSType string
	// AllowScheduling is the disk's spec allowScheduling.
	AllowScheduling bool
	// EvictionRequested is the disk's spec evictionRequested.
	EvictionRequested bool
	// Schedulable is the disk's Schedulable condition (False with DiskPressure).
	Schedulable bool
	// Tags are the disk's spec tags.
	Tags []string
	// StorageMaximum is the disk's size in bytes (disk monitor).
	StorageMaximum int64
	// StorageAvailable is the disk's actual free space in bytes (disk monitor).
	StorageAvailable int64
	// StorageReserved is the disk's spec storageReserved in bytes.
	StorageReserved int64
	// StorageLimit is the ledger's status.storageLimit: the most bytes the
	// ledger grants on this disk (see ledger.Limit for the formula).
	StorageLimit int64
	// StorageScheduled is the ledger's status.storageScheduled plus the
	// growth of every request still pending on the ledger (undecided spec
	// entries), so space already asked for is not offered again. The caller
	// computes this sum; Place adds only the replicas it places itself.
	StorageScheduled int64
}

// Replica is an existing replica of the volume.
type Replica struct {
	// NodeID is the node the replica is on; empty replicas are ignored.
	NodeID string
	// DiskUUID is the UUID of the disk the replica is on.
	DiskUUID string
	// Healthy is true when the replica is running or about to run (granted
	// or pending, not failed). Only healthy replicas satisfy best-effort
	// data locality. Every replica passed counts for anti-affinity, so leave
	// out replicas that can never be reused (FromLonghornReplica does).
	// As in Longhorn, a replica counts for node and zone anti-affinity only
	// on a node that may take replicas (Ready, Schedulable, allowScheduling,
	// and the pinned node when one is).
	Healthy bool
	// EvictionRequested is the replica's spec.evictionRequested: Longhorn
	// is moving it off its node or disk. It still counts for anti-affinity,
	// but a node whose replicas are all being evicted may take their
	// replacement where hard anti-affinity would refuse another node
	// (Longhorn #3076).
	EvictionRequested bool
	// DiskOnly is true when the replica counts for disk anti-affinity only,
	// not for node and zone anti-affinity: Longhorn's scheduler counts so a
	// replica being deleted, and a failed replica once the volume is being
	// replenished (see FromLonghornReplica).
	DiskOnly bool
}

// Request is everything Place needs to place new replicas of one volume.
type Request struct {
	// Volume is the volume. Place reads its name, spec.size,
	// spec.dataEngine, spec.dataLocality, spec.nodeID, spec.nodeSelector,
	// spec.diskSelector and the three anti-affinity overrides. Required.
	Volume *lhv1.Volume
	// Size is the bytes each new replica requests; 0 means spec.size.
	Size int64
	// ActualSize is the bytes of data a new replica holds once rebuilt
	// (Longhorn's volume status.actualSize; 0 for a new volume). It is
	// subtracted from storageAvailable in the actual-space check.
	ActualSize int64
	// Count is how many new replicas to place.
	Count int
	// Existing are the volume's current replicas.
	Existing []Replica
	// HardNodeAffinity, when set, pins the new replicas to this node.
	HardNodeAffinity string
	// Nodes are the candidate nodes.
	Nodes []Node
	// Settings are the scheduling settings in effect.
	Settings settings.Scheduling
}

// Choice is where one new replica goes.
type Choice struct {
	// NodeID is the chosen node's name.
	NodeID string
	// DiskName is the chosen disk's name on the node.
	DiskName string
	// DiskUUID is the chosen disk's UUID (the replica's spec.diskID).
	DiskUUID string
	// DiskPath is the chosen disk's path (the replica's spec.diskPath).
	DiskPath string
}

// Failure says why one node, or one disk of a node, could not take the
// next replica.
type Failure struct {
	// Node is the node's name.
	Node string
	// Disk is the disk's name; empty when the whole node failed.
	Disk string
	// Reasons say why, in numbers where space is concerned.
	Reasons []string
}

// String returns "node: reason", or "node/disk: reason", with several
// reasons joined by " and ".
func (f Failure) String() string {
	who := f.Node
	if f.Disk != "" {
		who += "/" + f.Disk
	}
	return who + ": " + strings.Join(f.Reasons, " and ")
}

// Verdict is Eligibility's answer: which disks may take the next new
// replica of a volume, and why every other node and disk may not.
type Verdict struct {
	// Candidates are the disks that may take the next replica, sorted by
	// node and disk name: the disks of the first anti-affinity stage that
	// has any, after disk anti-affinity. Empty when Reason is set.
	Candidates []Choice
	// Reason is empty when there are candidates; otherwise
	// ReasonWaitingForAttachment or ReasonReplicaSchedulingFailure.
	Reason string
	// Message says, for people, why there is no candidate; empty otherwise.
	Message string
	// Failures say why each node or disk that is not a candidate is not,
	// sorted by node and disk. A disk that only lost to a preferred
	// anti-affinity stage or to a disk without a replica says so.
	Failures []Failure
}

// Result is what Place decided.
type Result struct {
	// Choices are the placements, in the order they were made. Fewer than
	// Request.Count when Reason is set.
	Choices []Choice
	// Reason is empty when every requested replica was placed; otherwise
	// ReasonWaitingForAttachment or ReasonReplicaSchedulingFailure.
	Reason string
	// Message says, for people, why not every replica was placed.
	Message string
	// Failures list why each candidate failed for the first replica that
	// could not be placed, sorted by node and disk.
	Failures []Failure
}
