package placement

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// The largest volumes a data engine v1 replica may have on a file system,
// as longhorn-manager v1.12 bounds them (util.MaxExt4VolumeSize,
// util.MaxXfsVolumeSize): a volume of this size or more does not fit.
const (
	maxExt4VolumeSize = 16 << 40
	maxXfsVolumeSize  = 8<<60 - 1
)

// NodeSchedulable returns the value of a node's Schedulable condition: a
// cordoned node is unschedulable only while disable-scheduling-on-cordoned-node
// is true.
func NodeSchedulable(cordoned, disableOnCordoned bool) bool {
	return !cordoned || !disableOnCordoned
}

// SoftAntiAffinity returns whether an anti-affinity is soft for a volume:
// the volume's override when it is enabled (soft) or disabled (hard), the
// setting when it is ignored or empty.
// Longhorn's three override types (ReplicaSoftAntiAffinity,
// ReplicaZoneSoftAntiAffinity, ReplicaDiskSoftAntiAffinity) share these values.
func SoftAntiAffinity(override string, setting bool) bool {
	switch override {
	case "enabled":
		return true
	case "disabled":
		return false
	default:
		return setting
	}
}

// TagsMatch reports whether tags satisfy selector: every selector entry is
// a tag (AND). An empty selector matches any tags when allowEmpty is true
// and only an untagged node or disk otherwise.
func TagsMatch(tags, selector []string, allowEmpty bool) bool {
	if len(selector) == 0 {
		return allowEmpty || len(tags) == 0
	}
	for _, s := range selector {
		if !slices.Contains(tags, s) {
			return false
		}
	}
	return true
}

// dataEngine returns the volume's data engine, with empty meaning v1 as in
// Longhorn, and the disk type its replicas need: filesystem for v1, block
// for v2.
func dataEngine(e lhv1.DataEngineType) (lhv1.DataEngineType, lhv1.DiskType) {
	if e == lhv1.DataEngineTypeV2 {
		return e, lhv1.DiskTypeBlock
	}
	return lhv1.DataEngineTypeV1, lhv1.DiskTypeFilesystem
}

// fileSystemLimit returns the size from which a volume of data engine
// engine does not fit a disk with file system fsType, and false when there
// is no such limit (data engine v2, file systems Longhorn does not bound).
// Longhorn cannot tell ext2, ext3 and ext4 apart and bounds them all.
func fileSystemLimit(engine lhv1.DataEngineType, fsType string) (int64, bool) {
	switch {
	case engine != lhv1.DataEngineTypeV1:
		return 0, false
	case strings.HasPrefix(fsType, "ext"):
		return maxExt4VolumeSize, true
	case fsType == "xfs":
		return maxXfsVolumeSize, true
	default:
		return 0, false
	}
}

// bytesString formats a byte count exactly: with the largest binary suffix
// from Mi up that divides it ("100Gi", "512Mi"), else as plain bytes
// ("107374182401").
func bytesString(n int64) string {
	units := []struct {
		suffix string
		size   int64
	}{{"Ei", 1 << 60}, {"Pi", 1 << 50}, {"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}}
	for _, u := range units {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// tagsFailure returns why tags do not satisfy selector, or "" when they do.
// settingName names the allow-empty setting for the empty-selector case.
func tagsFailure(tags, selector []string, allowEmpty bool, settingName string) string {
	if TagsMatch(tags, selector, allowEmpty) {
		return ""
	}
	if len(selector) == 0 {
		return fmt.Sprintf("tags %v do not match the empty selector (%s is false)", sorted(tags), settingName)
	}
	return fmt.Sprintf("tags %v do not match selector %v", sorted(tags), sorted(selector))
}

// sorted returns a sorted copy of s, so messages do not depend on input order.
func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}
