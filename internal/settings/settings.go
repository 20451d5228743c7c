package settings

import (
	"fmt"
	"strconv"
	"time"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
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
		longhornv1.SettingStorageOverProvisioningPercentage: {kindCount, "100", func(s *Scheduling, v int64, _ bool) { s.OverProvisioningPercentage = v }},
		longhornv1.SettingStorageMinimalAvailablePercentage: {kindPercentage, "25", func(s *Scheduling, v int64, _ bool) { s.MinimalAvailablePercentage = v }},
		longhornv1.SettingReplicaSoftAntiAffinity:           {kindBool, "false", func(s *Scheduling, _ int64, b bool) { s.ReplicaSoftAntiAffinity = b }},
		longhornv1.SettingReplicaZoneSoftAntiAffinity:       {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.ReplicaZoneSoftAntiAffinity = b }},
		longhornv1.SettingReplicaDiskSoftAntiAffinity:       {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.ReplicaDiskSoftAntiAffinity = b }},
		longhornv1.SettingAllowEmptyNodeSelectorVolume:      {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.AllowEmptyNodeSelectorVolume = b }},
		longhornv1.SettingAllowEmptyDiskSelectorVolume:      {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.AllowEmptyDiskSelectorVolume = b }},
		longhornv1.SettingDisableSchedulingOnCordonedNode:   {kindBool, "true", func(s *Scheduling, _ int64, b bool) { s.DisableSchedulingOnCordonedNode = b }},
		longhornv1.SettingSchedulerExtenderEnabled:          {kindBool, "false", func(s *Scheduling, _ int64, b bool) { s.SchedulerExtenderEnabled = b }},
		longhornv1.SettingSchedulerExtenderPodSchedulingTimeout: {kindSeconds, "5", func(s *Scheduling, v int64, _ bool) {
			s.PodSchedulingTimeout = time.Duration(v) * time.Second
		}},
		longhornv1.SettingSchedulerExtenderNodeReservationTimeout: {kindSeconds, "5", func(s *Scheduling, v int64, _ bool) {
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

// FromObjects parses the given Setting objects, as Parse does.
func FromObjects(objects []longhornv1.Setting) (Scheduling, map[string]error) {
	values := make(map[string]string, len(objects))
	for i := range objects {
		values[objects[i].Name] = objects[i].Value
	}
	return Parse(values)
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
