package v1beta2

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DataLocality says whether a volume keeps a replica on the node it is attached to.
// +kubebuilder:validation:Enum=disabled;best-effort;strict-local
type DataLocality string

const (
	// DataLocalityDisabled places replicas by the normal policy only.
	DataLocalityDisabled DataLocality = "disabled"
	// DataLocalityBestEffort tries to keep one replica on the attached node.
	DataLocalityBestEffort DataLocality = "best-effort"
	// DataLocalityStrictLocal keeps the only replica on the attached node.
	DataLocalityStrictLocal DataLocality = "strict-local"
)

// AntiAffinityMode overrides a replica anti-affinity setting for one volume.
// +kubebuilder:validation:Enum=ignored;enabled;disabled
type AntiAffinityMode string

const (
	// AntiAffinityIgnored uses the cluster setting.
	AntiAffinityIgnored AntiAffinityMode = "ignored"
	// AntiAffinityEnabled makes the anti-affinity soft for this volume.
	AntiAffinityEnabled AntiAffinityMode = "enabled"
	// AntiAffinityDisabled makes the anti-affinity hard for this volume.
	AntiAffinityDisabled AntiAffinityMode = "disabled"
)

// Volume condition types and reasons.
const (
	// VolumeConditionScheduled is True when every replica has a disk.
	VolumeConditionScheduled = "Scheduled"
	// VolumeConditionDiskAllocation is True when every replica's ledger
	// request is granted at the volume's size.
	VolumeConditionDiskAllocation = "DiskAllocation"
	// VolumeConditionExpanding is True while an expansion waits for the ledgers.
	VolumeConditionExpanding = "Expanding"

	// VolumeReasonReplicaSchedulingFailure means some replica found no disk;
	// the message says why each candidate failed.
	VolumeReasonReplicaSchedulingFailure = "ReplicaSchedulingFailure"
	// VolumeReasonWaitingForAttachment means replicas of a best-effort or
	// strict-local volume wait until the volume is attached.
	VolumeReasonWaitingForAttachment = "WaitingForAttachment"
	// VolumeReasonReplicasScheduled means every replica has a disk.
	VolumeReasonReplicasScheduled = "ReplicasScheduled"
	// VolumeReasonAllocationPending means some replica's request is not decided yet.
	VolumeReasonAllocationPending = "AllocationPending"
	// VolumeReasonAllocationRejected means some replica's request was rejected.
	VolumeReasonAllocationRejected = "AllocationRejected"
	// VolumeReasonAllocated means every replica's request is granted.
	VolumeReasonAllocated = "Allocated"
	// VolumeReasonExpansionPending means the expansion waits for the ledgers.
	VolumeReasonExpansionPending = "ExpansionPending"
	// VolumeReasonExpansionFailed means a disk rejected the expansion; the
	// volume keeps its previous size.
	VolumeReasonExpansionFailed = "ExpansionFailed"
	// VolumeReasonExpansionComplete means the volume has its requested size.
	VolumeReasonExpansionComplete = "ExpansionComplete"
)

// VolumeSpec is the desired state of a Longhorn volume.
// +kubebuilder:validation:XValidation:rule="isQuantity(string(self.size)) && quantity(string(self.size)).isGreaterThan(quantity('0'))",message="size must be a quantity greater than 0",fieldPath=".size"
// +kubebuilder:validation:XValidation:rule="!has(self.dataLocality) || self.dataLocality != 'strict-local' || !has(self.numberOfReplicas) || self.numberOfReplicas == 1",message="a strict-local volume has exactly 1 replica"
type VolumeSpec struct {
	// size is the volume's size, as a quantity ("100Gi") or a byte count.
	// +required
	Size resource.Quantity `json:"size"`
	// numberOfReplicas is how many replicas the volume keeps.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	NumberOfReplicas int `json:"numberOfReplicas,omitempty"`
	// dataLocality is disabled, best-effort or strict-local.
	// +optional
	// +kubebuilder:default=disabled
	DataLocality DataLocality `json:"dataLocality,omitempty"`
	// nodeID is the node the volume is attached to; set by the attacher.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeID string `json:"nodeID,omitempty"`
	// nodeSelector lists node tags a replica's node must all have.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	NodeSelector []string `json:"nodeSelector,omitempty"`
	// diskSelector lists disk tags a replica's disk must all have.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	DiskSelector []string `json:"diskSelector,omitempty"`
	// backingImage is the name of the BackingImage the volume is built on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	BackingImage string `json:"backingImage,omitempty"`
	// replicaSoftAntiAffinity overrides replica-soft-anti-affinity (node level)
	// for this volume: ignored uses the setting, enabled is soft, disabled is hard.
	// +optional
	// +kubebuilder:default=ignored
	ReplicaSoftAntiAffinity AntiAffinityMode `json:"replicaSoftAntiAffinity,omitempty"`
	// replicaZoneSoftAntiAffinity overrides replica-zone-soft-anti-affinity for this volume.
	// +optional
	// +kubebuilder:default=ignored
	ReplicaZoneSoftAntiAffinity AntiAffinityMode `json:"replicaZoneSoftAntiAffinity,omitempty"`
	// replicaDiskSoftAntiAffinity overrides replica-disk-soft-anti-affinity for this volume.
	// +optional
	// +kubebuilder:default=ignored
	ReplicaDiskSoftAntiAffinity AntiAffinityMode `json:"replicaDiskSoftAntiAffinity,omitempty"`
}

// VolumeStatus is the observed state of a Longhorn volume.
type VolumeStatus struct {
	// currentSize is the size in effect; an expansion is done when it equals spec.size.
	// +optional
	CurrentSize resource.Quantity `json:"currentSize,omitempty"`
	// currentNodeID is the node the volume is attached to, as last observed.
	// +optional
	CurrentNodeID string `json:"currentNodeID,omitempty"`
	// conditions are Scheduled, DiskAllocation and Expanding.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Volume is a Longhorn volume: a block device replicated on several disks.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhv
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.spec.size`,description="Requested size"
// +kubebuilder:printcolumn:name="CurrentSize",type=string,JSONPath=`.status.currentSize`,description="Size in effect"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.numberOfReplicas`
// +kubebuilder:printcolumn:name="Locality",type=string,JSONPath=`.spec.dataLocality`,priority=1
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeID`,description="The node it is attached to"
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`
// +kubebuilder:printcolumn:name="Allocated",type=string,JSONPath=`.status.conditions[?(@.type=="DiskAllocation")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Volume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the volume.
	// +required
	Spec VolumeSpec `json:"spec"`
	// status is the observed state of the volume.
	// +optional
	Status VolumeStatus `json:"status,omitempty"`
}

// VolumeList is a list of Volumes.
// +kubebuilder:object:root=true
type VolumeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Volumes.
	Items []Volume `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Volume{}, &VolumeList{})
}
