package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DiskType is the kind of storage a disk is.
// +kubebuilder:validation:Enum=filesystem;block
type DiskType string

const (
	// DiskTypeFilesystem is a disk mounted as a filesystem.
	DiskTypeFilesystem DiskType = "filesystem"
	// DiskTypeBlock is a raw block device.
	DiskTypeBlock DiskType = "block"
)

// Node and disk condition types and reasons.
const (
	// NodeConditionReady is True when the Kubernetes node is Ready.
	NodeConditionReady = "Ready"
	// NodeConditionSchedulable is True when replicas may be placed on the node.
	NodeConditionSchedulable = "Schedulable"

	// NodeReasonKubernetesNodeReady means the Kubernetes node is Ready.
	NodeReasonKubernetesNodeReady = "KubernetesNodeReady"
	// NodeReasonKubernetesNodeNotReady means the Kubernetes node is not Ready.
	NodeReasonKubernetesNodeNotReady = "KubernetesNodeNotReady"
	// NodeReasonKubernetesNodeGone means no Kubernetes node has this name.
	NodeReasonKubernetesNodeGone = "KubernetesNodeGone"
	// NodeReasonKubernetesNodeCordoned means the Kubernetes node is cordoned
	// and disable-scheduling-on-cordoned-node is true.
	NodeReasonKubernetesNodeCordoned = "KubernetesNodeCordoned"
	// NodeReasonSchedulable means replicas may be placed on the node.
	NodeReasonSchedulable = "Schedulable"

	// DiskConditionReady is True when the disk monitor found the disk.
	DiskConditionReady = "Ready"
	// DiskConditionSchedulable is True when the disk passes the actual-space check.
	DiskConditionSchedulable = "Schedulable"

	// DiskReasonReady means the disk monitor found and measured the disk.
	DiskReasonReady = "Ready"
	// DiskReasonNoDiskInfo means the disk monitor could not read the disk.
	DiskReasonNoDiskInfo = "NoDiskInfo"
	// DiskReasonSchedulable means the disk has enough actual free space.
	DiskReasonSchedulable = "Schedulable"
	// DiskReasonDiskPressure means the disk's actual free space is at or
	// below storage-minimal-available-percentage of its maximum.
	DiskReasonDiskPressure = "DiskPressure"
	// DiskReasonDiskNotReady means the disk is not Ready.
	DiskReasonDiskNotReady = "DiskNotReady"
)

// DiskSpec describes one disk of a node, as the operator configures it.
type DiskSpec struct {
	// path is where the disk is mounted (filesystem) or its device (block).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path"`
	// diskType is filesystem or block.
	// +optional
	// +kubebuilder:default=filesystem
	DiskType DiskType `json:"diskType,omitempty"`
	// allowScheduling lets new replicas and backing-image copies be placed on the disk.
	// +optional
	AllowScheduling bool `json:"allowScheduling,omitempty"`
	// evictionRequested asks for every replica on the disk to move elsewhere;
	// no new request is granted on the disk meanwhile.
	// +optional
	EvictionRequested bool `json:"evictionRequested,omitempty"`
	// storageReserved is the number of bytes kept free for other uses.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StorageReserved int64 `json:"storageReserved,omitempty"`
	// tags are the disk's tags, matched against volume disk selectors.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Tags []string `json:"tags,omitempty"`
}

// NodeSpec is the operator's configuration of a Longhorn node.
type NodeSpec struct {
	// allowScheduling lets new replicas be placed on the node.
	// +optional
	AllowScheduling bool `json:"allowScheduling,omitempty"`
	// evictionRequested asks for every replica on the node to move elsewhere.
	// +optional
	EvictionRequested bool `json:"evictionRequested,omitempty"`
	// tags are the node's tags, matched against volume node selectors.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Tags []string `json:"tags,omitempty"`
	// disks maps a disk name to its configuration.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Disks map[string]DiskSpec `json:"disks,omitempty"`
}

// DiskStatus is what is known of one disk of a node.
type DiskStatus struct {
	// diskUUID identifies the disk; it is kept in a file on the disk and names
	// the disk's DiskSchedule. Written by the disk monitor.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	DiskUUID string `json:"diskUUID,omitempty"`
	// diskType is the type the disk monitor found.
	// +optional
	DiskType DiskType `json:"diskType,omitempty"`
	// storageMaximum is the disk's size in bytes. Written by the disk monitor.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StorageMaximum int64 `json:"storageMaximum,omitempty"`
	// storageAvailable is the disk's actual free space in bytes. Written by the disk monitor.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StorageAvailable int64 `json:"storageAvailable,omitempty"`
	// storageScheduled mirrors the ledger's storageScheduled, for Longhorn compatibility.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StorageScheduled int64 `json:"storageScheduled,omitempty"`
	// scheduledReplica mirrors the ledger's granted replicas (name to bytes).
	// +optional
	ScheduledReplica map[string]int64 `json:"scheduledReplica,omitempty"`
	// scheduledBackingImage mirrors the ledger's granted backing images (name to bytes).
	// +optional
	ScheduledBackingImage map[string]int64 `json:"scheduledBackingImage,omitempty"`
	// conditions are Ready (written by the disk monitor) and Schedulable
	// (written by the node controller; False with DiskPressure when the
	// actual-space check fails).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeStatus is what is known of a Longhorn node.
type NodeStatus struct {
	// zone is the Kubernetes node's topology.kubernetes.io/zone label.
	// +optional
	Zone string `json:"zone,omitempty"`
	// region is the Kubernetes node's topology.kubernetes.io/region label.
	// +optional
	Region string `json:"region,omitempty"`
	// conditions are Ready and Schedulable (False with KubernetesNodeCordoned
	// when the node is cordoned and disable-scheduling-on-cordoned-node is true).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// diskStatus maps a disk name to what is known of it.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	DiskStatus map[string]*DiskStatus `json:"diskStatus,omitempty"`
}

// Node is a Longhorn node: the disks of one Kubernetes node and whether
// replicas may be placed on them. Its name is the Kubernetes node's name.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhn
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the Kubernetes node is Ready"
// +kubebuilder:printcolumn:name="AllowScheduling",type=boolean,JSONPath=`.spec.allowScheduling`,description="Whether scheduling is allowed by the operator"
// +kubebuilder:printcolumn:name="Schedulable",type=string,JSONPath=`.status.conditions[?(@.type=="Schedulable")].status`,description="Whether replicas may be placed"
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=`.status.zone`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Node struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the operator's configuration of the node.
	// +optional
	Spec NodeSpec `json:"spec,omitempty"`
	// status is what is known of the node.
	// +optional
	Status NodeStatus `json:"status,omitempty"`
}

// NodeList is a list of Nodes.
// +kubebuilder:object:root=true
type NodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Nodes.
	Items []Node `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Node{}, &NodeList{})
}
