package extender

import (
	"fmt"
	"sort"
	"strings"

	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

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
	// Free is the bytes left free on the node's usable disks after placement.
	Free int64
	// Steps and Exact report the packing search.
	Steps int
	Exact bool
}

// evaluateReading decides whether vols, the pod's volumes that need local
// space (needsLocalSpace), fit together on the disks of the node read as r
// (nil: not a Longhorn node; the view keeps readings between the node's
// changes), leaving out those with a replica there; pod ("namespace/name")
// gets back the space its own reservations hold.
//
// Whether the node and each disk may take a replica of a volume is
// placement.NodeFailures and placement.DiskFailuresForVolume, the one eligibility
// rule; how much a disk can still take for pod is the ledger's reading
// (ledger.FreeFor, read once per ledger as ledger.RoomOf), less what claimed says pods in flight
// hold on each disk (nil: nothing). This function only combines them and
// packs the volumes.
func evaluateReading(vols []podVolume, r *nodeReading, claimed func(uuid string) int64,
	sched settings.Scheduling, pod string, budget int) fit {
	if r == nil {
		return fit{Reason: "not a Longhorn node"}
	}
	node, pn := r.node, r.placement
	var need []int // indexes in vols of the volumes without a replica here
	for i, v := range vols {
		if v.ReplicaNodes[node.Name] {
			continue // a replica is here already: no new space needed
		}
		if why := pinnedElsewhere(v, node.Name); why != "" {
			return fit{Reason: why}
		}
		if why := placement.NodeFailures(pn, v.NodeSelector, sched); len(why) > 0 {
			return fit{Reason: fmt.Sprintf("volume %s: %s", v.Name, strings.Join(why, " and "))}
		}
		need = append(need, i)
	}

	disks := nodeDisks(r, claimed, vols, sched, pod)
	bins := make([]packing.Bin, 0, len(disks))
	uuids := make(map[string]string, len(disks))
	var total int64
	for _, d := range disks {
		if d.usable() {
			bins = append(bins, packing.Bin{Name: d.Name, Free: d.free, Tags: d.Tags})
			uuids[d.Name] = d.UUID
			total += d.free
		}
	}
	sizes := map[string]int64{}
	items := make([]packing.Item, 0, len(need))
	names := make([]string, len(need)*len(disks)) // the items' disks, in one allocation
	for k, i := range need {
		v := vols[i]
		item := packing.Item{Name: v.Name, Size: v.Size, Selector: v.DiskSelector, Disks: names[k*len(disks) : k*len(disks) : (k+1)*len(disks)]}
		for _, d := range disks {
			if d.ledgerFailure == "" && len(d.failures[i]) == 0 {
				item.Disks = append(item.Disks, d.Name)
			}
		}
		if len(item.Disks) == 0 {
			return fit{Reason: noDiskReason(v.Name, i, disks)}
		}
		items = append(items, item)
		sizes[v.Name] = v.Size
	}
	if len(items) == 0 {
		return fit{OK: true, Assignment: map[string]string{}, Sizes: sizes, Free: total, Exact: true}
	}
	res := packing.Pack(items, bins, budget)
	out := fit{OK: res.Fits, Reason: res.Reason, Steps: res.Steps, Exact: res.Exact, Sizes: sizes}
	if !res.Fits {
		return out
	}
	out.Assignment = make(map[string]string, len(res.Assignment))
	for volume, disk := range res.Assignment {
		out.Assignment[volume] = uuids[disk]
	}
	out.Free = total
	for _, size := range sizes {
		out.Free -= size
	}
	return out
}

// diskView is one disk of a node as one pod sees it.
type diskView struct {
	*diskReading
	// failures are placement.DiskFailuresForVolume for each of the pod's volumes, in
	// the order of the volumes.
	failures [][]string
	// free is what the ledger can still grant, plus what it holds for the
	// pod, less what pods in flight claim there.
	free int64
}

// usable reports whether some volume of the pod may use the disk.
func (d *diskView) usable() bool {
	if d.ledgerFailure != "" {
		return false
	}
	for _, f := range d.failures {
		if len(f) == 0 {
			return true
		}
	}
	return false
}

// nodeDisks returns the disks of the node read as r, sorted by name, each
// with its ledger's free space for pod and the eligibility of each of vols.
func nodeDisks(r *nodeReading, claimed func(uuid string) int64, vols []podVolume, sched settings.Scheduling, pod string) []*diskView {
	// One allocation each for the views and their failures: a filter
	// evaluates every disk of every candidate node.
	views := make([]diskView, len(r.disks))
	failures := make([][]string, len(r.disks)*len(vols))
	out := make([]*diskView, 0, len(r.disks))
	for j := range r.disks {
		d, dv := &r.disks[j], &views[j]
		*dv = diskView{diskReading: d, failures: failures[j*len(vols) : (j+1)*len(vols) : (j+1)*len(vols)]}
		if d.ledger != nil {
			dv.free = d.room.For(pod)
			if claimed != nil {
				dv.free = max(dv.free-claimed(d.ledger.Name), 0)
			}
		}
		for i, v := range vols {
			dv.failures[i] = placement.DiskFailuresForVolume(d.Disk, v.placementVolume(), sched)
		}
		out = append(out, dv)
	}
	return out
}

// noDiskReason says why no disk of the node may take volume, the i-th
// volume of the pod.
func noDiskReason(volume string, i int, disks []*diskView) string {
	if len(disks) == 0 {
		return fmt.Sprintf("volume %s: no schedulable disk: the node has no disk", volume)
	}
	why := make([]string, 0, len(disks))
	for _, d := range disks {
		reason := d.ledgerFailure // the ledger grants nothing there, whatever the disk
		if reason == "" {
			reason = strings.Join(d.failures[i], " and ")
		}
		why = append(why, d.Name+": "+reason)
	}
	return fmt.Sprintf("volume %s: no schedulable disk (%s)", volume, strings.Join(why, "; "))
}

// restartNode returns the first (by name) of candidates that holds a replica
// of every one of vols, the pod's volumes that need local space, or "".
func restartNode(vols []podVolume, candidates []string) string {
	for _, name := range sortedCopy(candidates) {
		all := true
		for _, v := range vols {
			if !v.HealthyNodes[name] {
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
