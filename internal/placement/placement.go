package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/settings"
)

// Place chooses a disk for each of req.Count new replicas of req.Volume,
// one at a time: each choice updates the in-memory view (the disk's
// scheduled bytes and available space, the node and zone replica counts)
// before the next is made. The result is a function of the input alone; the
// order of nodes, disks and replicas in the input does not matter.
//
// When fewer than req.Count replicas are placed, Result.Reason says why in
// one word and Result.Message and Result.Failures say, for the first replica
// that found no disk, why each candidate failed.
func Place(req Request) Result {
	if res, done := precheck(req); done {
		return res
	}
	v := newView(req)
	choices := make([]Choice, 0, req.Count)
	for len(choices) < req.Count {
		ev := v.evaluate()
		if len(ev.candidates) == 0 {
			return v.failed(choices, req.Count, ev.failures)
		}
		d := v.choose(ev.candidates)
		v.commit(d)
		choices = append(choices, d.choice())
	}
	return Result{Choices: choices}
}

// Eligibility is the one eligibility rule applied to every node and disk
// (DESIGN §5): which disks may take the next new replica of req.Volume, as
// Longhorn v1.12's scheduler finds its disk candidates for one replica
// (ReplicaScheduler.FindDiskCandidates), and why every other node and disk
// may not. req.Count is ignored: the verdict is for one replica. Place
// chooses among the same candidates.
func Eligibility(req Request) Verdict {
	req.Count = 1
	if res, done := precheck(req); done {
		return Verdict{Reason: res.Reason, Message: res.Message, Failures: res.Failures}
	}
	v := newView(req)
	ev := v.evaluate()
	if len(ev.candidates) == 0 {
		res := v.failed(nil, 1, ev.failures)
		return Verdict{Reason: res.Reason, Message: res.Message, Failures: res.Failures}
	}
	out := Verdict{Candidates: make([]Choice, 0, len(ev.candidates)), Failures: ev.failures}
	for _, d := range ev.candidates {
		out.Candidates = append(out.Candidates, d.choice())
	}
	return out
}

// precheck handles the requests that need no search: nothing to place,
// waiting for attachment, and invalid input. done is true when res is final.
func precheck(req Request) (res Result, done bool) {
	if req.Count <= 0 {
		return Result{}, true
	}
	if req.Volume == nil {
		return invalid("the request names no volume"), true
	}
	spec := req.Volume.Spec
	if localityNeedsNode(spec.DataLocality) && spec.NodeID == "" {
		return Result{
			Reason: ReasonWaitingForAttachment,
			Message: fmt.Sprintf("volume %s has data locality %s and is not attached: its replicas wait for attachment",
				req.Volume.Name, spec.DataLocality),
		}, true
	}
	if size := requestSize(req); size <= 0 {
		return invalid(fmt.Sprintf("volume %s requests %d bytes per replica; the size must be positive", req.Volume.Name, size)), true
	}
	if spec.DataLocality == lhv1.DataLocalityStrictLocal && req.HardNodeAffinity != "" && req.HardNodeAffinity != spec.NodeID {
		return invalid(fmt.Sprintf("volume %s is strict-local on node %s but the replica is pinned to node %s",
			req.Volume.Name, spec.NodeID, req.HardNodeAffinity)), true
	}
	return Result{}, false
}

// invalid returns a scheduling failure for a request that cannot be served.
func invalid(message string) Result {
	return Result{Reason: ReasonReplicaSchedulingFailure, Message: message}
}

// localityNeedsNode reports whether replicas of a volume with this data
// locality wait until the volume is attached (Longhorn #11007).
func localityNeedsNode(l lhv1.DataLocality) bool {
	return l == lhv1.DataLocalityBestEffort || l == lhv1.DataLocalityStrictLocal
}

// requestSize returns the bytes each new replica requests.
func requestSize(req Request) int64 {
	if req.Size != 0 {
		return req.Size
	}
	return req.Volume.Spec.Size
}

// stage is an anti-affinity stage, Longhorn's order of node sets to try:
// lower stages are tried first and the first with a candidate disk wins.
// Which nodes the later stages hold depends on the anti-affinity settings
// (see view.stageOf).
type stage int

const (
	// stageNewZone: a node in a zone without a replica.
	stageNewZone stage = iota
	// stageNewNode: a node without a replica in a zone with one (zone
	// soft), or a node whose replicas, and its zone's, are all being
	// evicted (zone hard).
	stageNewNode
	// stageUsedNode: a node with a replica (node soft), or one whose
	// replicas are all being evicted (node hard, zone soft).
	stageUsedNode
	stageCount
)

// view is the in-memory state of one Place call.
type view struct {
	req        Request
	size       int64
	nodeSoft   bool
	zoneSoft   bool
	diskSoft   bool
	pinned     string
	local      string
	nodes      []*nodeState
	pinMissing bool

	// nodeReplicas and zoneReplicas count the replicas that count for node
	// and zone anti-affinity; nodeStaying and zoneStaying those of them not
	// being evicted.
	nodeReplicas map[string]int
	nodeStaying  map[string]int
	zoneReplicas map[string]int
	zoneStaying  map[string]int
	// nodeHealthy counts the healthy replicas on each node, for best-effort
	// data locality.
	nodeHealthy map[string]int
}

// nodeState is a candidate node and what fails it regardless of placements.
// It points at the request's node, which Place never modifies.
type nodeState struct {
	*Node
	disks  []*diskState
	static []string
}

// diskState is a candidate disk with the space and replicas counted so far.
// It points at the request's disk, which Place never modifies.
type diskState struct {
	*Disk
	node      *nodeState
	scheduled int64
	available int64
	replicas  int
	static    []string
}

// newView builds the state for req, which precheck accepted.
func newView(req Request) *view {
	spec := req.Volume.Spec
	s := req.Settings
	v := &view{
		req:          req,
		size:         requestSize(req),
		nodeSoft:     SoftAntiAffinity(string(spec.ReplicaSoftAntiAffinity), s.ReplicaSoftAntiAffinity),
		zoneSoft:     SoftAntiAffinity(string(spec.ReplicaZoneSoftAntiAffinity), s.ReplicaZoneSoftAntiAffinity),
		diskSoft:     SoftAntiAffinity(string(spec.ReplicaDiskSoftAntiAffinity), s.ReplicaDiskSoftAntiAffinity),
		pinned:       req.HardNodeAffinity,
		nodeReplicas: map[string]int{},
		nodeStaying:  map[string]int{},
		zoneReplicas: map[string]int{},
		zoneStaying:  map[string]int{},
		nodeHealthy:  map[string]int{},
	}
	switch spec.DataLocality {
	case lhv1.DataLocalityStrictLocal:
		v.pinned = spec.NodeID
	case lhv1.DataLocalityBestEffort:
		v.local = spec.NodeID
	}
	// The states of every node and disk, allocated at once: a placement
	// over a large cluster builds one per node and disk.
	considered := func(n *Node) bool { return v.pinned == "" || n.Name == v.pinned }
	count := 0
	for i := range req.Nodes {
		if considered(&req.Nodes[i]) {
			count += len(req.Nodes[i].Disks)
		}
	}
	nodes := make([]nodeState, 0, len(req.Nodes))
	disks := make([]diskState, 0, count)
	for i := range req.Nodes {
		if n := &req.Nodes[i]; considered(n) {
			nodes = append(nodes, nodeState{})
			disks = v.initNodeState(&nodes[len(nodes)-1], n, disks)
			v.nodes = append(v.nodes, &nodes[len(nodes)-1])
		}
	}
	slices.SortFunc(v.nodes, func(a, b *nodeState) int { return cmp.Compare(a.Name, b.Name) })
	v.pinMissing = v.pinned != "" && len(v.nodes) == 0
	diskReplicas := v.countReplicas()
	for _, n := range v.nodes {
		for _, d := range n.disks {
			d.replicas = diskReplicas[d.UUID]
		}
	}
	return v
}

// countReplicas fills the node, zone and healthy counts from the existing
// replicas and returns the count per disk UUID. As in Longhorn's scheduler,
// a replica counts for node and zone anti-affinity only when it is not
// DiskOnly and its node may take replicas (Ready, Schedulable,
// allowScheduling, and the pinned node when one is); a replica on any other
// node, known or not, counts for disk anti-affinity only.
func (v *view) countReplicas() map[string]int {
	zones := make(map[string]string, len(v.nodes))
	for _, n := range v.nodes {
		if nodeTakesReplicas(*n.Node) {
			zones[n.Name] = n.Zone
		}
	}
	perDisk := map[string]int{}
	for _, r := range v.req.Existing {
		if r.NodeID == "" {
			continue
		}
		if r.Healthy {
			v.nodeHealthy[r.NodeID]++
		}
		if r.DiskUUID != "" {
			perDisk[r.DiskUUID]++
		}
		zone, ok := zones[r.NodeID]
		if r.DiskOnly || !ok {
			continue
		}
		v.nodeReplicas[r.NodeID]++
		v.zoneReplicas[zone]++
		if !r.EvictionRequested {
			v.nodeStaying[r.NodeID]++
			v.zoneStaying[zone]++
		}
	}
	return perDisk
}

// nodeTakesReplicas reports whether Longhorn lists node n among the nodes
// that may take replicas at all (ListSchedulableNodes): Ready, Schedulable
// and allowScheduling. Only replicas on such nodes count for node and zone
// anti-affinity.
func nodeTakesReplicas(n Node) bool {
	return n.Ready && n.Schedulable && n.AllowScheduling
}

// initNodeState sets ns to the state of node n with its disks sorted by
// name, their states appended to disks (whose capacity must hold them, so
// the pointers stay valid), and returns disks; countReplicas fills in the
// disks' replica counts.
func (v *view) initNodeState(ns *nodeState, n *Node, disks []diskState) []diskState {
	*ns = nodeState{Node: n, static: v.nodeFailures(*n), disks: make([]*diskState, 0, len(n.Disks))}
	for i := range n.Disks {
		d := &n.Disks[i]
		disks = append(disks, diskState{
			Disk:      d,
			node:      ns,
			scheduled: d.StorageScheduled,
			available: d.StorageAvailable,
			static:    v.diskStaticFailures(*d),
		})
		ns.disks = append(ns.disks, &disks[len(disks)-1])
	}
	slices.SortFunc(ns.disks, func(a, b *diskState) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.UUID, b.UUID))
	})
	return disks
}

// nodeFailures returns why node n can never take a replica of the volume.
func (v *view) nodeFailures(n Node) []string {
	return NodeFailures(n, v.req.Volume.Spec.NodeSelector, v.req.Settings)
}

// NodeFailures is the one node-eligibility rule (DESIGN §5): why node n can
// never take a replica of a volume with nodeSelector, whatever its disks'
// space; empty when it can.
func NodeFailures(n Node, nodeSelector []string, s settings.Scheduling) []string {
	var reasons []string
	if !n.Ready {
		reasons = append(reasons, "node is not ready")
	}
	if !n.Schedulable {
		reasons = append(reasons, "node is cordoned")
	}
	if !n.AllowScheduling {
		reasons = append(reasons, "scheduling is disabled on the node")
	}
	if n.EvictionRequested {
		reasons = append(reasons, "eviction is requested on the node")
	}
	if r := tagsFailure(n.Tags, nodeSelector, s.AllowEmptyNodeSelectorVolume,
		settings.AllowEmptyNodeSelectorVolume); r != "" {
		reasons = append(reasons, r)
	}
	return reasons
}

// diskStaticFailures returns why disk d can never take a replica of the
// volume, whatever its space.
func (v *view) diskStaticFailures(d Disk) []string {
	return DiskFailuresForVolume(d, v.req.Volume, v.req.Settings)
}

// DiskFailures is DiskFailuresForVolume for a data engine v1 volume with
// diskSelector whose size is not known: it does not check the volume's size
// against the disk's file system.
func DiskFailures(d Disk, diskSelector []string, s settings.Scheduling) []string {
	return DiskFailuresForVolume(d, &lhv1.Volume{Spec: lhv1.VolumeSpec{DiskSelector: diskSelector}}, s)
}

// DiskFailuresForVolume is the one disk-eligibility rule (DESIGN §5): why
// disk d can never take a replica of volume vol, whatever its space; empty
// when it can. It reads the volume's spec.dataEngine (a v1 volume needs a
// filesystem disk, a v2 volume a block disk), spec.size (a v1 volume must
// fit the disk's file system) and spec.diskSelector.
func DiskFailuresForVolume(d Disk, vol *lhv1.Volume, s settings.Scheduling) []string {
	var reasons []string
	engine, want := dataEngine(vol.Spec.DataEngine)
	if t := cmp.Or(d.Type, lhv1.DiskTypeFilesystem); t != want {
		r := fmt.Sprintf("disk type %s does not match the volume's %s", t, want)
		if engine != lhv1.DataEngineTypeV1 {
			r += fmt.Sprintf(" (data engine %s)", engine)
		}
		reasons = append(reasons, r)
	} else if limit, ok := fileSystemLimit(engine, d.FSType); ok && vol.Spec.Size >= limit {
		reasons = append(reasons, fmt.Sprintf("volume size %s does not fit file system %s (limit %s)",
			bytesString(vol.Spec.Size), d.FSType, bytesString(limit)))
	}
	if d.UUID == "" {
		reasons = append(reasons, "disk has no UUID")
	}
	if !d.AllowScheduling {
		reasons = append(reasons, "scheduling is disabled on the disk")
	}
	if d.EvictionRequested {
		reasons = append(reasons, "eviction is requested on the disk")
	}
	if !d.Schedulable {
		reasons = append(reasons, "disk is not schedulable")
	}
	if r := tagsFailure(d.Tags, vol.Spec.DiskSelector, s.AllowEmptyDiskSelectorVolume,
		settings.AllowEmptyDiskSelectorVolume); r != "" {
		reasons = append(reasons, r)
	}
	return reasons
}

// diskFailures returns why disk d cannot take the next replica now.
func (v *view) diskFailures(d *diskState) []string {
	reasons := slices.Clone(d.static)
	if r := v.actualSpaceFailure(d); r != "" {
		reasons = append(reasons, r)
	}
	if !ledger.Fits(d.scheduled, v.size, d.StorageLimit) {
		reasons = append(reasons, fmt.Sprintf("insufficient storage: requested %s, %s usable of limit %s",
			bytesString(v.size), bytesString(d.StorageLimit-d.scheduled), bytesString(d.StorageLimit)))
	}
	return reasons
}

// actualSpaceFailure returns why d fails the actual-space check, or "".
func (v *view) actualSpaceFailure(d *diskState) string {
	pct := v.req.Settings.MinimalAvailablePercentage
	switch {
	case ledger.HasActualSpace(d.available, v.req.ActualSize, d.StorageMaximum, pct):
		return ""
	case d.StorageMaximum <= 0:
		return fmt.Sprintf("disk size is unknown (storageMaximum %d)", d.StorageMaximum)
	default:
		return fmt.Sprintf("insufficient actual space: %s available minus actual size %s must exceed %s (%d%% of maximum %s)",
			bytesString(d.available), bytesString(v.req.ActualSize),
			bytesString(ledger.MinimalAvailable(d.StorageMaximum, pct)), pct, bytesString(d.StorageMaximum))
	}
}

// stageOf returns the anti-affinity stage node n is in now, or why the
// anti-affinity settings allow it in none. These are Longhorn's stages
// (getDiskCandidates): a node in a new zone first; then, with zone
// anti-affinity hard, only a node whose replicas, and its zone's, are all
// being evicted; with zone soft, a new node, then a node holding replicas
// when node anti-affinity is soft or when they are all being evicted.
func (v *view) stageOf(n *nodeState) (stage, string) {
	replicas, staying := v.nodeReplicas[n.Name], v.nodeStaying[n.Name]
	evicted := replicas > 0 && staying == 0
	switch {
	case v.zoneReplicas[n.Zone] == 0:
		return stageNewZone, ""
	case !v.zoneSoft && evicted && v.zoneStaying[n.Zone] == 0:
		return stageNewNode, ""
	case !v.zoneSoft && replicas == 0:
		return 0, fmt.Sprintf("zone %q already holds a replica of the volume and zone anti-affinity is hard", n.Zone)
	case !v.zoneSoft && evicted:
		return 0, fmt.Sprintf("zone %q holds a replica of the volume that is not being evicted and zone anti-affinity is hard", n.Zone)
	case !v.zoneSoft:
		return 0, "node already holds a replica of the volume and zone anti-affinity is hard, which makes node anti-affinity hard"
	case replicas == 0:
		return stageNewNode, ""
	case evicted || v.nodeSoft:
		return stageUsedNode, ""
	default:
		return 0, "node already holds a replica of the volume and node anti-affinity is hard"
	}
}

// stagePreferred says why a disk that may take the replica lost to the
// candidates of stage won.
func stagePreferred(won stage) string {
	if won == stageNewZone {
		return "anti-affinity prefers a node in a zone without a replica of the volume"
	}
	return "anti-affinity prefers a node without a replica of the volume"
}

// evaluation is the verdict on every node and disk for the next replica.
type evaluation struct {
	// candidates are the disks that may take it, in node then disk order.
	candidates []*diskState
	// failures say why every other node and disk may not, sorted.
	failures []Failure
}

// evaluate returns the candidates for the next replica: the disks of the
// first stage that has any after disk anti-affinity.
func (v *view) evaluate() evaluation {
	var ev evaluation
	var stages [stageCount][]*diskState
	for _, n := range v.nodes {
		stages, ev.failures = v.nodeCandidates(n, stages, ev.failures)
	}
	won := stageCount
	for st, cands := range stages {
		if won < stageCount {
			for _, d := range cands {
				ev.failures = append(ev.failures, Failure{Node: d.node.Name, Disk: d.Name, Reasons: []string{stagePreferred(won)}})
			}
			continue
		}
		kept, rejected := v.diskAntiAffinity(cands)
		ev.failures = append(ev.failures, rejected...)
		if len(kept) > 0 {
			ev.candidates, won = kept, stage(st)
		}
	}
	if v.pinMissing {
		ev.failures = append(ev.failures, Failure{Node: v.pinned, Reasons: []string{"node not found"}})
	}
	slices.SortStableFunc(ev.failures, func(a, b Failure) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Disk, b.Disk))
	})
	return ev
}

// nodeCandidates appends the disks of node n that may take the next
// replica to the candidates of its stage, and the failures of the node or
// of its other disks to failures, without allocating per node: a
// placement over a large cluster evaluates every node for every replica.
func (v *view) nodeCandidates(n *nodeState, stages [stageCount][]*diskState, failures []Failure) ([stageCount][]*diskState, []Failure) {
	if len(n.static) > 0 {
		return stages, append(failures, Failure{Node: n.Name, Reasons: n.static})
	}
	st, why := v.stageOf(n)
	if why != "" {
		return stages, append(failures, Failure{Node: n.Name, Reasons: []string{why}})
	}
	if len(n.disks) == 0 {
		return stages, append(failures, Failure{Node: n.Name, Reasons: []string{"node has no disks"}})
	}
	for _, d := range n.disks {
		if reasons := v.diskFailures(d); len(reasons) > 0 {
			failures = append(failures, Failure{Node: n.Name, Disk: d.Name, Reasons: reasons})
			continue
		}
		stages[st] = append(stages[st], d)
	}
	return stages, failures
}

// diskAntiAffinity keeps the disks without a replica of the volume when
// there are any; otherwise all of them when disk anti-affinity is soft, and
// none when it is hard. rejected says why each other disk is not kept.
func (v *view) diskAntiAffinity(cands []*diskState) (kept []*diskState, rejected []Failure) {
	for _, d := range cands {
		if d.replicas == 0 {
			kept = append(kept, d)
		}
	}
	why := "disk already holds a replica of the volume and disk anti-affinity is hard"
	switch {
	case len(kept) == 0 && v.diskSoft:
		return cands, nil
	case len(kept) > 0:
		why = "disk anti-affinity prefers a disk without a replica of the volume"
	}
	for _, d := range cands {
		if d.replicas > 0 {
			rejected = append(rejected, Failure{Node: d.node.Name, Disk: d.Name, Reasons: []string{why}})
		}
	}
	return kept, rejected
}

// choose picks among candidate disks, which are in node then disk order:
// the attached node first for best-effort data locality when it holds no
// healthy replica, then the node with the most usable space over its
// candidate disks, then its disk with the most usable space; ties go to the
// smaller name.
func (v *view) choose(cands []*diskState) *diskState {
	if v.local != "" && v.nodeHealthy[v.local] == 0 {
		local := slices.DeleteFunc(slices.Clone(cands), func(d *diskState) bool { return d.node.Name != v.local })
		if len(local) > 0 {
			cands = local
		}
	}
	// The candidates of one node are next to each other: sum each node's
	// usable space over its run, then pick within the best node's run.
	var best []*diskState
	var bestUsable int64
	for start := 0; start < len(cands); {
		end, usable := start, int64(0)
		for ; end < len(cands) && cands[end].node == cands[start].node; end++ {
			usable = ledger.AddSat(usable, cands[end].usable())
		}
		if best == nil || usable > bestUsable {
			best, bestUsable = cands[start:end], usable
		}
		start = end
	}
	var chosen *diskState
	for _, d := range best {
		if chosen == nil || d.usable() > chosen.usable() {
			chosen = d
		}
	}
	return chosen
}

// commit records a replica placed on d.
func (v *view) commit(d *diskState) {
	d.scheduled = ledger.AddSat(d.scheduled, v.size)
	d.available = ledger.AddSat(d.available, -v.req.ActualSize)
	d.replicas++
	v.nodeReplicas[d.node.Name]++
	v.nodeStaying[d.node.Name]++
	v.zoneReplicas[d.node.Zone]++
	v.zoneStaying[d.node.Zone]++
	v.nodeHealthy[d.node.Name]++
}

// failed returns the result of a call that placed only choices.
func (v *view) failed(choices []Choice, count int, failures []Failure) Result {
	why := "no candidate nodes"
	if len(failures) > 0 {
		parts := make([]string, len(failures))
		for i, f := range failures {
			parts[i] = f.String()
		}
		why = strings.Join(parts, "; ")
	}
	pin := ""
	if v.pinned != "" {
		pin = " (pinned to node " + v.pinned + ")"
	}
	return Result{
		Choices:  choices,
		Reason:   ReasonReplicaSchedulingFailure,
		Message:  fmt.Sprintf("placed %d of %d new replicas of volume %s%s: %s", len(choices), count, v.req.Volume.Name, pin, why),
		Failures: failures,
	}
}

// usable returns the ledger bytes still free on d.
func (d *diskState) usable() int64 {
	return d.StorageLimit - d.scheduled
}

// choice returns the placement on d.
func (d *diskState) choice() Choice {
	return Choice{NodeID: d.node.Name, DiskName: d.Name, DiskUUID: d.UUID, DiskPath: d.Path}
}
