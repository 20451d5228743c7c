package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplicaFinalizer keeps a Replica until its ledger request is released.
const ReplicaFinalizer = "longhorn.io"

// ReplicaState is the lifecycle state of a replica.
// +kubebuilder:validation:Enum=pending;running;stopped;error
type ReplicaState string

const (
	// ReplicaStatePending means the replica waits for its disk allocation.
	ReplicaStatePending ReplicaState = "pending"
	// ReplicaStateRunning means the replica serves data.
	ReplicaStateRunning ReplicaState = "running"
	// ReplicaStateStopped means the replica is stopped.
	ReplicaStateStopped ReplicaState = "stopped"
	// ReplicaStateError means the replica failed.
	ReplicaStateError ReplicaState = "error"
)

// Replica condition types and reasons.
const (
	// ReplicaConditionDiskAllocated is True when the replica's ledger entry is
	// scheduled at exactly spec.volumeSize, so the replica may start.
	ReplicaConditionDiskAllocated = "DiskAllocated"

	// ReplicaReasonUnplaced means the replica has no disk yet.
	ReplicaReasonUnplaced = "Unplaced"
	// ReplicaReasonPending means the ledger has not decided the request yet.
	ReplicaReasonPending = "Pending"
	// ReplicaReasonGranted means the ledger granted the request.
	ReplicaReasonGranted = "Granted"
	// ReplicaReasonRejected means the ledger rejected the request.
	ReplicaReasonRejected = "Rejected"
)

// ReplicaSpec is the desired state of one replica of a volume.
type ReplicaSpec struct {
	// volumeName is the volume this replica belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	VolumeName string `json:"volumeName"`
	// volumeSize is the number of bytes the replica needs on its disk.
	// +required
	// +kubebuilder:validation:Minimum=1
	VolumeSize int64 `json:"volumeSize"`
	// nodeID is the node the replica is placed on; empty until placed.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeID string `json:"nodeID,omitempty"`
	// diskID is the UUID of the disk the replica is placed on; empty until placed.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	DiskID string `json:"diskID,omitempty"`
	// diskPath is the path of the disk the replica is placed on.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	DiskPath string `json:"diskPath,omitempty"`
	// dataDirectoryName is the replica's directory on its disk.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	DataDirectoryName string `json:"dataDirectoryName,omitempty"`
	// hardNodeAffinity pins the replica to this node.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	HardNodeAffinity string `json:"hardNodeAffinity,omitempty"`
	// backingImage is the backing image the replica's data is built on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	BackingImage string `json:"backingImage,omitempty"`
}

// ReplicaStatus is the observed state of a replica.
type ReplicaStatus struct {
	// currentState is pending, running, stopped or error.
	// +optional
	CurrentState ReplicaState `json:"currentState,omitempty"`
	// conditions has DiskAllocated: whether the ledger granted the replica's
	// request at exactly spec.volumeSize, so it may start.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Replica is one copy of a volume's data on one disk.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhr
// +kubebuilder:printcolumn:name="Volume",type=string,JSONPath=`.spec.volumeName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeID`
// +kubebuilder:printcolumn:name="Disk",type=string,JSONPath=`.spec.diskID`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.currentState`
// +kubebuilder:printcolumn:name="Allocated",type=string,JSONPath=`.status.conditions[?(@.type=="DiskAllocated")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Replica struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the replica.
	// +required
	Spec ReplicaSpec `json:"spec"`
	// status is the observed state of the replica.
	// +optional
	Status ReplicaStatus `json:"status,omitempty"`
}

// ReplicaList is a list of Replicas.
// +kubebuilder:object:root=true
type ReplicaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Replicas.
	Items []Replica `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Replica{}, &ReplicaList{})
}
