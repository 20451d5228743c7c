package settings

import (
	"fmt"
	"strconv"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
)

// Longhorn's scheduling settings: Setting objects in Longhorn's namespace,
// read only.
const (
	StorageOverProvisioningPercentage = "storage-over-provisioning-percentage"
	StorageMinimalAvailablePercentage = "storage-minimal-available-percentage"
	ReplicaSoftAntiAffinity           = "replica-soft-anti-affinity"
	ReplicaZoneSoftAntiAffinity       = "replica-zone-soft-anti-affinity"
	ReplicaDiskSoftAntiAffinity       = "replica-disk-soft-anti-affinity"
	AllowEmptyNodeSelectorVolume      = "allow-empty-node-selector-volume"
	AllowEmptyDiskSelectorVolume      = "allow-empty-disk-selector-volume"
	DisableSchedulingOnCordonedNode   = "disable-scheduling-on-cordoned-node"
	// ConcurrentReplicaRebuildPerNodeLimit at 0 keeps Longhorn from
	// creating any replica of a volume that has replicas, so a best-effort
	// volume's local replica too (volume_controller.go replenishReplicas).
	ConcurrentReplicaRebuildPerNodeLimit = "concurrent-replica-rebuild-per-node-limit"
)

// The extender's settings: keys of the ConfigMap ConfigMapName in the
// manager's namespace (Longhorn v1.12 refuses Settings it does not know).
const (
	// ConfigMapName is the ConfigMap holding the extender's settings.
	ConfigMapName                           = "diskschedule-config"
	SchedulerExtenderEnabled                = "scheduler-extender-enabled"
	SchedulerExtenderPodSchedulingTimeout   = "scheduler-extender-pod-scheduling-timeout"
	SchedulerExtenderNodeReservationTimeout = "scheduler-extender-node-reservation-timeout"
)

// Scheduling holds the typed values of every scheduling setting.
type Scheduling struct {
	// OverProvisioningPercentage scales a disk's usable size into its ledger limit.
	OverProvisioningPercentage int64
	// MinimalAvailablePercentage is the share of a disk's maximum that must
	// stay actually free for the disk to take new replicas.
	MinimalAvailablePercentage int64
	// ReplicaSoftAntiAffinity allows two replicas of a volume on one node.
	ReplicaSoftAntiAffinity bool
	// ReplicaZoneSoftAntiAffinity allows two replicas of a volume in one zone.
	ReplicaZoneSoftAntiAffinity bool
	// ReplicaDiskSoftAntiAffinity allows two replicas of a volume on one disk.
	ReplicaDiskSoftAntiAffinity bool
	// AllowEmptyNodeSelectorVolume lets volumes without a node selector use tagged nodes.
	AllowEmptyNodeSelectorVolume bool
	// AllowEmptyDiskSelectorVolume lets volumes without a disk selector use tagged disks.
	AllowEmptyDiskSelectorVolume bool
	// DisableSchedulingOnCordonedNode makes cordoned nodes unschedulable for replicas.
	DisableSchedulingOnCordonedNode bool
	// ConcurrentReplicaRebuildPerNodeLimit is how many replicas a node
	// rebuilds at once; 0 disables every replica Longhorn would create for
	// a volume that has replicas, a best-effort volume's local one included.
	ConcurrentReplicaRebuildPerNodeLimit int64
	// SchedulerExtenderEnabled turns the kube-scheduler extender on.
	SchedulerExtenderEnabled bool
	// PodSchedulingTimeout is how long the extender holds later filters for a
	// pod whose node is not known yet; 0 disables the hold.
	PodSchedulingTimeout time.Duration
	// NodeReservationTimeout is how long a reservation waits for a replica
	// before it expires.
	NodeReservationTimeout time.Duration
}

type kind int

const (
	kindBool kind = iota
	kindCount
	kindPercentage
	kindSeconds
)

type definition struct {
	kind         kind
	defaultValue string
	apply        func(s *Scheduling, v int64, b bool)
}

func definitions() map[string]definition {
	return map[string]definition{
		StorageOverProvisioningPercentage: {kindCount, "100", func(s *Scheduling, v int64, _ bool) { s.OverProvisioningPercentage = v }},
		StorageMinimalAvailablePercentage: {kindPercentage, "25", func(s *Scheduling, v int64, _ bool) { s.MinimalAvailablePercentage = v }},
		ReplicaSoftAntiAffinity:           {kindBool, "false", func(s *Scheduling, _ int64, b bool) { s.ReplicaSoftAntiAffinity = b }},
		ReplicaZoneSoftAntiAffinity:       {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.ReplicaZoneSoftAntiAffinity = b }},
		ReplicaDiskSoftAntiAffinity:       {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.ReplicaDiskSoftAntiAffinity = b }},
		AllowEmptyNodeSelectorVolume:      {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.AllowEmptyNodeSelectorVolume = b }},
		AllowEmptyDiskSelectorVolume:      {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.AllowEmptyDiskSelectorVolume = b }},
		DisableSchedulingOnCordonedNode:   {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.DisableSchedulingOnCordonedNode = b }},
		ConcurrentReplicaRebuildPerNodeLimit: {kindCount, "5", func(s *Scheduling, v int64, _ bool) {
			s.ConcurrentReplicaRebuildPerNodeLimit = v
		}},
		SchedulerExtenderEnabled: {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.SchedulerExtenderEnabled = b }},
		SchedulerExtenderPodSchedulingTimeout: {kindSeconds, "5", func(s *Scheduling, v int64, _ bool) {
			s.PodSchedulingTimeout = time.Duration(v) * time.Second
		}},
		SchedulerExtenderNodeReservationTimeout: {kindSeconds, "5", func(s *Scheduling, v int64, _ bool) {
			s.NodeReservationTimeout = time.Duration(v) * time.Second
		}},
	}
}

// Defaults returns every scheduling setting's name and default value.
func Defaults() map[string]string {
	out := map[string]string{}
	for name, def := range definitions() {
		out[name] = def.defaultValue
	}
	return out
}

// Default returns the scheduling settings at their defaults.
func Default() Scheduling {
	s, _ := Parse(nil)
	return s
}

// IsScheduling reports whether name is one of the scheduling settings.
func IsScheduling(name string) bool {
	_, ok := definitions()[name]
	return ok
}

// Validate returns an error saying what is wrong when value is not valid for
// the named setting. Names that are not scheduling settings are not checked.
func Validate(name, value string) error {
	def, ok := definitions()[name]
	if !ok {
		return nil
	}
	_, _, err := parseValue(def.kind, value)
	if err != nil {
		return fmt.Errorf("setting %s: %w", name, err)
	}
	return nil
}

// Parse returns the scheduling settings with the given values (name to
// value) over the defaults. An invalid value keeps the default and is
// reported in the returned map, keyed by setting name.
func Parse(values map[string]string) (Scheduling, map[string]error) {
	var s Scheduling
	var invalid map[string]error
	for name, def := range definitions() {
		n, b, err := parseValue(def.kind, def.defaultValue)
		if err != nil {
			panic(fmt.Sprintf("default of setting %s is invalid: %v", name, err))
		}
		if value, ok := values[name]; ok {
			if vn, vb, err := parseValue(def.kind, value); err == nil {
				n, b = vn, vb
			} else {
				if invalid == nil {
					invalid = map[string]error{}
				}
				invalid[name] = fmt.Errorf("setting %s: %w", name, err)
			}
		}
		def.apply(&s, n, b)
	}
	return s, invalid
}

// FromObjects parses Longhorn's Setting objects and the extender's
// ConfigMap (nil when absent), as Parse does. Only Longhorn's scheduling
// settings are taken from Settings and only the extender's from the
// ConfigMap.
func FromObjects(objects []lhv1.Setting, config *corev1.ConfigMap) (Scheduling, map[string]error) {
	values := make(map[string]string, len(objects))
	for i := range objects {
		if IsLonghorn(objects[i].Name) {
			values[objects[i].Name] = objects[i].Value
		}
	}
	if config != nil {
		for name, value := range config.Data {
			if IsScheduling(name) && !IsLonghorn(name) {
				values[name] = value
			}
		}
	}
	return Parse(values)
}

// IsLonghorn reports whether name is one of Longhorn's own scheduling
// settings (a Setting object), rather than one of the extender's keys.
func IsLonghorn(name string) bool {
	switch name {
	case SchedulerExtenderEnabled, SchedulerExtenderPodSchedulingTimeout, SchedulerExtenderNodeReservationTimeout:
		return false
	}
	return IsScheduling(name)
}

func parseValue(k kind, value string) (int64, bool, error) {
	switch k {
	case kindBool:
		b, err := strconv.ParseBool(value)
		if err != nil || (value != "true" && value != "false") {
			return 0, false, fmt.Errorf("value %q must be true or false", value)
		}
		return 0, b, nil
	case kindPercentage:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < 0 || n > 100 {
			return 0, false, fmt.Errorf("value %q must be an integer percentage from 0 to 100", value)
		}
		return n, false, nil
	default:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < 0 {
			return 0, false, fmt.Errorf("value %q must be a non-negative integer", value)
		}
		return n, false, nil
	}
}
