// Package v1beta2 contains the longhorn.io/v1beta2 API types used by
// diskschedule: the DiskSchedule ledger and the Longhorn kinds that write to it.
// +kubebuilder:object:generate=true
// +groupName=longhorn.io
package v1beta2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "longhorn.io", Version: "v1beta2"}

	// SchemeBuilder adds the kinds of this package to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
