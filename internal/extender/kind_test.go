package extender

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// longhornDefaultClass is the parameters of the default StorageClass
// "longhorn" of Longhorn v1.12's chart (its longhorn-storageclass
// ConfigMap) at the chart's default values.
var longhornDefaultClass = map[string]string{
	"numberOfReplicas":    "3",
	"staleReplicaTimeout": "30",
	"fromBackup":          "",
	"fsType":              "ext4",
	"mkfsParams":          "",
	"dataLocality":        "disabled",
}

// TestKindDecision is the extender's reading of a volume's kind and what it
// makes of it: from the StorageClass parameters of an unbound claim as
// Longhorn's CSI driver reads them, or from the Longhorn Volume of a bound
// one, with Longhorn v1.12's defaults where they are missing; only
// strict-local and best-effort volumes need space on the pod's node.
func TestKindDecision(t *testing.T) {
	volume := func(locality lhv1.DataLocality, replicas int) *lhv1.Volume {
		return testenv.Volume("longhorn-system", "pvc-1", testenv.VolumeFixture{Size: gi, Replicas: replicas, DataLocality: locality})
	}
	for _, tc := range []struct {
		name      string
		params    map[string]string // an unbound claim's class, when vol is nil
		vol       *lhv1.Volume
		want      kind
		wantLocal bool
		wantErr   string
	}{
		{name: "Longhorn's default class", params: longhornDefaultClass,
			want: kind{DataLocality: lhv1.DataLocalityDisabled, NumberOfReplicas: 3}},
		{name: "class without parameters", params: nil,
			want: kind{DataLocality: lhv1.DataLocalityDisabled, NumberOfReplicas: 3}},
		{name: "class with numberOfReplicas 0 takes the default", params: map[string]string{"numberOfReplicas": "0"},
			want: kind{DataLocality: lhv1.DataLocalityDisabled, NumberOfReplicas: 3}},
		{name: "best-effort class", params: map[string]string{"numberOfReplicas": "2", "dataLocality": "best-effort"},
			want: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 2}, wantLocal: true},
		{name: "strict-local class", params: map[string]string{"numberOfReplicas": "1", "dataLocality": "strict-local"},
			want: kind{DataLocality: lhv1.DataLocalityStrictLocal, NumberOfReplicas: 1}, wantLocal: true},
		{name: "best-effort class without numberOfReplicas", params: map[string]string{"dataLocality": "best-effort"},
			want: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 3}, wantLocal: true},
		{name: "class with anti-affinity overrides",
			params: map[string]string{"dataLocality": "best-effort", "replicaSoftAntiAffinity": "enabled",
				"replicaZoneSoftAntiAffinity": "disabled", "replicaDiskSoftAntiAffinity": "ignored"},
			want: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 3, ReplicaSoftAntiAffinity: "enabled",
				ReplicaZoneSoftAntiAffinity: "disabled", ReplicaDiskSoftAntiAffinity: "ignored"}, wantLocal: true},
		{name: "v2 data engine class", params: map[string]string{"dataLocality": "best-effort", "dataEngine": "v2"},
			want: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 3, DataEngine: lhv1.DataEngineTypeV2}, wantLocal: true},
		{name: "class with an unknown locality", params: map[string]string{"dataLocality": "local"},
			wantErr: `parameter dataLocality "local" is not one of Longhorn's data localities`},
		{name: "class with an empty locality", params: map[string]string{"dataLocality": ""},
			wantErr: `parameter dataLocality "" is not one of Longhorn's data localities`},
		{name: "class with a negative replica count", params: map[string]string{"numberOfReplicas": "-1"},
			wantErr: `parameter numberOfReplicas "-1" is not a replica count`},
		{name: "class with a replica count that is no number", params: map[string]string{"numberOfReplicas": "two"},
			wantErr: `parameter numberOfReplicas "two" is not a replica count`},
		{name: "disabled volume", vol: volume(lhv1.DataLocalityDisabled, 3),
			want: kind{DataLocality: lhv1.DataLocalityDisabled, NumberOfReplicas: 3, ReplicaSoftAntiAffinity: "ignored",
				ReplicaZoneSoftAntiAffinity: "ignored", ReplicaDiskSoftAntiAffinity: "ignored", DataEngine: lhv1.DataEngineTypeV1}},
		{name: "best-effort volume", vol: volume(lhv1.DataLocalityBestEffort, 2),
			want: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 2, ReplicaSoftAntiAffinity: "ignored",
				ReplicaZoneSoftAntiAffinity: "ignored", ReplicaDiskSoftAntiAffinity: "ignored", DataEngine: lhv1.DataEngineTypeV1}, wantLocal: true},
		{name: "strict-local volume", vol: volume(lhv1.DataLocalityStrictLocal, 1),
			want: kind{DataLocality: lhv1.DataLocalityStrictLocal, NumberOfReplicas: 1, ReplicaSoftAntiAffinity: "ignored",
				ReplicaZoneSoftAntiAffinity: "ignored", ReplicaDiskSoftAntiAffinity: "ignored", DataEngine: lhv1.DataEngineTypeV1}, wantLocal: true},
		{name: "volume without locality or count (written before Longhorn's webhook)", vol: &lhv1.Volume{},
			want: kind{DataLocality: lhv1.DataLocalityDisabled, NumberOfReplicas: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got kind
			var err error
			if tc.vol != nil {
				got = volumeKind(tc.vol)
			} else {
				got, err = classKind(tc.params)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("kind = %+v, want %+v", got, tc.want)
			}
			if local := needsLocalSpace(podVolume{kind: got}); local != tc.wantLocal {
				t.Errorf("needsLocalSpace = %v, want %v", local, tc.wantLocal)
			}
		})
	}
}

func TestReplicasElsewhere(t *testing.T) {
	on := func(nodes ...string) []placement.Replica {
		var out []placement.Replica
		for _, n := range nodes {
			out = append(out, placement.Replica{NodeID: n, Healthy: true})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		locality lhv1.DataLocality
		replicas int
		existing []placement.Replica
		want     int
	}{
		{"new best-effort volume of 3", lhv1.DataLocalityBestEffort, 3, nil, 2},
		{"new best-effort volume of 1", lhv1.DataLocalityBestEffort, 1, nil, 0},
		{"best-effort volume with one replica elsewhere", lhv1.DataLocalityBestEffort, 2, on("b"), 0},
		{"best-effort volume with its replicas elsewhere (the surplus is removed)", lhv1.DataLocalityBestEffort, 2, on("b", "c"), 0},
		{"best-effort volume of 3 with one replica here", lhv1.DataLocalityBestEffort, 3, on("a"), 2},
		{"best-effort volume of 3 with one here and one elsewhere", lhv1.DataLocalityBestEffort, 3, on("a", "b"), 1},
		{"strict-local volume", lhv1.DataLocalityStrictLocal, 1, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := podVolume{Name: "v", Size: gi, Replicas: tc.existing, kind: kind{DataLocality: tc.locality, NumberOfReplicas: tc.replicas}}
			if got := replicasElsewhere(v, "a"); got != tc.want {
				t.Errorf("replicasElsewhere on node a = %d, want %d", got, tc.want)
			}
			// A volume the evaluator asks no room elsewhere for has none
			// to place off any node.
			for _, node := range []string{"a", "b", "c", "d"} {
				if got := replicasElsewhere(v, node); got > 0 && !mayNeedRoomElsewhere(v) {
					t.Errorf("replicasElsewhere on node %s = %d, but mayNeedRoomElsewhere is false", node, got)
				}
			}
		})
	}
}

// TestRoomElsewhere: a node where a best-effort volume's local replica fits
// is kept only when Longhorn's placement finds room for its other replicas
// on other nodes, under the anti-affinity rules.
func TestRoomElsewhere(t *testing.T) {
	cluster := func(zones map[string]string, free map[string]int64) []placement.Node {
		var out []placement.Node
		for _, name := range []string{"a", "b", "c"} {
			if _, ok := free[name]; !ok {
				continue
			}
			n, ledgers := testNode(name, []int64{100 * gi}, []int64{100*gi - free[name]})
			n.Status.Zone = zones[name]
			out = append(out, readNode(n, ledgers).placement)
		}
		return out
	}
	vol := func(locality lhv1.DataLocality, replicas int, size int64) podVolume {
		return podVolume{Name: "pvc-1", Size: size, ReplicaNodes: map[string]bool{},
			kind: kind{DataLocality: locality, NumberOfReplicas: replicas}}
	}
	sched := settings.Default()
	for _, tc := range []struct {
		name  string
		vol   podVolume
		nodes []placement.Node
		want  string // in the reason; "" for room
	}{
		{name: "two replicas, a second node with room", vol: vol(lhv1.DataLocalityBestEffort, 2, 50*gi),
			nodes: cluster(nil, map[string]int64{"a": 100 * gi, "b": 60 * gi})},
		{name: "two replicas, one node", vol: vol(lhv1.DataLocalityBestEffort, 2, 50*gi),
			nodes: cluster(nil, map[string]int64{"a": 100 * gi}),
			want:  "node already holds a replica of the volume and node anti-affinity is hard"},
		{name: "two replicas, the second node full", vol: vol(lhv1.DataLocalityBestEffort, 2, 50*gi),
			nodes: cluster(nil, map[string]int64{"a": 100 * gi, "b": 40 * gi}),
			want:  "b/disk-1: insufficient storage: requested 50Gi, 40Gi usable"},
		{name: "three replicas, two other nodes", vol: vol(lhv1.DataLocalityBestEffort, 3, 50*gi),
			nodes: cluster(nil, map[string]int64{"a": 100 * gi, "b": 60 * gi, "c": 60 * gi})},
		{name: "three replicas, zone anti-affinity hard, one other zone", vol: func() podVolume {
			v := vol(lhv1.DataLocalityBestEffort, 3, 50*gi)
			v.ReplicaZoneSoftAntiAffinity = string(lhv1.ReplicaZoneSoftAntiAffinityDisabled)
			return v
		}(), nodes: cluster(map[string]string{"a": "z1", "b": "z2", "c": "z2"}, map[string]int64{"a": 100 * gi, "b": 60 * gi, "c": 60 * gi}),
			want: `zone "z2" already holds a replica of the volume and zone anti-affinity is hard`},
		{name: "two replicas, one placed elsewhere already", vol: func() podVolume {
			v := vol(lhv1.DataLocalityBestEffort, 2, 50*gi)
			v.Replicas = []placement.Replica{{NodeID: "b", DiskUUID: "b-uuid-1", Healthy: true}}
			return v
		}(), nodes: cluster(nil, map[string]int64{"a": 100 * gi, "b": 0})},
		{name: "strict-local", vol: vol(lhv1.DataLocalityStrictLocal, 1, 50*gi),
			nodes: cluster(nil, map[string]int64{"a": 100 * gi})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := roomElsewhere([]podVolume{tc.vol}, "a", tc.nodes, sched, placements{})
			switch {
			case tc.want == "" && got != "":
				t.Errorf("roomElsewhere = %q, want room", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("roomElsewhere = %q, want it to say %q", got, tc.want)
			case tc.want != "" && !strings.HasPrefix(got, "volume pvc-1: Longhorn would find room for "):
				t.Errorf("roomElsewhere = %q, want it to name the volume first", got)
			}
		})
	}
}

func TestPinnedElsewhere(t *testing.T) {
	strict := podVolume{Name: "pvc-1", Size: gi, ReplicaNodes: map[string]bool{"b": true},
		kind: kind{DataLocality: lhv1.DataLocalityStrictLocal, NumberOfReplicas: 1}}
	if got := pinnedElsewhere(strict, "a"); !strings.Contains(got, "its replica is on node b") {
		t.Errorf("strict-local volume with its replica on b, on node a: %q, want it refused", got)
	}
	if got := pinnedElsewhere(strict, "b"); got != "" {
		t.Errorf("strict-local volume on the node of its replica: %q, want no objection", got)
	}
	strict.ReplicaNodes = map[string]bool{}
	if got := pinnedElsewhere(strict, "a"); got != "" {
		t.Errorf("new strict-local volume: %q, want no objection", got)
	}
	bestEffort := podVolume{Name: "pvc-2", Size: gi, ReplicaNodes: map[string]bool{"b": true},
		kind: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 1}}
	if got := pinnedElsewhere(bestEffort, "a"); got != "" {
		t.Errorf("best-effort volume with its replica elsewhere: %q, want no objection (Longhorn builds a local one)", got)
	}
}

// TestRoomElsewhereReusesPlacementsExactly: over random clusters and
// volumes, every candidate node of a filter gets the same verdict whether
// roomElsewhere places afresh for it or answers from a placement it found
// for an earlier candidate.
func TestRoomElsewhereReusesPlacementsExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	reused := 0
	for trial := range 400 {
		var nodes []placement.Node
		zones := 1 + rng.IntN(3)
		for _, name := range names[:3+rng.IntN(len(names)-2)] {
			free := int64(rng.IntN(5)) * 30 * gi
			n, ledgers := testNode(name, []int64{120 * gi}, []int64{120*gi - free})
			n.Status.Zone = fmt.Sprintf("z%d", rng.IntN(zones))
			nodes = append(nodes, readNode(n, ledgers).placement)
		}
		v := podVolume{Name: "pvc-1", Size: 30 * gi, ReplicaNodes: map[string]bool{},
			kind: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 1 + rng.IntN(4)}}
		if rng.IntN(2) == 0 {
			v.ReplicaZoneSoftAntiAffinity = string(lhv1.ReplicaZoneSoftAntiAffinityDisabled)
		}
		if rng.IntN(3) == 0 {
			v.ReplicaSoftAntiAffinity = string(lhv1.ReplicaSoftAntiAffinityEnabled)
		}
		if rng.IntN(3) == 0 {
			at := nodes[rng.IntN(len(nodes))].Name
			v.Replicas = []placement.Replica{{NodeID: at, DiskUUID: at + "-uuid-1", Healthy: true}}
			v.ReplicaNodes[at] = true
		}
		sched := settings.Default()
		seen := newPlacements(nodes)
		for _, n := range nodes {
			fresh := roomElsewhere([]podVolume{v}, n.Name, nodes, sched, placements{})
			if seen.holds(v, n.Name, replicasElsewhere(v, n.Name)) {
				reused++
			}
			if got := roomElsewhere([]podVolume{v}, n.Name, nodes, sched, seen); got != fresh {
				t.Fatalf("trial %d, node %s: with earlier placements %q, placed afresh %q (volume %+v)", trial, n.Name, got, fresh, v)
			}
		}
	}
	if reused == 0 {
		t.Fatal("no verdict came from an earlier placement: the test exercised nothing")
	}
	t.Logf("%d verdicts from earlier placements", reused)
}

// TestPlacementKey: new volumes of one shape share a placement whatever
// their names; any field placement.Place reads sets them apart, and a
// volume with replicas placed has one of its own.
func TestPlacementKey(t *testing.T) {
	base := podVolume{Name: "pvc-1", Size: 30 * gi, NodeSelector: []string{"ssd"}, ReplicaNodes: map[string]bool{},
		kind: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 3}}
	renamed := base
	renamed.Name = "pvc-2"
	if placementKey(base) != placementKey(renamed) {
		t.Errorf("two new volumes of one shape have keys %q and %q", placementKey(base), placementKey(renamed))
	}
	variants := map[string]func(*podVolume){
		"size":             func(v *podVolume) { v.Size++ },
		"replicas":         func(v *podVolume) { v.NumberOfReplicas++ },
		"data locality":    func(v *podVolume) { v.DataLocality = lhv1.DataLocalityStrictLocal },
		"node selector":    func(v *podVolume) { v.NodeSelector = []string{"ssd", "fast"} },
		"disk selector":    func(v *podVolume) { v.DiskSelector = []string{"ssd"} },
		"node soft":        func(v *podVolume) { v.ReplicaSoftAntiAffinity = string(lhv1.ReplicaSoftAntiAffinityEnabled) },
		"zone soft":        func(v *podVolume) { v.ReplicaZoneSoftAntiAffinity = string(lhv1.ReplicaZoneSoftAntiAffinityDisabled) },
		"disk soft":        func(v *podVolume) { v.ReplicaDiskSoftAntiAffinity = string(lhv1.ReplicaDiskSoftAntiAffinityEnabled) },
		"data engine":      func(v *podVolume) { v.DataEngine = lhv1.DataEngineTypeV2 },
		"replicas placed":  func(v *podVolume) { v.Replicas = []placement.Replica{{NodeID: "a", Healthy: true}} },
		"selector grouped": func(v *podVolume) { v.NodeSelector = []string{"s", "sd"} },
	}
	keys := map[string]string{placementKey(base): "base"}
	for name, change := range variants {
		v := base
		change(&v)
		if other, ok := keys[placementKey(v)]; ok {
			t.Errorf("%s: key %q is also %s's", name, placementKey(v), other)
		}
		keys[placementKey(v)] = name
	}
	placed := base
	placed.Replicas = []placement.Replica{{NodeID: "a", Healthy: true}}
	placedToo := placed
	placedToo.Name = "pvc-2"
	if placementKey(placed) == placementKey(placedToo) {
		t.Errorf("two volumes with replicas placed share key %q", placementKey(placed))
	}
}

// TestRoomElsewhereSharesAShape: a pod's new volumes of one shape get, on
// every candidate node, the verdict each gets when placed alone.
func TestRoomElsewhereSharesAShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 13))
	for trial := range 200 {
		var nodes []placement.Node
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			free := int64(rng.IntN(4)) * 30 * gi
			n, ledgers := testNode(name, []int64{120 * gi}, []int64{120*gi - free})
			nodes = append(nodes, readNode(n, ledgers).placement)
		}
		k := kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 1 + rng.IntN(4)}
		vols := []podVolume{
			{Name: "pvc-1", Size: 30 * gi, ReplicaNodes: map[string]bool{}, kind: k},
			{Name: "pvc-2", Size: 30 * gi, ReplicaNodes: map[string]bool{}, kind: k},
		}
		sched := settings.Default()
		seen := newPlacements(nodes)
		for _, n := range nodes {
			want := ""
			for _, v := range vols {
				if why := roomElsewhere([]podVolume{v}, n.Name, nodes, sched, placements{}); why != "" {
					want = why
					break
				}
			}
			if got := roomElsewhere(vols, n.Name, nodes, sched, seen); got != want {
				t.Fatalf("trial %d, node %s: %q, each volume alone %q", trial, n.Name, got, want)
			}
		}
	}
}
