package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackingImageFileState is the state of a backing-image copy on one disk.
// +kubebuilder:validation:Enum=pending;ready;failed
type BackingImageFileState string

const (
	// BackingImageFilePending means the copy waits for its ledger decision or its data.
	BackingImageFilePending BackingImageFileState = "pending"
	// BackingImageFileReady means the copy is on the disk.
	BackingImageFileReady BackingImageFileState = "ready"
	// BackingImageFileFailed means the copy could not be placed on the disk.
	BackingImageFileFailed BackingImageFileState = "failed"
)

// BackingImageDiskFileSpec asks for a copy of the image on one disk.
type BackingImageDiskFileSpec struct {
	// evictionRequested asks for the copy to be removed from the disk.
	// +optional
	EvictionRequested bool `json:"evictionRequested,omitempty"`
}

// BackingImageDiskFileStatus is what is known of a copy on one disk.
type BackingImageDiskFileStatus struct {
	// state is pending, ready or failed.
	// +optional
	State BackingImageFileState `json:"state,omitempty"`
	// message says why the copy is not ready, with the numbers.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// BackingImageSpec is the desired state of a backing image.
type BackingImageSpec struct {
	// minNumberOfCopies is how many disks keep a copy of the image.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	MinNumberOfCopies int `json:"minNumberOfCopies,omitempty"`
	// nodeSelector lists node tags a copy's node must all have.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	NodeSelector []string `json:"nodeSelector,omitempty"`
	// diskSelector lists disk tags a copy's disk must all have.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	DiskSelector []string `json:"diskSelector,omitempty"`
	// diskFileSpecMap maps a disk UUID to the copy wanted on it.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	DiskFileSpecMap map[string]BackingImageDiskFileSpec `json:"diskFileSpecMap,omitempty"`
	// sourceType says where the image's data comes from (download, upload, ...).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	SourceType string `json:"sourceType,omitempty"`
	// sourceParameters are the parameters of the source.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	SourceParameters map[string]string `json:"sourceParameters,omitempty"`
}

// BackingImageStatus is the observed state of a backing image.
type BackingImageStatus struct {
	// size is the image's size in bytes, known once the source is read.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Size int64 `json:"size,omitempty"`
	// diskFileStatusMap maps a disk UUID to what is known of the copy on it.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	DiskFileStatusMap map[string]BackingImageDiskFileStatus `json:"diskFileStatusMap,omitempty"`
	// conditions report whether enough copies are placed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BackingImage condition types and reasons.
const (
	// BackingImageConditionCopiesScheduled is True when minNumberOfCopies
	// copies are granted by their disks' ledgers.
	BackingImageConditionCopiesScheduled = "CopiesScheduled"
	// BackingImageReasonSizeUnknown means the image's size is not known yet.
	BackingImageReasonSizeUnknown = "SizeUnknown"
	// BackingImageReasonInsufficientDisks means too few disks can take a copy.
	BackingImageReasonInsufficientDisks = "InsufficientDisks"
	// BackingImageReasonCopiesPending means every missing copy is placed and
	// waits for its ledger's decision.
	BackingImageReasonCopiesPending = "CopiesPending"
	// BackingImageReasonCopiesScheduled means enough copies are granted.
	BackingImageReasonCopiesScheduled = "CopiesScheduled"
)

// BackingImage is a read-only image that volumes are built on; its copies
// live on node disks.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhbi
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`
// +kubebuilder:printcolumn:name="MinCopies",type=integer,JSONPath=`.spec.minNumberOfCopies`
// +kubebuilder:printcolumn:name="CopiesScheduled",type=string,JSONPath=`.status.conditions[?(@.type=="CopiesScheduled")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BackingImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the backing image.
	// +optional
	Spec BackingImageSpec `json:"spec,omitempty"`
	// status is the observed state of the backing image.
	// +optional
	Status BackingImageStatus `json:"status,omitempty"`
}

// BackingImageList is a list of BackingImages.
// +kubebuilder:object:root=true
type BackingImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the BackingImages.
	Items []BackingImage `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BackingImage{}, &BackingImageList{})
}
