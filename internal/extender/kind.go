package extender

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

// The StorageClass parameters of Longhorn v1.12's CSI driver that shape
// where a new volume's replicas go (csi/util.go getVolumeOptions).
const (
	paramDataLocality                = "dataLocality"
	paramNumberOfReplicas            = "numberOfReplicas"
	paramReplicaSoftAntiAffinity     = "replicaSoftAntiAffinity"
	paramReplicaZoneSoftAntiAffinity = "replicaZoneSoftAntiAffinity"
	paramReplicaDiskSoftAntiAffinity = "replicaDiskSoftAntiAffinity"
	paramNodeSelector                = "nodeSelector"
	paramDiskSelector                = "diskSelector"
	paramDataEngine                  = "dataEngine"
	paramMigratable                  = "migratable"
)

// Longhorn v1.12's defaults for a volume whose StorageClass leaves the
// parameter out: its admission webhook fills spec.numberOfReplicas from the
// default-replica-count setting (default 3) and spec.dataLocality from the
// default-data-locality setting (default disabled). The default
// StorageClass Longhorn installs says the same explicitly
// (numberOfReplicas "3", dataLocality "disabled").
const (
	defaultNumberOfReplicas = 3
	defaultDataLocality     = lhv1.DataLocalityDisabled
)

// kind is how Longhorn places a volume's replicas with respect to the node
// its pod runs on.
type kind struct {
	// DataLocality is the volume's spec.dataLocality.
	DataLocality lhv1.DataLocality
	// NumberOfReplicas is the volume's spec.numberOfReplicas.
	NumberOfReplicas int
	// The volume's anti-affinity overrides ("" or "ignored": the setting).
	ReplicaSoftAntiAffinity, ReplicaZoneSoftAntiAffinity, ReplicaDiskSoftAntiAffinity string
	// DataEngine is the volume's spec.dataEngine ("" is v1): the kind of
	// disk its replicas need.
	DataEngine lhv1.DataEngineType
}

// volumeKind returns the kind of Longhorn's volume vol, with Longhorn's
// defaults where its webhook would have filled them in.
func volumeKind(vol *lhv1.Volume) kind {
	k := kind{DataLocality: vol.Spec.DataLocality, NumberOfReplicas: vol.Spec.NumberOfReplicas,
		ReplicaSoftAntiAffinity:     string(vol.Spec.ReplicaSoftAntiAffinity),
		ReplicaZoneSoftAntiAffinity: string(vol.Spec.ReplicaZoneSoftAntiAffinity),
		ReplicaDiskSoftAntiAffinity: string(vol.Spec.ReplicaDiskSoftAntiAffinity),
		DataEngine:                  vol.Spec.DataEngine}
	if k.DataLocality == "" {
		k.DataLocality = defaultDataLocality
	}
	if k.NumberOfReplicas <= 0 {
		k.NumberOfReplicas = defaultNumberOfReplicas
	}
	return k
}

// classKind returns the kind of the volume Longhorn's CSI driver creates
// for a claim of a StorageClass with params, reading them as the driver
// does: a value it refuses is an error (the claim would never be
// provisioned), numberOfReplicas 0 or missing and dataLocality missing take
// Longhorn's defaults.
func classKind(params map[string]string) (kind, error) {
	k := kind{DataLocality: defaultDataLocality, NumberOfReplicas: defaultNumberOfReplicas,
		ReplicaSoftAntiAffinity:     params[paramReplicaSoftAntiAffinity],
		ReplicaZoneSoftAntiAffinity: params[paramReplicaZoneSoftAntiAffinity],
		ReplicaDiskSoftAntiAffinity: params[paramReplicaDiskSoftAntiAffinity],
		DataEngine:                  lhv1.DataEngineType(params[paramDataEngine])}
	if v, ok := params[paramNumberOfReplicas]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return kind{}, fmt.Errorf("parameter %s %q is not a replica count", paramNumberOfReplicas, v)
		}
		if n > 0 {
			k.NumberOfReplicas = n
		}
	}
	if v, ok := params[paramDataLocality]; ok {
		switch l := lhv1.DataLocality(v); l {
		case lhv1.DataLocalityDisabled, lhv1.DataLocalityBestEffort, lhv1.DataLocalityStrictLocal:
			k.DataLocality = l
		default:
			return kind{}, fmt.Errorf("parameter %s %q is not one of Longhorn's data localities (%s, %s, %s)", paramDataLocality, v,
				lhv1.DataLocalityDisabled, lhv1.DataLocalityBestEffort, lhv1.DataLocalityStrictLocal)
		}
	}
	return k, nil
}

// needsLocalSpace reports whether volume v needs one replica's space on
// its pod's node: true for data locality strict-local (Longhorn attaches it
// only where its one replica is) and best-effort (Longhorn places a replica
// on the attached node when a disk there can take it), false for disabled
// (Longhorn places its replicas wherever its scheduler finds room, whatever
// the pod's node), and false whatever its data locality for a
// ReadWriteMany volume (Longhorn attaches it on its share manager's node,
// not the pod's) and for a volume whose local replica Longhorn will not
// create (v.NoLocalReplica): a reservation there would never be taken
// over. This is the one rule by which the extender tells the kinds apart:
// a volume it rejects takes no space on the node, removes no node for lack
// of local space, gets no reservation and keeps no pod on the node that
// holds its replicas.
func needsLocalSpace(v podVolume) bool {
	if v.Shared || v.NoLocalReplica != "" {
		return false
	}
	switch v.DataLocality {
	case lhv1.DataLocalityBestEffort, lhv1.DataLocalityStrictLocal:
		return true
	default:
		return false
	}
}

// pinnedElsewhere says why a strict-local volume v cannot be used on node
// because its replica is on another node (Longhorn refuses to move a
// strict-local volume), or "".
func pinnedElsewhere(v podVolume, node string) string {
	if v.DataLocality != lhv1.DataLocalityStrictLocal || len(v.ReplicaNodes) == 0 || v.ReplicaNodes[node] {
		return ""
	}
	nodes := make([]string, 0, len(v.ReplicaNodes))
	for n := range v.ReplicaNodes {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	return fmt.Sprintf("volume %s: data locality is %s and its replica is on node %s: Longhorn does not move it to another node",
		v.Name, v.DataLocality, strings.Join(nodes, ", "))
}

// replicasElsewhere returns how many of v's replicas Longhorn still has to
// place off node once one is on node: numberOfReplicas − 1, less the
// replicas it has on other nodes already (Longhorn removes the surplus
// once the local one is there). 0 for strict-local, whose one replica is
// the local one.
func replicasElsewhere(v podVolume, node string) int {
	if v.DataLocality == lhv1.DataLocalityStrictLocal {
		return 0
	}
	n := v.NumberOfReplicas - 1
	for _, r := range v.Replicas {
		if r.NodeID != node {
			n--
		}
	}
	return max(n, 0)
}

// mayNeedRoomElsewhere reports whether v may have replicas to place off
// some node (replicasElsewhere is above 0 for some node): roomElsewhere
// has nothing to check for a pod without such a volume.
func mayNeedRoomElsewhere(v podVolume) bool {
	return v.DataLocality != lhv1.DataLocalityStrictLocal && v.NumberOfReplicas > 1
}

// roomElsewhere says why Longhorn could not place the replicas of vols
// that go off node (replicasElsewhere) under its anti-affinity rules, or
// "" when it could. nodes are every Longhorn node with its disks' ledger
// space; each volume is checked on its own, with one replica of it on
// node, by placement.Place (the one eligibility rule), so no pod is kept
// off a node because the cluster lacks room it would never get there. It
// is a check, not a reservation: it reads the ledgers only (not the pods in
// flight, nor the pod's volumes together), and the ledgers and the
// admission gate hold the space when Longhorn places the replicas. The
// local replica's own space is not counted on its node, which matters only
// when soft node anti-affinity lets another replica share that node.
//
// seen carries, across the candidate nodes of one filter, a placement
// already found for each volume (nil: none kept): it answers for another
// candidate without placing again when that candidate is not among its
// nodes, and not in its zones unless zone anti-affinity is soft. Longhorn's
// scheduler then finds room as well, since it places greedily one replica
// per step and every disk of that placement is still there. Without it a
// filter would place every volume once per candidate over every node of
// the cluster.
func roomElsewhere(vols []podVolume, node string, nodes []placement.Node, sched settings.Scheduling, seen placements) string {
	for _, v := range vols {
		count := replicasElsewhere(v, node)
		if count == 0 {
			continue
		}
		if seen.holds(v, node, count) {
			continue
		}
		existing := []placement.Replica{{NodeID: node, Healthy: true}}
		for _, r := range v.Replicas {
			if r.NodeID != node {
				existing = append(existing, r)
			}
		}
		place := func(count int) placement.Result {
			return placement.Place(placement.Request{
				Volume: &lhv1.Volume{ObjectMeta: metav1.ObjectMeta{Name: v.Name}, Spec: lhv1.VolumeSpec{
					Size: v.Size, NumberOfReplicas: v.NumberOfReplicas, DataLocality: v.DataLocality, NodeID: node,
					NodeSelector: v.NodeSelector, DiskSelector: v.DiskSelector,
					ReplicaSoftAntiAffinity:     lhv1.ReplicaSoftAntiAffinity(v.ReplicaSoftAntiAffinity),
					ReplicaZoneSoftAntiAffinity: lhv1.ReplicaZoneSoftAntiAffinity(v.ReplicaZoneSoftAntiAffinity),
					ReplicaDiskSoftAntiAffinity: lhv1.ReplicaDiskSoftAntiAffinity(v.ReplicaDiskSoftAntiAffinity),
				}},
				Count:    count,
				Existing: existing,
				Nodes:    nodes,
				Settings: sched,
			})
		}
		// One replica more than needed, where the cluster has room for it,
		// keeps the placement valid for the candidate nodes it uses too:
		// without one of its nodes, it still places count replicas.
		res := place(count + 1)
		if len(res.Choices) <= count {
			res = place(count)
		}
		if len(res.Choices) < count {
			why := res.Message
			if len(res.Failures) > 0 {
				parts := make([]string, len(res.Failures))
				for i, f := range res.Failures {
					parts[i] = f.String()
				}
				why = strings.Join(parts, "; ")
			}
			return fmt.Sprintf("volume %s: Longhorn would find room for %d of its %d other replicas (%s)",
				v.Name, len(res.Choices), count, why)
		}
		seen.keep(v, res.Choices, placement.SoftAntiAffinity(v.ReplicaZoneSoftAntiAffinity, sched.ReplicaZoneSoftAntiAffinity))
	}
	return ""
}

// placements are the placements roomElsewhere found in one filter, by
// placementKey, with the zones of the cluster's nodes.
type placements struct {
	byVolume map[string]found
	zones    map[string]string
}

// placementKey is what a placement of v's other replicas depends on besides
// the cluster: a volume with replicas placed is its own, and new volumes of
// one shape (size, replicas, data locality, selectors, anti-affinity and
// data engine: a StatefulSet's claims of one class and size) share one, as
// placement.Place reads nothing else of a volume.
func placementKey(v podVolume) string {
	switch {
	case v.placeKey != "":
		return v.placeKey
	case len(v.Replicas) > 0:
		return "volume " + v.Name
	}
	return fmt.Sprintf("new %d %d %s %q %q %s %s %s %s", v.Size, v.NumberOfReplicas, v.DataLocality, v.NodeSelector, v.DiskSelector,
		v.ReplicaSoftAntiAffinity, v.ReplicaZoneSoftAntiAffinity, v.ReplicaDiskSoftAntiAffinity, v.DataEngine)
}

// found is one placement of a volume's replicas off a candidate node: how
// many replicas it places, how many on each node, and in which zones.
type found struct {
	count    int
	nodes    map[string]int
	zones    map[string]bool
	zoneSoft bool
}

// newPlacements returns an empty set of placements over nodes.
func newPlacements(nodes []placement.Node) placements {
	zones := make(map[string]string, len(nodes))
	for _, n := range nodes {
		zones[n.Name] = n.Zone
	}
	return placements{byVolume: map[string]found{}, zones: zones}
}

// holds reports whether a placement kept for v stays valid, with v's
// local replica on node, for count replicas elsewhere: without its
// replicas on node, it still places count, and, when zone anti-affinity is
// hard, in zones other than node's (a placement under hard zone
// anti-affinity uses each zone once, so dropping node's replicas drops its
// zone).
func (p placements) holds(v podVolume, node string, count int) bool {
	f, ok := p.byVolume[placementKey(v)]
	if !ok {
		return false
	}
	if on := f.nodes[node]; on > 0 {
		return f.count-on >= count
	}
	return f.count >= count && (f.zoneSoft || !f.zones[p.zones[node]])
}

// keep records choices, a placement of v's replicas off a candidate node.
func (p placements) keep(v podVolume, choices []placement.Choice, zoneSoft bool) {
	if p.byVolume == nil {
		return
	}
	key := placementKey(v)
	if _, ok := p.byVolume[key]; ok {
		return
	}
	f := found{count: len(choices), nodes: map[string]int{}, zones: map[string]bool{}, zoneSoft: zoneSoft}
	for _, c := range choices {
		f.nodes[c.NodeID]++
		f.zones[p.zones[c.NodeID]] = true
	}
	p.byVolume[key] = f
}
