package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names of the scheduling settings. A Setting object's name is one of these.
const (
	SettingStorageOverProvisioningPercentage       = "storage-over-provisioning-percentage"
	SettingStorageMinimalAvailablePercentage       = "storage-minimal-available-percentage"
	SettingReplicaSoftAntiAffinity                 = "replica-soft-anti-affinity"
	SettingReplicaZoneSoftAntiAffinity             = "replica-zone-soft-anti-affinity"
	SettingReplicaDiskSoftAntiAffinity             = "replica-disk-soft-anti-affinity"
	SettingAllowEmptyNodeSelectorVolume            = "allow-empty-node-selector-volume"
	SettingAllowEmptyDiskSelectorVolume            = "allow-empty-disk-selector-volume"
	SettingDisableSchedulingOnCordonedNode         = "disable-scheduling-on-cordoned-node"
	SettingSchedulerExtenderEnabled                = "scheduler-extender-enabled"
	SettingSchedulerExtenderPodSchedulingTimeout   = "scheduler-extender-pod-scheduling-timeout"
	SettingSchedulerExtenderNodeReservationTimeout = "scheduler-extender-node-reservation-timeout"
)

// Setting condition types and reasons.
const (
	// SettingConditionValid is True when the value parses and is in range;
	// while False, the last valid value stays in effect.
	SettingConditionValid = "Valid"
	// SettingReasonValid means the value is in effect.
	SettingReasonValid = "Valid"
	// SettingReasonInvalidValue means the value was refused; the message says why.
	SettingReasonInvalidValue = "InvalidValue"
)

// SettingStatus is the observed state of a setting.
type SettingStatus struct {
	// applied is true when the value is in effect.
	// +optional
	Applied bool `json:"applied,omitempty"`
	// conditions has Valid: whether the value was accepted.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Setting is one cluster-wide setting, named by the setting and holding its
// value as a string, as in Longhorn.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhs
// +kubebuilder:printcolumn:name="Value",type=string,JSONPath=`.value`
// +kubebuilder:printcolumn:name="Applied",type=boolean,JSONPath=`.status.applied`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!(self.metadata.name in ['storage-over-provisioning-percentage', 'scheduler-extender-pod-scheduling-timeout', 'scheduler-extender-node-reservation-timeout']) || self.value.matches('^[0-9]{1,9}$')",message="value must be a non-negative integer",fieldPath=".value"
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'storage-minimal-available-percentage' || (self.value.matches('^[0-9]{1,3}$') && int(self.value) <= 100)",message="value must be an integer percentage from 0 to 100",fieldPath=".value"
// +kubebuilder:validation:XValidation:rule="!(self.metadata.name in ['replica-soft-anti-affinity', 'replica-zone-soft-anti-affinity', 'replica-disk-soft-anti-affinity', 'allow-empty-node-selector-volume', 'allow-empty-disk-selector-volume', 'disable-scheduling-on-cordoned-node', 'scheduler-extender-enabled']) || self.value in ['true', 'false']",message="value must be true or false",fieldPath=".value"
type Setting struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// value is the setting's value, as a string.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
	// status is the observed state of the setting.
	// +optional
	Status SettingStatus `json:"status,omitempty"`
}

// SettingList is a list of Settings.
// +kubebuilder:object:root=true
type SettingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Settings.
	Items []Setting `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Setting{}, &SettingList{})
}
