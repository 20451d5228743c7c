package placement_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/longhorn/longhorn-manager/scheduler"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/internal/conditions"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// Units of the generated sizes.
const (
	gib = int64(1) << 30
	tib = int64(1) << 40
)

// goneNode names a node that is not in the cluster: replicas and pins may
// point at it, as they do at a node that was removed.
const goneNode = "gone-node"

// clusterState is one random Longhorn cluster as longhorn-manager v1.12
// writes its objects, and one volume that needs a new replica.
type clusterState struct {
	// settings are Longhorn's Setting objects, name to value.
	settings map[string]string
	// nodes are Longhorn's nodes: spec, and the status the node controller
	// writes (conditions, zone, diskStatus with scheduledReplica).
	nodes []*lhv1.Node
	// cordoned are the nodes whose Kubernetes node is cordoned.
	cordoned map[string]bool
	// volume is the volume to place a replica of.
	volume *lhv1.Volume
	// replicas are the volume's existing replicas.
	replicas []*lhv1.Replica
	// pin is the new replica's spec.hardNodeAffinity ("": none); a
	// strict-local volume's new replica is pinned to its node instead.
	pin string
	// now is when the state was generated; the volume's and replicas'
	// times are relative to it.
	now time.Time
}

// stateGenerator draws cluster states from a random source. Disk
// conditions are the ones Longhorn's node controller computes, with
// Longhorn's own disk check (ReplicaScheduler.IsSchedulableToDisk).
type stateGenerator struct {
	r   *rand.Rand
	rcs *scheduler.ReplicaScheduler
	// failRate is how often, in this state, each thing that can keep a node
	// or disk from taking replicas goes wrong (not ready, cordoned,
	// scheduling disabled, evicting, ...): low in some states so that the
	// anti-affinity stages have candidates to choose from, high in others.
	failRate float64
}

// fails draws whether one thing goes wrong, at the state's failure rate.
func (g *stateGenerator) fails() bool {
	return g.r.Float64() < g.failRate
}

// Tag pools: selectors and tags are drawn from these so that they meet.
func nodeTagPool() []string { return []string{"edge", "fast", "storage"} }
func diskTagPool() []string { return []string{"hdd", "nvme", "ssd"} }

// generate returns a new cluster state at now.
func (g *stateGenerator) generate(now time.Time) *clusterState {
	st := &clusterState{now: now, cordoned: map[string]bool{}}
	g.failRate = pick(g.r, 0.01, 0.05, 0.2)
	st.settings = g.settings()
	st.volume = g.volume()
	names := g.nodes(st)
	g.attach(st, names)
	g.existingReplicas(st)
	for _, n := range st.nodes {
		g.diskStatuses(st, n)
	}
	g.robustness(st)
	return st
}

// settings draws Longhorn's scheduling settings.
func (g *stateGenerator) settings() map[string]string {
	r := g.r
	boolean := func() string { return strconv.FormatBool(r.IntN(2) == 0) }
	mostly := func() string { return strconv.FormatBool(r.IntN(4) > 0) }
	return map[string]string{
		string(lhtypes.SettingNameStorageOverProvisioningPercentage): strconv.Itoa(pick(r, 100, 100, 200, 500, r.IntN(1001))),
		string(lhtypes.SettingNameStorageMinimalAvailablePercentage): strconv.Itoa(pick(r, 25, 25, 0, 10, r.IntN(101))),
		string(lhtypes.SettingNameReplicaSoftAntiAffinity):           boolean(),
		string(lhtypes.SettingNameReplicaZoneSoftAntiAffinity):       boolean(),
		string(lhtypes.SettingNameReplicaDiskSoftAntiAffinity):       boolean(),
		string(lhtypes.SettingNameAllowEmptyNodeSelectorVolume):      mostly(),
		string(lhtypes.SettingNameAllowEmptyDiskSelectorVolume):      mostly(),
		string(lhtypes.SettingNameDisableSchedulingOnCordonedNode):   boolean(),
		string(lhtypes.SettingNameReplicaReplenishmentWaitInterval):  strconv.Itoa(pick(r, 600, 0, 60, 3600)),
		string(lhtypes.SettingNameDefaultInstanceManagerImage):       instanceManagerImage,
	}
}

// volume draws the volume, not yet attached.
func (g *stateGenerator) volume() *lhv1.Volume {
	r := g.r
	size := pick(r, r.Int64N(200*gib)+1, (r.Int64N(500)+1)*gib)
	if r.IntN(12) == 0 { // around the largest ext4 volume, or the smallest volume
		size = pick(r, int64(1), 16*tib-1+r.Int64N(3), 16*tib+r.Int64N(16*tib))
	}
	engine := lhv1.DataEngineTypeV1
	if r.IntN(6) == 0 {
		engine = lhv1.DataEngineTypeV2
	}
	v := &lhv1.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: longhornNamespace},
		Spec: lhv1.VolumeSpec{
			Size: size, NumberOfReplicas: 3, Image: engineImage, DataEngine: engine,
			DataLocality:                pick(r, lhv1.DataLocalityDisabled, lhv1.DataLocalityDisabled, lhv1.DataLocalityBestEffort, lhv1.DataLocalityStrictLocal),
			NodeSelector:                g.selector(nodeTagPool()),
			DiskSelector:                g.selector(diskTagPool()),
			ReplicaSoftAntiAffinity:     pick(r, lhv1.ReplicaSoftAntiAffinityDefault, lhv1.ReplicaSoftAntiAffinityDefault, "", lhv1.ReplicaSoftAntiAffinityEnabled, lhv1.ReplicaSoftAntiAffinityDisabled),
			ReplicaZoneSoftAntiAffinity: pick(r, lhv1.ReplicaZoneSoftAntiAffinityDefault, lhv1.ReplicaZoneSoftAntiAffinityDefault, "", lhv1.ReplicaZoneSoftAntiAffinityEnabled, lhv1.ReplicaZoneSoftAntiAffinityDisabled),
			ReplicaDiskSoftAntiAffinity: pick(r, lhv1.ReplicaDiskSoftAntiAffinityDefault, lhv1.ReplicaDiskSoftAntiAffinityDefault, "", lhv1.ReplicaDiskSoftAntiAffinityEnabled, lhv1.ReplicaDiskSoftAntiAffinityDisabled),
			ReplicaAutoBalance:          lhv1.ReplicaAutoBalanceIgnored,
		},
	}
	if r.IntN(2) == 0 {
		v.Status.ActualSize = r.Int64N(size + 1)
	}
	return v
}

// selector draws a selector: mostly empty, else mostly one tag of pool.
func (g *stateGenerator) selector(pool []string) []string {
	if g.r.IntN(4) > 0 {
		return []string{}
	}
	return g.tags(pool, pick(g.r, 1, 1, 1, 2))
}

// tagged draws the tags of a node or disk: none 40% of the time, else one
// to all of pool; more often than not they include selector.
func (g *stateGenerator) tagged(pool, selector []string) []string {
	var out []string
	if g.r.IntN(5) >= 2 {
		out = g.tags(pool, 1+g.r.IntN(len(pool)))
	}
	if len(selector) > 0 && g.r.IntN(5) < 3 {
		out = append(out, selector...)
		slices.Sort(out)
		out = slices.Compact(out)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// tags draws up to n distinct tags of pool, sorted as Longhorn's webhook
// stores them.
func (g *stateGenerator) tags(pool []string, n int) []string {
	out := slices.Clone(pool)
	g.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	out = out[:min(n, len(out))]
	slices.Sort(out)
	return out
}

// nodes draws 1 to 6 nodes with up to 3 disks each (specs, node
// conditions and zones; disk statuses come later) and returns their names.
func (g *stateGenerator) nodes(st *clusterState) []string {
	r := g.r
	var zones []string
	for i := range r.IntN(4) {
		zones = append(zones, "zone-"+string(rune('a'+i)))
	}
	disableOnCordon := st.settings[string(lhtypes.SettingNameDisableSchedulingOnCordonedNode)] == "true"
	var names []string
	for i := range 1 + r.IntN(6) {
		name := fmt.Sprintf("node-%d", i+1)
		names = append(names, name)
		zone := ""
		if len(zones) > 0 && r.IntN(8) > 0 {
			zone = zones[r.IntN(len(zones))]
		}
		n := &lhv1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: longhornNamespace},
			Spec: lhv1.NodeSpec{
				Name: name, AllowScheduling: !g.fails(), Tags: g.tagged(nodeTagPool(), st.volume.Spec.NodeSelector),
				Disks: map[string]lhv1.DiskSpec{},
			},
			Status: lhv1.NodeStatus{Zone: zone, DiskStatus: map[string]*lhv1.DiskStatus{}},
		}
		if g.fails() { // Longhorn's webhook: only a node without scheduling may be evicted
			n.Spec.EvictionRequested, n.Spec.AllowScheduling = true, false
		}
		ready := !g.fails()
		st.cordoned[name] = g.fails()
		n.Status.Conditions = append(n.Status.Conditions, nodeReadyCondition(ready))
		n.Status.Conditions = append(n.Status.Conditions, nodeSchedulableCondition(st.cordoned[name] && disableOnCordon))
		disks := 1 + r.IntN(3)
		if g.fails() {
			disks = 0
		}
		for j := range disks {
			g.diskSpec(st, n, fmt.Sprintf("disk-%d", j+1))
		}
		st.nodes = append(st.nodes, n)
	}
	return names
}

// nodeReadyCondition returns the node's Ready condition as Longhorn's node
// controller writes it.
func nodeReadyCondition(ready bool) lhv1.Condition {
	if ready {
		return lhv1.Condition{Type: lhv1.NodeConditionTypeReady, Status: lhv1.ConditionStatusTrue}
	}
	return lhv1.Condition{Type: lhv1.NodeConditionTypeReady, Status: lhv1.ConditionStatusFalse,
		Reason: lhv1.NodeConditionReasonKubernetesNodeNotReady}
}

// nodeSchedulableCondition returns the node's Schedulable condition as
// Longhorn's node controller writes it (SetSchedulableCondition): False
// when the Kubernetes node is cordoned and
// disable-scheduling-on-cordoned-node is true.
func nodeSchedulableCondition(cordonedAndDisabled bool) lhv1.Condition {
	if cordonedAndDisabled {
		return lhv1.Condition{Type: lhv1.NodeConditionTypeSchedulable, Status: lhv1.ConditionStatusFalse,
			Reason: lhv1.NodeConditionReasonKubernetesNodeCordoned}
	}
	return lhv1.Condition{Type: lhv1.NodeConditionTypeSchedulable, Status: lhv1.ConditionStatusTrue}
}

// diskSpec adds disk name to n's spec: mostly of the type the volume's
// data engine needs.
func (g *stateGenerator) diskSpec(st *clusterState, n *lhv1.Node, name string) {
	spec := lhv1.DiskSpec{
		Type: lhv1.DiskTypeFilesystem, Path: "/var/lib/longhorn/" + name, DiskDriver: lhv1.DiskDriverNone,
		AllowScheduling: !g.fails(), Tags: g.tagged(diskTagPool(), st.volume.Spec.DiskSelector),
	}
	if (st.volume.Spec.DataEngine == lhv1.DataEngineTypeV2) != g.fails() {
		spec.Type, spec.DiskDriver = lhv1.DiskTypeBlock, lhv1.DiskDriverAuto
	}
	if g.fails() { // Longhorn's webhook: only a disk without scheduling may be evicted
		spec.EvictionRequested, spec.AllowScheduling = true, false
	}
	n.Spec.Disks[name] = spec
	n.Status.DiskStatus[name] = &lhv1.DiskStatus{
		DiskName: name, DiskPath: spec.Path, Type: spec.Type, DiskUUID: n.Name + "-" + name + "-uuid",
		ScheduledReplica: map[string]int64{},
	}
}

// attach attaches the volume (or not) and draws the new replica's pin.
func (g *stateGenerator) attach(st *clusterState, names []string) {
	r := g.r
	if r.IntN(5) > 0 {
		st.volume.Spec.NodeID = pick(r, names[r.IntN(len(names))], names[r.IntN(len(names))], goneNode)
	}
	if st.volume.Spec.DataLocality != lhv1.DataLocalityStrictLocal && r.IntN(6) == 0 {
		st.pin = pick(r, names[r.IntN(len(names))], names[r.IntN(len(names))], goneNode)
	}
}

// existingReplicas draws 0 to 4 replicas of the volume: healthy, new,
// failed (reusable or not), evicted as Longhorn's node controller evicts
// them, some being deleted.
func (g *stateGenerator) existingReplicas(st *clusterState) {
	r := g.r
	for i := range r.IntN(5) {
		rep := newReplica(st.volume, strconv.Itoa(i+1))
		node, disk := g.replicaDisk(st)
		rep.Spec.NodeID, rep.Spec.DiskID = node, disk
		if n := findNode(st.nodes, node); n != nil {
			for name, ds := range n.Status.DiskStatus {
				if ds.DiskUUID == disk {
					rep.Spec.DiskPath = n.Spec.Disks[name].Path
					// Longhorn's node controller asks to evict the replicas
					// of a Ready node or disk under eviction.
					rep.Spec.EvictionRequested = conditions.LonghornTrue(n.Status.Conditions, lhv1.NodeConditionTypeReady) &&
						(n.Spec.EvictionRequested || n.Spec.Disks[name].EvictionRequested)
				}
			}
		}
		if r.IntN(20) == 0 { // automatic eviction of a cordoned node (node-drain-policy)
			rep.Spec.EvictionRequested = true
		}
		healthyAt := st.now.Add(-time.Duration(1+r.IntN(48)) * time.Hour).Format(time.RFC3339)
		failedAt := st.now.Add(-time.Duration(1+r.IntN(60)) * time.Minute).Format(time.RFC3339)
		switch pick(r, "healthy", "healthy", "healthy", "new", "failed", "failed", "failed-unused") {
		case "healthy":
			rep.Spec.HealthyAt, rep.Spec.DesireState = healthyAt, lhv1.InstanceStateRunning
		case "failed":
			rep.Spec.HealthyAt, rep.Spec.FailedAt = healthyAt, failedAt
			rep.Spec.RebuildRetryCount = r.IntN(7)
		case "failed-unused":
			rep.Spec.FailedAt = failedAt
		}
		if r.IntN(15) == 0 {
			rep.DeletionTimestamp = &metav1.Time{Time: st.now}
			rep.Finalizers = []string{lhv1.SchemeGroupVersion.Group}
		}
		st.replicas = append(st.replicas, rep)
	}
}

// replicaDisk draws the node and disk UUID of an existing replica: mostly
// a disk of a node of the cluster, sometimes a lost disk or a removed node.
func (g *stateGenerator) replicaDisk(st *clusterState) (string, string) {
	r := g.r
	if r.IntN(20) == 0 {
		return goneNode, goneNode + "-disk-uuid"
	}
	n := st.nodes[r.IntN(len(st.nodes))]
	uuids := make([]string, 0, len(n.Status.DiskStatus))
	for _, name := range slices.Sorted(maps.Keys(n.Status.DiskStatus)) {
		uuids = append(uuids, n.Status.DiskStatus[name].DiskUUID)
	}
	if len(uuids) == 0 || r.IntN(20) == 0 {
		return n.Name, n.Name + "-lost-disk-uuid"
	}
	return n.Name, uuids[r.IntN(len(uuids))]
}

// diskStatuses fills the status of n's disks as Longhorn's disk monitor and
// node controller write it: size and free space, the replicas scheduled
// there (the volume's and others'), and the Ready and Schedulable
// conditions. Sizes are drawn near the space checks' boundaries often.
func (g *stateGenerator) diskStatuses(st *clusterState, n *lhv1.Node) {
	r := g.r
	nodeReady := conditions.LonghornTrue(n.Status.Conditions, lhv1.NodeConditionTypeReady)
	overProvisioning, _ := strconv.ParseInt(st.settings[string(lhtypes.SettingNameStorageOverProvisioningPercentage)], 10, 64)
	minimal, _ := strconv.ParseInt(st.settings[string(lhtypes.SettingNameStorageMinimalAvailablePercentage)], 10, 64)
	for _, name := range slices.Sorted(maps.Keys(n.Spec.Disks)) {
		spec, ds := n.Spec.Disks[name], n.Status.DiskStatus[name]
		ds.StorageMaximum = pick(r, r.Int64N(2*tib)+gib, (r.Int64N(2000)+1)*gib, tib<<(r.IntN(7)))
		if spec.Type == lhv1.DiskTypeFilesystem {
			ds.FSType = pick(r, "ext4", "ext4", "xfs")
		}
		spec.StorageReserved = pick(r, 0, 0, r.Int64N(ds.StorageMaximum/2+1))
		if g.fails() {
			spec.StorageReserved = ds.StorageMaximum - gib + r.Int64N(2*gib)
		}
		n.Spec.Disks[name] = spec
		ds.StorageAvailable = ds.StorageMaximum - r.Int64N(ds.StorageMaximum/2+1)
		if g.fails() {
			ds.StorageAvailable = r.Int64N(ds.StorageMaximum + 1)
		}
		if r.IntN(5) == 0 { // at the actual-space boundary
			ds.StorageAvailable = max(0, ledger.MinimalAvailable(ds.StorageMaximum, minimal)+st.volume.Status.ActualSize+r.Int64N(3)-1)
		}
		var own int64
		for _, rep := range st.replicas {
			if rep.Spec.NodeID == n.Name && rep.Spec.DiskID == ds.DiskUUID {
				ds.ScheduledReplica[rep.Name] = rep.Spec.VolumeSize
				own += rep.Spec.VolumeSize
			}
		}
		limit := ledger.Limit(ds.StorageMaximum, spec.StorageReserved, overProvisioning)
		others := r.Int64N(limit/2 + 1)
		if g.fails() {
			others = r.Int64N(limit + limit/5 + 1)
		}
		if r.IntN(5) == 0 { // at the scheduling-space boundary
			others = limit - own - st.volume.Spec.Size + r.Int64N(3) - 1
		}
		if others > 0 {
			ds.ScheduledReplica["other-volume-r-"+name] = others
			own += others
		}
		ds.StorageScheduled = own
		g.diskConditions(st, n, name, nodeReady)
	}
}

// diskConditions sets the disk's Ready and Schedulable conditions as
// Longhorn's node controller does: not Ready (and not schedulable, nothing
// scheduled) when its node is not Ready or the disk monitor cannot read
// it; otherwise Schedulable unless Longhorn's disk check with nothing more
// to place fails (DiskPressure). Now and then the Schedulable condition is
// stale: it still says what it said before the last change of space.
func (g *stateGenerator) diskConditions(st *clusterState, n *lhv1.Node, name string, nodeReady bool) {
	r := g.r
	spec, ds := n.Spec.Disks[name], n.Status.DiskStatus[name]
	ready := nodeReady && !g.fails()
	if !ready {
		reason := lhv1.DiskConditionReasonNodeNotReady
		if nodeReady {
			reason = lhv1.DiskConditionReasonNoDiskInfo
			if r.IntN(2) == 0 {
				ds.DiskUUID = ""
			}
			ds.StorageMaximum, ds.StorageAvailable = 0, 0
		}
		ds.StorageScheduled, ds.ScheduledReplica = 0, map[string]int64{}
		ds.Conditions = []lhv1.Condition{
			{Type: lhv1.DiskConditionTypeReady, Status: lhv1.ConditionStatusFalse, Reason: reason},
			{Type: lhv1.DiskConditionTypeSchedulable, Status: lhv1.ConditionStatusFalse, Reason: lhv1.DiskConditionReasonDiskNotReady},
		}
		return
	}
	overProvisioning, _ := strconv.ParseInt(st.settings[string(lhtypes.SettingNameStorageOverProvisioningPercentage)], 10, 64)
	minimal, _ := strconv.ParseInt(st.settings[string(lhtypes.SettingNameStorageMinimalAvailablePercentage)], 10, 64)
	schedulable, _ := g.rcs.IsSchedulableToDisk(0, 0, &scheduler.DiskSchedulingInfo{
		DiskUUID: ds.DiskUUID, StorageAvailable: ds.StorageAvailable, StorageMaximum: ds.StorageMaximum,
		StorageReserved: spec.StorageReserved, StorageScheduled: ds.StorageScheduled,
		OverProvisioningPercentage: overProvisioning, MinimalAvailablePercentage: minimal,
	})
	if r.IntN(20) == 0 { // stale
		schedulable = !schedulable
	}
	sched := lhv1.Condition{Type: lhv1.DiskConditionTypeSchedulable, Status: lhv1.ConditionStatusTrue}
	if !schedulable {
		sched.Status, sched.Reason = lhv1.ConditionStatusFalse, lhv1.DiskConditionReasonDiskPressure
	}
	ds.Conditions = []lhv1.Condition{{Type: lhv1.DiskConditionTypeReady, Status: lhv1.ConditionStatusTrue}, sched}
}

// robustness sets the volume's robustness from its replicas, as Longhorn's
// volume controller does most of the time, and when degraded, since when:
// well before or well after the replenishment wait has passed.
func (g *stateGenerator) robustness(st *clusterState) {
	r := g.r
	var healthy, failed int
	for _, rep := range st.replicas {
		switch {
		case rep.Spec.FailedAt != "":
			failed++
		case rep.Spec.HealthyAt != "":
			healthy++
		}
	}
	rob := lhv1.VolumeRobustnessHealthy
	switch {
	case len(st.replicas) == 0:
		rob = pick(r, lhv1.VolumeRobustness(""), lhv1.VolumeRobustnessUnknown)
	case healthy == 0:
		rob = lhv1.VolumeRobustnessFaulted
	case failed > 0:
		rob = lhv1.VolumeRobustnessDegraded
	}
	if r.IntN(10) == 0 {
		rob = pick(r, lhv1.VolumeRobustnessHealthy, lhv1.VolumeRobustnessDegraded, lhv1.VolumeRobustnessFaulted, lhv1.VolumeRobustnessUnknown)
	}
	st.volume.Status.Robustness = rob
	if rob != lhv1.VolumeRobustnessDegraded {
		return
	}
	wait := st.replenishWait()
	margin := time.Minute + time.Duration(r.Int64N(int64(2*time.Hour)))
	if r.IntN(2) == 0 {
		margin = -margin // still waiting
	}
	st.volume.Status.LastDegradedAt = st.now.Add(-wait - margin).Format(time.RFC3339)
}

// replenishWait returns the setting replica-replenishment-wait-interval.
func (st *clusterState) replenishWait() time.Duration {
	s, _ := strconv.Atoi(st.settings[string(lhtypes.SettingNameReplicaReplenishmentWaitInterval)])
	return time.Duration(s) * time.Second
}

// describe returns the state for people: settings, volume, nodes with their
// disks, replicas.
func (st *clusterState) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "settings:")
	for _, name := range slices.Sorted(maps.Keys(st.settings)) {
		if name != string(lhtypes.SettingNameDefaultInstanceManagerImage) {
			fmt.Fprintf(&b, " %s=%s", name, st.settings[name])
		}
	}
	v := st.volume
	fmt.Fprintf(&b, "\nvolume %s: size %d, actualSize %d, dataEngine %s, dataLocality %s, nodeID %q, nodeSelector %v, diskSelector %v,"+
		" anti-affinity overrides node=%q zone=%q disk=%q, robustness %q, lastDegradedAt %s",
		v.Name, v.Spec.Size, v.Status.ActualSize, v.Spec.DataEngine, v.Spec.DataLocality, v.Spec.NodeID, v.Spec.NodeSelector, v.Spec.DiskSelector,
		v.Spec.ReplicaSoftAntiAffinity, v.Spec.ReplicaZoneSoftAntiAffinity, v.Spec.ReplicaDiskSoftAntiAffinity,
		v.Status.Robustness, st.relative(v.Status.LastDegradedAt))
	fmt.Fprintf(&b, "\nnew replica's hardNodeAffinity %q", st.pin)
	for _, n := range st.nodes {
		fmt.Fprintf(&b, "\nnode %s: zone %q, Ready=%v, Schedulable=%v (cordoned %v), allowScheduling %v, evictionRequested %v, tags %v",
			n.Name, n.Status.Zone, conditions.LonghornTrue(n.Status.Conditions, lhv1.NodeConditionTypeReady),
			conditions.LonghornTrue(n.Status.Conditions, lhv1.NodeConditionTypeSchedulable), st.cordoned[n.Name],
			n.Spec.AllowScheduling, n.Spec.EvictionRequested, n.Spec.Tags)
		for _, name := range slices.Sorted(maps.Keys(n.Spec.Disks)) {
			spec, ds := n.Spec.Disks[name], n.Status.DiskStatus[name]
			fmt.Fprintf(&b, "\n  disk %s: uuid %q, type %s, fsType %q, allowScheduling %v, evictionRequested %v, tags %v,"+
				" Ready=%v, Schedulable=%v, maximum %d, available %d, reserved %d, scheduled %d %v",
				name, ds.DiskUUID, spec.Type, ds.FSType, spec.AllowScheduling, spec.EvictionRequested, spec.Tags,
				conditions.LonghornTrue(ds.Conditions, lhv1.DiskConditionTypeReady), conditions.LonghornTrue(ds.Conditions, lhv1.DiskConditionTypeSchedulable),
				ds.StorageMaximum, ds.StorageAvailable, spec.StorageReserved, ds.StorageScheduled, ds.ScheduledReplica)
		}
	}
	for _, rep := range st.replicas {
		fmt.Fprintf(&b, "\nreplica %s: node %q, disk %q, healthyAt %s, failedAt %s, rebuildRetryCount %d, evictionRequested %v, deleting %v",
			rep.Name, rep.Spec.NodeID, rep.Spec.DiskID, st.relative(rep.Spec.HealthyAt), st.relative(rep.Spec.FailedAt),
			rep.Spec.RebuildRetryCount, rep.Spec.EvictionRequested, rep.DeletionTimestamp != nil)
	}
	return b.String()
}

// relative returns an RFC 3339 time of the state as a duration before now,
// or "-" when empty.
func (st *clusterState) relative(at string) string {
	if at == "" {
		return "-"
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return strconv.Quote(at)
	}
	return st.now.Sub(t).Round(time.Second).String() + " ago"
}

// findNode returns the node named name, or nil.
func findNode(nodes []*lhv1.Node, name string) *lhv1.Node {
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// pick returns one of choices, drawn evenly.
func pick[T any](r *rand.Rand, choices ...T) T {
	return choices[r.IntN(len(choices))]
}
