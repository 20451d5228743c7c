package v1beta2

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxSize is the largest size, in bytes, any size field of a DiskSchedule
// holds: 2^62 bytes (4 EiB), far above any disk Longhorn can hold. A sum of
// sizes is computed with saturation all the same (ledger.AddSat), since
// maps hold thousands of entries. The kubebuilder markers below spell it
// out as 4611686018427387904, as markers take literals.
const MaxSize = 1 << 62

// MaxKeyLength is the longest key any map of a DiskSchedule holds: the
// keys are the names of Kubernetes objects (Longhorn's Replicas,
// BackingImages and Volumes), which are at most 253 characters. The CEL
// rules below spell it out as 253.
const MaxKeyLength = 253

// RequestedBytes is a number of bytes asked of a disk's ledger. A requirement
// of zero is expressed by deleting the key, so stored values are positive,
// and at most MaxSize.
// +kubebuilder:validation:Minimum=1
// +kubebuilder:validation:Maximum=4611686018427387904
type RequestedBytes int64

// RequestState is the ledger's decision on one request.
// +kubebuilder:validation:Enum=scheduled;rejected
type RequestState string

const (
	// RequestStateScheduled means the request's size is granted on the disk.
	RequestStateScheduled RequestState = "scheduled"
	// RequestStateRejected means the request did not fit or the disk refuses
	// new requests; a rejected expansion keeps its previous scheduled size.
	RequestStateRejected RequestState = "rejected"
)

// ReservationState is the ledger's decision on one reservation.
// +kubebuilder:validation:Enum=scheduled;rejected;expired;fulfilled
type ReservationState string

const (
	// ReservationStateScheduled means the reservation's size is held on the disk.
	ReservationStateScheduled ReservationState = "scheduled"
	// ReservationStateRejected means the reservation did not fit.
	ReservationStateRejected ReservationState = "rejected"
	// ReservationStateExpired means the reservation ended without a replica
	// taking it over: its pod was not bound before expiresAt, or was deleted
	// or bound to another node; its space is free again.
	ReservationStateExpired ReservationState = "expired"
	// ReservationStateFulfilled means a replica request took the reservation's
	// space over (handoff), or a replica of its volume is persisted on the
	// disk's node; the reservation itself holds nothing any more.
	ReservationStateFulfilled ReservationState = "fulfilled"
)

// DiskSchedule condition types and reasons.
const (
	// DiskScheduleConditionReady is True when the disk is known, its node is
	// up and scheduling on it is allowed, so new requests can be granted.
	DiskScheduleConditionReady = "Ready"
	// DiskScheduleConditionOvercommitted is True when adopted allocations
	// exceed the disk's limit; new growth is rejected until usage falls below it.
	DiskScheduleConditionOvercommitted = "Overcommitted"

	// DiskScheduleReasonSchedulable means the disk accepts new requests.
	DiskScheduleReasonSchedulable = "Schedulable"
	// DiskScheduleReasonDiskNotFound means the Node or its disk is gone.
	DiskScheduleReasonDiskNotFound = "DiskNotFound"
	// DiskScheduleReasonNodeNotReady means the disk's node is not Ready.
	DiskScheduleReasonNodeNotReady = "NodeNotReady"
	// DiskScheduleReasonNodeUnschedulable means the node is cordoned or
	// otherwise not schedulable.
	DiskScheduleReasonNodeUnschedulable = "NodeUnschedulable"
	// DiskScheduleReasonNodeSchedulingDisabled means the node's allowScheduling is false.
	DiskScheduleReasonNodeSchedulingDisabled = "NodeSchedulingDisabled"
	// DiskScheduleReasonNodeEvictionRequested means eviction was requested for the node.
	DiskScheduleReasonNodeEvictionRequested = "NodeEvictionRequested"
	// DiskScheduleReasonDiskSchedulingDisabled means the disk's allowScheduling is false.
	DiskScheduleReasonDiskSchedulingDisabled = "DiskSchedulingDisabled"
	// DiskScheduleReasonDiskEvictionRequested means eviction was requested for the disk.
	DiskScheduleReasonDiskEvictionRequested = "DiskEvictionRequested"
	// DiskScheduleReasonDiskNotReady means the disk monitor does not report the disk Ready.
	DiskScheduleReasonDiskNotReady = "DiskNotReady"
	// DiskScheduleReasonWithinLimit means scheduled storage is within the limit.
	DiskScheduleReasonWithinLimit = "WithinLimit"
	// DiskScheduleReasonAdoptedOverLimit means adopted allocations exceed the limit.
	DiskScheduleReasonAdoptedOverLimit = "AdoptedOverLimit"
)

// DiskScheduleReservation is a space held on a disk by the scheduler extender
// for a pod placed on the disk's node before the volume's replica exists.
type DiskScheduleReservation struct {
	// size is the number of bytes held for the volume, at most MaxSize.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4611686018427387904
	Size int64 `json:"size"`
	// pod is the namespace/name of the pod the reservation was made for. Once
	// that pod is bound to the disk's node the ledger holds the reservation
	// until a replica takes it over; deleted or bound to another node, the
	// pod releases it (DESIGN rule 6).
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Pod string `json:"pod,omitempty"`
	// replica is the name of the replica request that takes the reservation
	// over (handoff). Empty until the volume controller hands it to a replica.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica,omitempty"`
}

// MaxReplicaEntries bounds the replica entries of one DiskSchedule (the
// maxProperties of spec.replicas, spec.replicaVersions and status.replicas):
// 4096 entries, at about 260 bytes each as stored (request, version and
// decision; docs/benchmarks.md), keep a ledger near 1 MiB, under etcd's
// default request limit of 1.5 MiB with room for the reservations and
// backing images. The admission gate denies a placement past it, naming it.
const MaxReplicaEntries = 4096

// DiskScheduleSpec holds the requests written to one disk's ledger.
//
// Its maps, and those of the status, are atomic for field ownership
// (x-kubernetes-map-type: atomic): every writer merge-patches single keys,
// and no writer uses per-key ownership, so metadata.managedFields records
// each map as one field instead of one entry per key.
type DiskScheduleSpec struct {
	// name is the disk's name in the Node's spec.disks.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="name is immutable"
	Name string `json:"name"`
	// nodeID is the name of the node that holds the disk.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="nodeID is immutable"
	NodeID string `json:"nodeID"`
	// replicas maps a replica name to the bytes it requests on this disk.
	// +optional
	// +kubebuilder:validation:MaxProperties=4096
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253)",message="keys must be at most 253 characters long: they are Kubernetes object names"
	// +mapType=atomic
	Replicas map[string]RequestedBytes `json:"replicas,omitempty"`
	// backingImages maps a backing-image name to the bytes its copy on this
	// disk requests (the image's size); one entry per image per disk.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253)",message="keys must be at most 253 characters long: they are Kubernetes object names"
	// +mapType=atomic
	BackingImages map[string]RequestedBytes `json:"backingImages,omitempty"`
	// reservations maps a volume name to space held for a pod that was placed
	// on this disk's node before the volume's replica exists there.
	// +optional
	// +kubebuilder:validation:MaxProperties=1024
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253)",message="keys must be at most 253 characters long: they are Kubernetes object names"
	// +mapType=atomic
	Reservations map[string]DiskScheduleReservation `json:"reservations,omitempty"`
	// replicaVersions maps a replica request to the resourceVersion of the
	// Replica that the write placing it on this disk was admitted at: the
	// gate writes it with the request, and moves it when it admits a retry
	// of that write. Once the Replica's resourceVersion has moved past it
	// without this disk, that write lost, and the mirror releases the
	// request at once instead of after the grace period. Removed with the
	// request.
	// +optional
	// +kubebuilder:validation:MaxProperties=4096
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253)",message="keys must be at most 253 characters long: they are Kubernetes object names"
	// +mapType=atomic
	ReplicaVersions map[string]string `json:"replicaVersions,omitempty"`
}

// RequestStatus is the ledger's decision on one replica or backing-image request.
type RequestStatus struct {
	// state is the decision: scheduled or rejected.
	// +required
	State RequestState `json:"state"`
	// requestedSize is the requested size this decision was made for. A spec
	// size that differs from it is a new request, decided again.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4611686018427387904
	RequestedSize int64 `json:"requestedSize"`
	// scheduledSize is the number of bytes granted: the request's size when
	// scheduled, 0 for a rejected new request, the previous size for a
	// rejected expansion.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4611686018427387904
	ScheduledSize int64 `json:"scheduledSize"`
	// message says why the request was rejected, with the numbers.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ReservationStatus is the ledger's decision on one reservation.
type ReservationStatus struct {
	// state is the decision: scheduled, rejected, expired or fulfilled.
	// +required
	State ReservationState `json:"state"`
	// requestedSize is the reservation size this decision was made for.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4611686018427387904
	RequestedSize int64 `json:"requestedSize"`
	// pod is the pod the decision was made for; a reservation written again
	// for another pod is a new reservation, decided again.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Pod string `json:"pod,omitempty"`
	// replica is the replica request that took the reservation over, once fulfilled.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica,omitempty"`
	// scheduledSize is the number of bytes the reservation holds: its size
	// while scheduled, 0 once rejected, expired or fulfilled.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4611686018427387904
	ScheduledSize int64 `json:"scheduledSize"`
	// message says why the reservation was rejected or what became of it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// expiresAt is when a scheduled reservation whose pod is not bound yet
	// expires and frees its space, unless a replica takes it over first.
	// It is absent once the pod is bound to the disk's node: the ledger then
	// holds the reservation, with no expiry, until a replica of its volume
	// takes it over or is persisted on that node, or the pod is deleted or
	// bound to another node (DESIGN rule 6). It is absent too once the
	// reservation no longer holds space.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// DiskScheduleStatus holds the ledger's decisions, written only by the
// DiskSchedule controller.
type DiskScheduleStatus struct {
	// observedGeneration is the spec generation these decisions were made on.
	// A writer knows its request was decided when observedGeneration is at
	// least the generation its write produced.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// storageScheduled is the sum of scheduledSize over every entry,
	// saturated at 2^63-1. Each entry is at most MaxSize, but adopted
	// entries (DESIGN rule 7) may add up past it, so its only bound is the
	// int64 range.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StorageScheduled int64 `json:"storageScheduled,omitempty"`
	// storageLimit is the limit the decisions were checked against:
	// (storageMaximum - storageReserved) * storage-over-provisioning-percentage / 100,
	// computed in 128 bits and saturated at 2^63-1. It comes from Longhorn's
	// Node and Setting, which do not bound it, so its only bound is the
	// int64 range.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StorageLimit int64 `json:"storageLimit,omitempty"`
	// scheduled is storageScheduled for people, e.g. "300Gi".
	// +optional
	Scheduled *resource.Quantity `json:"scheduled,omitempty"`
	// limit is storageLimit for people, e.g. "400Gi".
	// +optional
	Limit *resource.Quantity `json:"limit,omitempty"`
	// replicas holds the decision on each replica request.
	// +optional
	// +kubebuilder:validation:MaxProperties=4096
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253)",message="keys must be at most 253 characters long: they are Kubernetes object names"
	// +mapType=atomic
	Replicas map[string]RequestStatus `json:"replicas,omitempty"`
	// backingImages holds the decision on each backing-image request.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253)",message="keys must be at most 253 characters long: they are Kubernetes object names"
	// +mapType=atomic
	BackingImages map[string]RequestStatus `json:"backingImages,omitempty"`
	// reservations holds the decision on each reservation.
	// +optional
	// +kubebuilder:validation:MaxProperties=1024
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253)",message="keys must be at most 253 characters long: they are Kubernetes object names"
	// +mapType=atomic
	Reservations map[string]ReservationStatus `json:"reservations,omitempty"`
	// conditions are Ready (the disk accepts new requests) and Overcommitted
	// (adopted allocations exceed the limit).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DiskSchedule is the capacity ledger of one disk: requesters write what they
// want into spec, and the DiskSchedule controller alone decides in status.
// Its name is the disk's UUID.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhds
// +kubebuilder:metadata:labels="app.kubernetes.io/name=diskschedule"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeID`,description="The node that holds the disk"
// +kubebuilder:printcolumn:name="Disk",type=string,JSONPath=`.spec.name`,description="The disk's name on the node"
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.scheduled`,description="Granted, for people"
// +kubebuilder:printcolumn:name="Limit",type=string,JSONPath=`.status.limit`,description="What may be granted, for people"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether new requests can be granted"
// +kubebuilder:printcolumn:name="Overcommitted",type=string,JSONPath=`.status.conditions[?(@.type=="Overcommitted")].status`,description="Whether adopted allocations exceed the limit"
// +kubebuilder:printcolumn:name="Scheduled-Bytes",type=integer,JSONPath=`.status.storageScheduled`,priority=1,description="Bytes granted"
// +kubebuilder:printcolumn:name="Limit-Bytes",type=integer,JSONPath=`.status.storageLimit`,priority=1,description="Bytes that may be granted"
// +kubebuilder:printcolumn:name="Generation",type=integer,JSONPath=`.metadata.generation`,priority=1,description="Spec generation; requests are pending while it is above Decided"
// +kubebuilder:printcolumn:name="Decided",type=integer,JSONPath=`.status.observedGeneration`,priority=1,description="Spec generation the decisions were made on"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DiskSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the requests written to the ledger.
	// +required
	Spec DiskScheduleSpec `json:"spec"`
	// status holds the ledger's decisions.
	// +optional
	Status DiskScheduleStatus `json:"status,omitempty"`
}

// DiskScheduleList is a list of DiskSchedules.
// +kubebuilder:object:root=true
type DiskScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the DiskSchedules.
	Items []DiskSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DiskSchedule{}, &DiskScheduleList{})
}
