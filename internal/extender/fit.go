package extender

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

// untagged is a tag no real disk carries: it marks untagged disks, so that a
// volume without a disk selector can be limited to them when
// allow-empty-disk-selector-volume is false.
const untagged = "\x00untagged"

// fit is the verdict on one node for one pod.
type fit struct {
	// OK is true when the pod's volumes fit on the node.
	OK bool
	// Reason says why not, in numbers.
	Reason string
	// Assignment maps each volume that needs new space to a disk UUID.
	Assignment map[string]string
	// Sizes are the sizes of the assigned volumes.
	Sizes map[string]int64
	// Free is the bytes left free on the node's eligible disks after placement.
	Free int64
	// Steps and Exact report the packing search.
	Steps int
	Exact bool
}

// evaluate decides whether the volumes that have no replica on node fit
// together on its disks. ledgers are the node's DiskSchedules by UUID; pod
// ("namespace/name") gets back the space its own reservations hold.
func evaluate(vols []podVolume, node *longhornv1.Node, ledgers map[string]*longhornv1.DiskSchedule,
	sched settings.Scheduling, pod string, budget int) fit {
	if node == nil {
		return fit{Reason: "not a Longhorn node"}
	}
	if why := nodeIneligible(node); why != "" {
		return fit{Reason: why}
	}
	var items []packing.Item
	sizes := map[string]int64{}
	for _, v := range vols {
		if v.ReplicaNodes[node.Name] {
			continue // a replica is here already: no new space needed
		}
		if !placement.TagsMatch(node.Spec.Tags, v.NodeSelector, sched.AllowEmptyNodeSelectorVolume) {
			return fit{Reason: fmt.Sprintf("volume %s: node tags %v do not match node selector %v", v.Name, node.Spec.Tags, v.NodeSelector)}
		}
		selector := v.DiskSelector
		if len(selector) == 0 && !sched.AllowEmptyDiskSelectorVolume {
			selector = []string{untagged}
		}
		items = append(items, packing.Item{Name: v.Name, Size: v.Size, Selector: selector})
		sizes[v.Name] = v.Size
	}
	bins, uuids, total := diskBins(node, ledgers, pod)
	if len(items) == 0 {
		return fit{OK: true, Assignment: map[string]string{}, Sizes: sizes, Free: total, Exact: true}
	}
	if len(bins) == 0 {
		return fit{Reason: "no schedulable disk"}
	}
	res := packing.Pack(items, bins, budget)
	out := fit{OK: res.Fits, Reason: res.Reason, Steps: res.Steps, Exact: res.Exact, Sizes: sizes}
	if !res.Fits {
		return out
	}
	out.Assignment = map[string]string{}
	for volume, disk := range res.Assignment {
		out.Assignment[volume] = uuids[disk]
	}
	out.Free = total
	for _, size := range sizes {
		out.Free -= size
	}
	return out
}

// nodeIneligible says why no new replica may go to node, or "".
func nodeIneligible(node *longhornv1.Node) string {
	switch {
	case !node.Spec.AllowScheduling:
		return "scheduling is disabled on the Longhorn node"
	case node.Spec.EvictionRequested:
		return "eviction is requested for the Longhorn node"
	case !meta.IsStatusConditionTrue(node.Status.Conditions, longhornv1.NodeConditionReady):
		return "the Longhorn node is not ready"
	case !meta.IsStatusConditionTrue(node.Status.Conditions, longhornv1.NodeConditionSchedulable):
		return "the Longhorn node is not schedulable"
	}
	return ""
}

// diskBins returns the node's schedulable disks as packing bins, named by
// disk name, with what their ledgers can still grant; the UUID of each disk
// name; and their free bytes in all.
func diskBins(node *longhornv1.Node, ledgers map[string]*longhornv1.DiskSchedule, pod string) ([]packing.Bin, map[string]string, int64) {
	var bins []packing.Bin
	uuids := map[string]string{}
	var total int64
	names := make([]string, 0, len(node.Spec.Disks))
	for name := range node.Spec.Disks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		spec := node.Spec.Disks[name]
		status := node.Status.DiskStatus[name]
		if status == nil || status.DiskUUID == "" || !spec.AllowScheduling || spec.EvictionRequested ||
			!meta.IsStatusConditionTrue(status.Conditions, longhornv1.DiskConditionSchedulable) {
			continue
		}
		ds := ledgers[status.DiskUUID]
		if ds == nil || !meta.IsStatusConditionTrue(ds.Status.Conditions, longhornv1.DiskScheduleConditionReady) {
			continue
		}
		free := ledger.Free(ds) + heldForPod(ds, pod)
		tags := spec.Tags
		if len(tags) == 0 {
			tags = []string{untagged}
		}
		bins = append(bins, packing.Bin{Name: name, Free: free, Tags: tags})
		uuids[name] = status.DiskUUID
		total += free
	}
	return bins, uuids, total
}

// heldForPod returns the bytes ds's granted reservations hold for pod.
func heldForPod(ds *longhornv1.DiskSchedule, pod string) int64 {
	var held int64
	for volume, res := range ds.Spec.Reservations {
		if res.Pod != pod {
			continue
		}
		if st, ok := ds.Status.Reservations[volume]; ok && st.State == longhornv1.ReservationStateScheduled {
			held += st.ScheduledSize
		}
	}
	return held
}

// restartNode returns the first (by name) of candidates that holds a replica
// of every volume, or "".
func restartNode(vols []podVolume, candidates []string) string {
	for _, name := range sortedCopy(candidates) {
		all := true
		for _, v := range vols {
			if !v.ReplicaNodes[name] {
				all = false
				break
			}
		}
		if all {
			return name
		}
	}
	return ""
}

func sortedCopy(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}
