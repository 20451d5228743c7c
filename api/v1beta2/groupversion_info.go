// Package v1beta2 contains the DiskSchedule API, the one kind diskschedule
// owns. It is registered in longhorn.io/v1beta2, beside Longhorn's own kinds
// (github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2),
// which diskschedule reads and never writes.
// +kubebuilder:object:generate=true
// +groupName=longhorn.io
package v1beta2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of DiskSchedule, shared with Longhorn's kinds.
	GroupVersion = schema.GroupVersion{Group: "longhorn.io", Version: "v1beta2"}

	// SchemeBuilder adds DiskSchedule to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds DiskSchedule to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
