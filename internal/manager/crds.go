package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// LonghornResources are the Longhorn kinds the manager reads, as resources
// of longhorn.io/v1beta2. Longhorn installs their CRDs; the add-on never does.
var LonghornResources = []string{"nodes", "volumes", "replicas", "backingimages", "settings"}

// DiskScheduleResource is the resource of the one CRD the add-on installs.
const DiskScheduleResource = "diskschedules"

// MissingCRDsError says which CRDs the API server does not serve at
// longhorn.io/v1beta2.
type MissingCRDsError struct {
	// Longhorn are the missing resources of Longhorn's own CRDs.
	Longhorn []string
	// DiskSchedule is true when the add-on's DiskSchedule CRD is missing.
	DiskSchedule bool
	// Foreign says why the DiskSchedule CRD on the cluster is not the one
	// the add-on installs ("" when it is, or when it is missing).
	Foreign string
}

// Error names what is missing and what to do about it.
func (e *MissingCRDsError) Error() string {
	var parts []string
	if len(e.Longhorn) > 0 {
		parts = append(parts, fmt.Sprintf("Longhorn's CRDs %s are not served at %s: install Longhorn v1.12 first, the add-on runs next to it",
			qualified(e.Longhorn), dsv1.GroupVersion))
	}
	if e.DiskSchedule {
		parts = append(parts, fmt.Sprintf("the CRD %s is not installed: install the add-on's CRD (the Helm chart with crd.enable=true, or config/crd)",
			qualified([]string{DiskScheduleResource})))
	}
	if e.Foreign != "" {
		parts = append(parts, fmt.Sprintf("the CRD %s on the cluster is not the one this add-on installs (%s): "+
			"it may be another project's or a future Longhorn's, and the add-on does not share it; "+
			"if it is an older or newer version of the add-on's, apply this version's config/crd",
			diskScheduleCRDName, e.Foreign))
	}
	return strings.Join(parts, "; ")
}

func qualified(resources []string) string {
	out := make([]string, len(resources))
	for i, r := range resources {
		out[i] = r + "." + dsv1.GroupVersion.Group
	}
	return strings.Join(out, ", ")
}

// CheckCRDs asks the API server's discovery which resources it serves at
// longhorn.io/v1beta2 and returns a *MissingCRDsError when Longhorn's kinds
// or DiskSchedule are not among them, or when the DiskSchedule CRD is not
// the add-on's own (foreignCRD).
func CheckCRDs(cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a discovery client: %w", err)
	}
	served := map[string]bool{}
	list, err := dc.ServerResourcesForGroupVersion(dsv1.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		// Nothing is served at longhorn.io/v1beta2.
	case err != nil:
		return fmt.Errorf("discovering the resources of %s: %w", dsv1.GroupVersion, err)
	default:
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
	}
	missing := &MissingCRDsError{DiskSchedule: !served[DiskScheduleResource]}
	for _, r := range LonghornResources {
		if !served[r] {
			missing.Longhorn = append(missing.Longhorn, r)
		}
	}
	if !missing.DiskSchedule {
		if missing.Foreign, err = foreignCRD(context.Background(), cfg); err != nil {
			return err
		}
	}
	if len(missing.Longhorn) > 0 || missing.DiskSchedule || missing.Foreign != "" {
		return missing
	}
	return nil
}

// IsMissingCRDs reports whether err says CRDs are missing or the
// DiskSchedule CRD is not the add-on's.
func IsMissingCRDs(err error) bool {
	var missing *MissingCRDsError
	return errors.As(err, &missing)
}
