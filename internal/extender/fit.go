package extender

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/ledger"
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
// (ledger.RoomOf, read once per ledger, then Room.For the pod), less what
// claimed says pods in flight hold on each disk (nil: nothing). This function only combines them and
// packs the volumes.
func evaluateReading(vols []podVolume, r *nodeReading, claimed func(uuid string) int64,
	sched settings.Scheduling, pod string, budget int) fit {
	return new(scratch).evaluate(vols, r, claimed, sched, pod, budget)
}

// scratch is what evaluating one pod's volumes node after node reuses: the
// buffers of each node's evaluation, which no verdict keeps, and the sizes
// of the volumes, which the verdicts of nodes that need every volume share
// (nothing changes a verdict's maps).
type scratch struct {
	need     []int
	views    []diskView
	disks    []*diskView
	failures [][]string
	bins     []packing.Bin
	items    []packing.Item
	names    []string
	// sizes are the sizes of every volume evaluated, by name, made once.
	sizes map[string]int64
	// packed are Pack's answers for several volumes by packingKey of their
	// items and bins (key is its buffer); nothing changes an answer.
	packed map[string]packing.Result
	key    []byte
}

// evaluate is evaluateReading with the buffers of s.
func (s *scratch) evaluate(vols []podVolume, r *nodeReading, claimed func(uuid string) int64,
	sched settings.Scheduling, pod string, budget int) fit {
	if r == nil {
		return fit{Reason: "not a Longhorn node"}
	}
	node, pn := r.node, r.placement
	s.need = s.need[:0] // indexes in vols of the volumes without a replica here
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
		s.need = append(s.need, i)
	}

	disks := s.nodeDisks(r, claimed, vols, sched, pod)
	s.bins = s.bins[:0]
	var total int64
	for _, d := range disks {
		if d.usable() {
			s.bins = append(s.bins, packing.Bin{Name: d.Name, Free: d.free, Tags: d.Tags})
			total = ledger.AddSat(total, d.free)
		}
	}
	s.items = s.items[:0]
	s.names = grow(s.names, len(s.need)*len(disks)) // the items' disks
	for k, i := range s.need {
		v := vols[i]
		item := packing.Item{Name: v.Name, Size: v.Size, Selector: v.DiskSelector, Disks: s.names[k*len(disks) : k*len(disks) : (k+1)*len(disks)]}
		for _, d := range disks {
			if d.ledgerFailure == "" && len(d.failures[i]) == 0 {
				item.Disks = append(item.Disks, d.Name)
			}
		}
		if len(item.Disks) == 0 {
			return fit{Reason: noDiskReason(v.Name, i, disks)}
		}
		s.items = append(s.items, item)
	}
	sizes := s.sizesOf(vols)
	if len(s.need) < len(vols) {
		sizes = make(map[string]int64, len(s.need))
		for _, i := range s.need {
			sizes[vols[i].Name] = vols[i].Size
		}
	}
	if len(s.items) == 0 {
		return fit{OK: true, Assignment: map[string]string{}, Sizes: sizes, Free: total, Exact: true}
	}
	res, kept := s.pack(budget)
	out := fit{OK: res.Fits, Reason: res.Reason, Steps: res.Steps, Exact: res.Exact, Sizes: sizes}
	if !res.Fits {
		return out
	}
	// The packing's answer, by disk name, becomes the verdict's, by UUID:
	// in place, unless the answer is kept for other nodes.
	out.Assignment = res.Assignment
	if kept {
		out.Assignment = make(map[string]string, len(res.Assignment))
	}
	for volume, disk := range res.Assignment {
		for _, d := range disks {
			if d.Name == disk {
				out.Assignment[volume] = d.UUID
				break
			}
		}
	}
	out.Free = total
	for _, size := range sizes {
		out.Free = ledger.AddSat(out.Free, -size)
	}
	return out
}

// pack packs s.items onto s.bins. Pack's answer depends on the contents of
// its items and bins alone, and many nodes of a cluster look alike to a
// pod (the same disks, as free): the answer for several volumes is kept
// for the other nodes of the same contents, whose search it would repeat.
// One volume is placed without a search, and not kept. kept tells whether
// the answer is kept, and so must not be changed.
func (s *scratch) pack(budget int) (res packing.Result, kept bool) {
	if len(s.items) < 2 {
		return packing.Pack(s.items, s.bins, budget), false
	}
	s.key = packingKey(s.key[:0], s.items, s.bins)
	if res, ok := s.packed[string(s.key)]; ok {
		return res, true
	}
	res = packing.Pack(s.items, s.bins, budget)
	if s.packed == nil {
		s.packed = map[string]packing.Result{}
	}
	s.packed[string(s.key)] = res
	return res, true
}

// packingKey appends to buf what Pack reads of items and bins, each string
// with its length, so that different contents never share a key.
func packingKey(buf []byte, items []packing.Item, bins []packing.Bin) []byte {
	str := func(v string) {
		buf = strconv.AppendInt(buf, int64(len(v)), 10)
		buf = append(buf, ':')
		buf = append(buf, v...)
	}
	strs := func(vs []string) {
		buf = strconv.AppendInt(buf, int64(len(vs)), 10)
		if vs == nil {
			buf = append(buf, '-') // nil and empty differ for Item.Disks
		}
		buf = append(buf, '[')
		for _, v := range vs {
			str(v)
		}
	}
	buf = strconv.AppendInt(buf, int64(len(items)), 10)
	for _, it := range items {
		str(it.Name)
		buf = strconv.AppendInt(append(buf, ' '), it.Size, 10)
		strs(it.Selector)
		strs(it.Disks)
	}
	buf = strconv.AppendInt(append(buf, '|'), int64(len(bins)), 10)
	for _, b := range bins {
		str(b.Name)
		buf = strconv.AppendInt(append(buf, ' '), b.Free, 10)
		strs(b.Tags)
	}
	return buf
}

// sizesOf returns the sizes of vols by name, made on the first call.
func (s *scratch) sizesOf(vols []podVolume) map[string]int64 {
	if s.sizes == nil {
		s.sizes = make(map[string]int64, len(vols))
		for _, v := range vols {
			s.sizes[v.Name] = v.Size
		}
	}
	return s.sizes
}

// grow returns buf with length n, reusing its array when it is large enough.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
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
// They are s's buffers, good until its next call.
func (s *scratch) nodeDisks(r *nodeReading, claimed func(uuid string) int64, vols []podVolume, sched settings.Scheduling, pod string) []*diskView {
	// A filter evaluates every disk of every candidate node: the views
	// and their failures reuse the buffers of the node before.
	s.views = grow(s.views, len(r.disks))
	s.failures = grow(s.failures, len(r.disks)*len(vols))
	s.disks = s.disks[:0]
	for j := range r.disks {
		d, dv := &r.disks[j], &s.views[j]
		*dv = diskView{diskReading: d, failures: s.failures[j*len(vols) : (j+1)*len(vols) : (j+1)*len(vols)]}
		if d.ledger != nil {
			dv.free = d.room.For(pod)
			if claimed != nil {
				dv.free = max(dv.free-claimed(d.ledger.Name), 0)
			}
		}
		for i, v := range vols {
			dv.failures[i] = placement.DiskFailuresForVolume(d.Disk, v.placementVolume(), sched)
		}
		s.disks = append(s.disks, dv)
	}
	return s.disks
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
