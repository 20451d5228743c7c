package placement

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/internal/settings"
)

const gi = int64(1) << 30

// mkDisk returns a healthy, empty filesystem disk whose limit, maximum and
// available space are all size, changed by opts.
func mkDisk(name string, size int64, opts ...func(*Disk)) Disk {
	d := Disk{
		Name: name, Path: "/mnt/" + name, Type: lhv1.DiskTypeFilesystem,
		AllowScheduling: true, Schedulable: true,
		StorageMaximum: size, StorageAvailable: size, StorageLimit: size,
	}
	for _, o := range opts {
		o(&d)
	}
	return d
}

// mkNode returns a Ready, schedulable node; disks without a UUID get
// "<node>-<disk>".
func mkNode(name, zone string, disks ...Disk) Node {
	n := Node{Name: name, Zone: zone, Ready: true, Schedulable: true, AllowScheduling: true}
	for _, d := range disks {
		if d.UUID == "" {
			d.UUID = name + "-" + d.Name
		}
		n.Disks = append(n.Disks, d)
	}
	return n
}

// edit returns n changed by f.
func edit(n Node, f func(*Node)) Node {
	f(&n)
	return n
}

// Disk options for mkDisk.

func scheduled(b int64) func(*Disk)      { return func(d *Disk) { d.StorageScheduled = b } }
func available(b int64) func(*Disk)      { return func(d *Disk) { d.StorageAvailable = b } }
func diskTags(t ...string) func(*Disk)   { return func(d *Disk) { d.Tags = t } }
func diskEdit(f func(*Disk)) func(*Disk) { return f }

// rep returns a healthy replica on node's disk, named as mkNode names UUIDs.
func rep(node, disk string) Replica {
	return Replica{NodeID: node, DiskUUID: node + "-" + disk, Healthy: true}
}

// mkVolume returns a 10Gi volume named vol, changed by f when f is not nil.
func mkVolume(f func(*lhv1.VolumeSpec)) *lhv1.Volume {
	v := &lhv1.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: "vol"},
		Spec: lhv1.VolumeSpec{
			Size: 10 * gi, NumberOfReplicas: 3,
			DataLocality: lhv1.DataLocalityDisabled,
		},
	}
	if f != nil {
		f(&v.Spec)
	}
	return v
}

// soft sets the node, zone and disk soft anti-affinity settings.
func soft(node, zone, disk bool) func(*settings.Scheduling) {
	return func(s *settings.Scheduling) {
		s.ReplicaSoftAntiAffinity, s.ReplicaZoneSoftAntiAffinity, s.ReplicaDiskSoftAntiAffinity = node, zone, disk
	}
}

// placeCase is one Place table case; runPlaceCases checks choices, reason
// and message.
type placeCase struct {
	name     string
	nodes    []Node
	existing []Replica
	spec     func(*lhv1.VolumeSpec)
	set      func(*settings.Scheduling)
	count    int // 0 means 1
	size     int64
	actual   int64
	pin      string
	// want are the choices as "node/disk".
	want       []string
	wantReason string // defaults to "" when all are placed, ReplicaSchedulingFailure otherwise
	wantMsg    []string
	notMsg     []string
}

func (c placeCase) request() Request {
	s := settings.Default()
	if c.set != nil {
		c.set(&s)
	}
	count := c.count
	if count == 0 {
		count = 1
	}
	return Request{
		Volume: mkVolume(c.spec), Size: c.size, ActualSize: c.actual, Count: count,
		Existing: c.existing, HardNodeAffinity: c.pin, Nodes: c.nodes, Settings: s,
	}
}

func runPlaceCases(t *testing.T, cases []placeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := c.request()
			res := Place(req)
			got := make([]string, 0, len(res.Choices))
			for _, ch := range res.Choices {
				got = append(got, ch.NodeID+"/"+ch.DiskName)
			}
			want := c.want
			if want == nil {
				want = []string{}
			}
			if !slices.Equal(got, want) {
				t.Errorf("choices = %v, want %v (message %q)", got, want, res.Message)
			}
			wantReason := c.wantReason
			if wantReason == "" && len(want) < req.Count {
				wantReason = ReasonReplicaSchedulingFailure
			}
			if res.Reason != wantReason {
				t.Errorf("reason = %q, want %q (message %q)", res.Reason, wantReason, res.Message)
			}
			if wantReason == "" && res.Message != "" {
				t.Errorf("message = %q, want none", res.Message)
			}
			for _, m := range c.wantMsg {
				if !strings.Contains(res.Message, m) {
					t.Errorf("message %q does not contain %q", res.Message, m)
				}
			}
			for _, m := range c.notMsg {
				if strings.Contains(res.Message, m) {
					t.Errorf("message %q contains %q", res.Message, m)
				}
			}
		})
	}
}

func TestPlaceAntiAffinityStages(t *testing.T) {
	runPlaceCases(t, []placeCase{
		{
			name: "stage 1: a new node in a new zone beats more space in a used zone",
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi)),
				mkNode("b", "z1", mkDisk("d1", 500*gi)),
				mkNode("c", "z2", mkDisk("d1", 50*gi)),
			},
			existing: []Replica{rep("a", "d1")},
			want:     []string{"c/d1"},
		},
		{
			name: "stage 1 wins even when every stage is allowed",
			set:  soft(true, true, true),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 900*gi)),
				mkNode("b", "z1", mkDisk("d1", 500*gi)),
				mkNode("c", "z2", mkDisk("d1", 50*gi)),
			},
			existing: []Replica{rep("a", "d1")},
			want:     []string{"c/d1"},
		},
		{
			name: "stage 2: a new node in a used zone when zone anti-affinity is soft",
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi)),
				mkNode("b", "z1", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{rep("a", "d1")},
			want:     []string{"b/d1"},
		},
		{
			name: "stage 2 refused when zone anti-affinity is hard",
			set:  soft(false, false, true),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi)),
				mkNode("b", "z1", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{rep("a", "d1")},
			wantMsg: []string{
				"placed 0 of 1 new replicas of volume vol",
				`b: zone "z1" already holds a replica of the volume and zone anti-affinity is hard`,
				"a: node already holds a replica of the volume and zone anti-affinity is hard",
			},
		},
		{
			name:     "stage 3: a used node when node and zone anti-affinity are soft",
			set:      soft(true, true, true),
			nodes:    []Node{mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 50*gi))},
			existing: []Replica{rep("a", "d1")},
			want:     []string{"a/d2"},
		},
		{
			name:     "stage 3 refused when node anti-affinity is hard",
			set:      soft(false, true, true),
			nodes:    []Node{mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 50*gi))},
			existing: []Replica{rep("a", "d1")},
			wantMsg:  []string{"a: node already holds a replica of the volume and node anti-affinity is hard"},
		},
		{
			name:     "zone hard makes node hard: a used node is refused even with node soft",
			set:      soft(true, false, true),
			nodes:    []Node{mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 50*gi))},
			existing: []Replica{rep("a", "d1")},
			wantMsg:  []string{"a: node already holds a replica of the volume and zone anti-affinity is hard, which makes node anti-affinity hard"},
		},
		{
			name: "zone hard with node soft still uses a new zone",
			set:  soft(true, false, true),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 50*gi)),
				mkNode("b", "z2", mkDisk("d1", 10*gi)),
			},
			existing: []Replica{rep("a", "d1")},
			want:     []string{"b/d1"},
		},
		{
			name: "nodes without a zone share the empty zone: refused when zone hard",
			set:  soft(false, false, true),
			nodes: []Node{
				mkNode("a", "", mkDisk("d1", 100*gi)),
				mkNode("b", "", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{rep("a", "d1")},
			wantMsg:  []string{`b: zone "" already holds a replica of the volume and zone anti-affinity is hard`},
		},
		{
			name: "nodes without a zone share the empty zone: stage 2 when zone soft",
			nodes: []Node{
				mkNode("a", "", mkDisk("d1", 100*gi)),
				mkNode("b", "", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{rep("a", "d1")},
			want:     []string{"b/d1"},
		},
		{
			name: "three replicas on three unlabelled nodes with defaults",
			nodes: []Node{
				mkNode("a", "", mkDisk("d1", 100*gi)),
				mkNode("b", "", mkDisk("d1", 100*gi)),
				mkNode("c", "", mkDisk("d1", 100*gi)),
			},
			count: 3,
			want:  []string{"a/d1", "b/d1", "c/d1"},
		},
		{
			name: "three replicas on two nodes with node anti-affinity hard",
			nodes: []Node{
				mkNode("a", "", mkDisk("d1", 100*gi)),
				mkNode("b", "", mkDisk("d1", 100*gi)),
			},
			count: 3,
			want:  []string{"a/d1", "b/d1"},
			wantMsg: []string{
				"placed 2 of 3 new replicas of volume vol",
				"a: node already holds a replica of the volume and node anti-affinity is hard",
				"b: node already holds a replica of the volume and node anti-affinity is hard",
			},
		},
		{
			name: "same-pass accounting of zones: the second replica goes to a new zone",
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi)),
				mkNode("b", "z1", mkDisk("d1", 90*gi)),
				mkNode("c", "z2", mkDisk("d1", 20*gi)),
			},
			count: 2,
			want:  []string{"a/d1", "c/d1"},
		},
		{
			name: "a replica on a node missing from the input counts for its node only",
			set:  soft(false, false, true),
			nodes: []Node{
				mkNode("b", "z1", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{rep("gone", "d1")},
			want:     []string{"b/d1"},
		},
	})
}

func TestPlaceVolumeOverrides(t *testing.T) {
	oneNodeWithReplica := []Node{mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 50*gi))}
	twoNodesOneZone := []Node{mkNode("a", "z1", mkDisk("d1", 100*gi)), mkNode("b", "z1", mkDisk("d1", 100*gi))}
	runPlaceCases(t, []placeCase{
		{
			name:     "node enabled overrides a hard setting",
			set:      soft(false, true, true),
			spec:     func(s *lhv1.VolumeSpec) { s.ReplicaSoftAntiAffinity = lhv1.ReplicaSoftAntiAffinityEnabled },
			nodes:    oneNodeWithReplica,
			existing: []Replica{rep("a", "d1")},
			want:     []string{"a/d2"},
		},
		{
			name:     "node disabled overrides a soft setting",
			set:      soft(true, true, true),
			spec:     func(s *lhv1.VolumeSpec) { s.ReplicaSoftAntiAffinity = lhv1.ReplicaSoftAntiAffinityDisabled },
			nodes:    oneNodeWithReplica,
			existing: []Replica{rep("a", "d1")},
			wantMsg:  []string{"node anti-affinity is hard"},
		},
		{
			name:     "node ignored uses the soft setting",
			set:      soft(true, true, true),
			spec:     func(s *lhv1.VolumeSpec) { s.ReplicaSoftAntiAffinity = lhv1.ReplicaSoftAntiAffinityDefault },
			nodes:    oneNodeWithReplica,
			existing: []Replica{rep("a", "d1")},
			want:     []string{"a/d2"},
		},
		{
			name:     "zone disabled overrides a soft setting",
			set:      soft(false, true, true),
			spec:     func(s *lhv1.VolumeSpec) { s.ReplicaZoneSoftAntiAffinity = lhv1.ReplicaZoneSoftAntiAffinityDisabled },
			nodes:    twoNodesOneZone,
			existing: []Replica{rep("a", "d1")},
			wantMsg:  []string{`b: zone "z1" already holds a replica`},
		},
		{
			name:     "zone enabled overrides a hard setting",
			set:      soft(false, false, true),
			spec:     func(s *lhv1.VolumeSpec) { s.ReplicaZoneSoftAntiAffinity = lhv1.ReplicaZoneSoftAntiAffinityEnabled },
			nodes:    twoNodesOneZone,
			existing: []Replica{rep("a", "d1")},
			want:     []string{"b/d1"},
		},
		{
			name:     "disk disabled overrides a soft setting",
			set:      soft(true, true, true),
			spec:     func(s *lhv1.VolumeSpec) { s.ReplicaDiskSoftAntiAffinity = lhv1.ReplicaDiskSoftAntiAffinityDisabled },
			nodes:    []Node{mkNode("a", "z1", mkDisk("d1", 100*gi))},
			existing: []Replica{rep("a", "d1")},
			wantMsg:  []string{"a/d1: disk already holds a replica of the volume and disk anti-affinity is hard"},
		},
		{
			name:     "disk enabled overrides a hard setting",
			set:      soft(true, true, false),
			spec:     func(s *lhv1.VolumeSpec) { s.ReplicaDiskSoftAntiAffinity = lhv1.ReplicaDiskSoftAntiAffinityEnabled },
			nodes:    []Node{mkNode("a", "z1", mkDisk("d1", 100*gi))},
			existing: []Replica{rep("a", "d1")},
			want:     []string{"a/d1"},
		},
	})
}

func TestPlaceTags(t *testing.T) {
	tagged := func(n Node, tags ...string) Node { return edit(n, func(n *Node) { n.Tags = tags }) }
	noEmptyNode := func(s *settings.Scheduling) { s.AllowEmptyNodeSelectorVolume = false }
	noEmptyDisk := func(s *settings.Scheduling) { s.AllowEmptyDiskSelectorVolume = false }
	runPlaceCases(t, []placeCase{
		{
			name: "node selector needs every tag",
			spec: func(s *lhv1.VolumeSpec) { s.NodeSelector = []string{"ssd", "fast"} },
			nodes: []Node{
				tagged(mkNode("a", "z1", mkDisk("d1", 500*gi)), "fast"),
				tagged(mkNode("b", "z2", mkDisk("d1", 100*gi)), "x", "fast", "ssd"),
			},
			want: []string{"b/d1"},
		},
		{
			name:    "node selector not met is reported",
			spec:    func(s *lhv1.VolumeSpec) { s.NodeSelector = []string{"ssd", "fast"} },
			nodes:   []Node{tagged(mkNode("a", "z1", mkDisk("d1", 500*gi)), "fast")},
			wantMsg: []string{"a: tags [fast] do not match selector [fast ssd]"},
		},
		{
			name: "empty node selector uses tagged nodes when allowed",
			nodes: []Node{
				tagged(mkNode("a", "z1", mkDisk("d1", 500*gi)), "ssd"),
				mkNode("b", "z2", mkDisk("d1", 100*gi)),
			},
			want: []string{"a/d1"},
		},
		{
			name: "empty node selector uses only untagged nodes when not allowed",
			set:  noEmptyNode,
			nodes: []Node{
				tagged(mkNode("a", "z1", mkDisk("d1", 500*gi)), "ssd"),
				mkNode("b", "z2", mkDisk("d1", 100*gi)),
			},
			want: []string{"b/d1"},
		},
		{
			name:    "empty node selector on a tagged node is reported",
			set:     noEmptyNode,
			nodes:   []Node{tagged(mkNode("a", "z1", mkDisk("d1", 500*gi)), "ssd")},
			wantMsg: []string{"a: tags [ssd] do not match the empty selector (allow-empty-node-selector-volume is false)"},
		},
		{
			name: "disk selector needs every tag",
			spec: func(s *lhv1.VolumeSpec) { s.DiskSelector = []string{"nvme", "fast"} },
			nodes: []Node{mkNode("a", "z1",
				mkDisk("d1", 500*gi, diskTags("fast")),
				mkDisk("d2", 100*gi, diskTags("nvme", "fast")),
			)},
			want: []string{"a/d2"},
		},
		{
			name:    "disk selector not met is reported",
			spec:    func(s *lhv1.VolumeSpec) { s.DiskSelector = []string{"nvme"} },
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 500*gi, diskTags("fast")))},
			wantMsg: []string{"a/d1: tags [fast] do not match selector [nvme]"},
		},
		{
			name:  "empty disk selector uses tagged disks when allowed",
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 500*gi, diskTags("ssd")), mkDisk("d2", 100*gi))},
			want:  []string{"a/d1"},
		},
		{
			name:  "empty disk selector uses only untagged disks when not allowed",
			set:   noEmptyDisk,
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 500*gi, diskTags("ssd")), mkDisk("d2", 100*gi))},
			want:  []string{"a/d2"},
		},
		{
			name:    "empty disk selector on a tagged disk is reported",
			set:     noEmptyDisk,
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 500*gi, diskTags("ssd")))},
			wantMsg: []string{"a/d1: tags [ssd] do not match the empty selector (allow-empty-disk-selector-volume is false)"},
		},
		{
			name:  "allow-empty-node-selector false does not affect the disk rule",
			set:   noEmptyNode,
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 500*gi, diskTags("ssd")))},
			want:  []string{"a/d1"},
		},
	})
}

func TestPlaceEligibility(t *testing.T) {
	big := func(name string) Node { return mkNode(name, "z1", mkDisk("d1", 500*gi)) }
	fallback := mkNode("z", "z2", mkDisk("d1", 10*gi))
	runPlaceCases(t, []placeCase{
		{
			name:  "cordoned node is excluded",
			nodes: []Node{edit(big("a"), func(n *Node) { n.Schedulable = NodeSchedulable(true, true) }), fallback},
			want:  []string{"z/d1"},
		},
		{
			name:  "cordoned node is used when the setting allows it",
			nodes: []Node{edit(big("a"), func(n *Node) { n.Schedulable = NodeSchedulable(true, false) }), fallback},
			want:  []string{"a/d1"},
		},
		{
			name:    "cordoned node is reported",
			nodes:   []Node{edit(big("a"), func(n *Node) { n.Schedulable = false })},
			wantMsg: []string{"a: node is cordoned"},
		},
		{
			name:  "node not ready is excluded",
			nodes: []Node{edit(big("a"), func(n *Node) { n.Ready = false }), fallback},
			want:  []string{"z/d1"},
		},
		{
			name:    "every node failure is reported",
			nodes:   []Node{edit(big("a"), func(n *Node) { n.Ready, n.AllowScheduling, n.EvictionRequested = false, false, true })},
			wantMsg: []string{"a: node is not ready and scheduling is disabled on the node and eviction is requested on the node"},
		},
		{
			name:  "evicting node is excluded",
			nodes: []Node{edit(big("a"), func(n *Node) { n.EvictionRequested = true }), fallback},
			want:  []string{"z/d1"},
		},
		{
			name:  "node with scheduling disabled is excluded",
			nodes: []Node{edit(big("a"), func(n *Node) { n.AllowScheduling = false }), fallback},
			want:  []string{"z/d1"},
		},
		{
			name:  "evicting disk is excluded",
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 500*gi, diskEdit(func(d *Disk) { d.EvictionRequested = true })), mkDisk("d2", 10*gi))},
			want:  []string{"a/d2"},
		},
		{
			name:    "evicting disk is reported",
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 500*gi, diskEdit(func(d *Disk) { d.EvictionRequested = true })))},
			wantMsg: []string{"a/d1: eviction is requested on the disk"},
		},
		{
			name: "disks with scheduling disabled, not schedulable or of block type are excluded",
			nodes: []Node{mkNode("a", "z1",
				mkDisk("d1", 500*gi, diskEdit(func(d *Disk) { d.AllowScheduling = false })),
				mkDisk("d2", 500*gi, diskEdit(func(d *Disk) { d.Schedulable = false })),
				mkDisk("d3", 500*gi, diskEdit(func(d *Disk) { d.Type = lhv1.DiskTypeBlock })),
				mkDisk("d4", 10*gi),
			)},
			want: []string{"a/d4"},
		},
		{
			name: "disk failures are reported",
			nodes: []Node{mkNode("a", "z1",
				mkDisk("d1", 500*gi, diskEdit(func(d *Disk) { d.AllowScheduling = false })),
				mkDisk("d2", 500*gi, diskEdit(func(d *Disk) { d.Schedulable = false })),
				mkDisk("d3", 500*gi, diskEdit(func(d *Disk) { d.Type = lhv1.DiskTypeBlock })),
			), edit(mkNode("b", "z1"), func(n *Node) { n.Disks = []Disk{mkDisk("d1", 500*gi)} })},
			wantMsg: []string{
				"a/d1: scheduling is disabled on the disk",
				"a/d2: disk is not schedulable",
				"a/d3: disk type block does not match the volume's filesystem",
				"b/d1: disk has no UUID",
			},
		},
		{
			name:  "empty disk type is filesystem",
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 500*gi, diskEdit(func(d *Disk) { d.Type = "" })))},
			want:  []string{"a/d1"},
		},
		{
			name:    "node without disks is reported",
			nodes:   []Node{mkNode("a", "z1")},
			wantMsg: []string{"a: node has no disks"},
		},
		{
			name:    "no nodes at all",
			wantMsg: []string{"placed 0 of 1 new replicas of volume vol: no candidate nodes"},
		},
	})
}

func TestPlaceSpace(t *testing.T) {
	runPlaceCases(t, []placeCase{
		{
			name:    "one byte over the limit fails with numbers",
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 100*gi, scheduled(50*gi)))},
			size:    50*gi + 1,
			wantMsg: []string{"a/d1: insufficient storage: requested 53687091201, 50Gi usable of limit 100Gi"},
		},
		{
			name:  "exact fit succeeds",
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 100*gi, scheduled(50*gi)))},
			size:  50 * gi,
			want:  []string{"a/d1"},
		},
		{
			name:  "size defaults to spec.size",
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 100*gi, scheduled(91*gi)))},
			wantMsg: []string{
				"requested 10Gi, 9Gi usable of limit 100Gi",
			},
		},
		{
			name:  "same-pass accounting: two replicas cannot both take the last space on one disk",
			set:   soft(true, true, true),
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 100*gi, scheduled(80*gi)))},
			count: 3,
			want:  []string{"a/d1", "a/d1"},
			wantMsg: []string{
				"placed 2 of 3 new replicas",
				"a/d1: insufficient storage: requested 10Gi, 0 usable of limit 100Gi",
			},
		},
		{
			name:  "same-pass accounting moves the next replica to another disk",
			set:   soft(true, true, true),
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 100*gi, scheduled(85*gi)), mkDisk("d2", 12*gi))},
			count: 2,
			want:  []string{"a/d1", "a/d2"},
		},
		{
			name:    "actual space check is strict and counts the actual size",
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 100*gi, available(31*gi)))},
			actual:  6 * gi,
			wantMsg: []string{"a/d1: insufficient actual space: 31Gi available minus actual size 6Gi must exceed 25Gi (25% of maximum 100Gi)"},
		},
		{
			name:   "actual space one byte above the minimum passes",
			nodes:  []Node{mkNode("a", "z1", mkDisk("d1", 100*gi, available(31*gi+1)))},
			actual: 6 * gi,
			want:   []string{"a/d1"},
		},
		{
			name:    "same-pass accounting of actual size",
			set:     soft(true, true, true),
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 100*gi, available(40*gi)))},
			actual:  10 * gi,
			count:   2,
			want:    []string{"a/d1"},
			wantMsg: []string{"30Gi available minus actual size 10Gi must exceed 25Gi"},
		},
		{
			name:    "disk of unknown size is refused",
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 100*gi, diskEdit(func(d *Disk) { d.StorageMaximum = 0 })))},
			wantMsg: []string{"a/d1: disk size is unknown (storageMaximum 0)"},
		},
	})
}

func TestPlaceDiskAntiAffinity(t *testing.T) {
	// Longhorn docs, stage 2: node A has disks X (holding a replica of the
	// volume) and Y. Node A already holds a replica, so node and zone
	// anti-affinity must be soft for A to be a candidate at all.
	nodeA := func(yOpts ...func(*Disk)) []Node {
		return []Node{mkNode("A", "z1", mkDisk("X", 500*gi, diskTags("fast")), mkDisk("Y", 100*gi, yOpts...))}
	}
	existing := []Replica{rep("A", "X")}
	runPlaceCases(t, []placeCase{
		{
			name: "hard: Y, not X", set: soft(true, true, false),
			nodes: nodeA(), existing: existing, want: []string{"A/Y"},
		},
		{
			name: "hard: Y unsuitable fails", set: soft(true, true, false),
			spec:  func(s *lhv1.VolumeSpec) { s.DiskSelector = []string{"fast"} },
			nodes: nodeA(), existing: existing,
			wantMsg: []string{
				"A/X: disk already holds a replica of the volume and disk anti-affinity is hard",
				"A/Y: tags [] do not match selector [fast]",
			},
		},
		{
			name: "soft: prefers Y although X has more space", set: soft(true, true, true),
			nodes: nodeA(), existing: existing, want: []string{"A/Y"},
		},
		{
			name: "soft: X when Y is unsuitable", set: soft(true, true, true),
			spec:  func(s *lhv1.VolumeSpec) { s.DiskSelector = []string{"fast"} },
			nodes: nodeA(), existing: existing, want: []string{"A/X"},
		},
		{
			name:  "node soft, disk hard: two replicas on one node go to its two disks",
			set:   soft(true, true, false),
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 50*gi))},
			count: 2,
			want:  []string{"a/d1", "a/d2"},
		},
		{
			name:    "node soft, disk hard: a third replica finds no disk",
			set:     soft(true, true, false),
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 50*gi))},
			count:   3,
			want:    []string{"a/d1", "a/d2"},
			wantMsg: []string{"a/d1: disk already holds a replica", "a/d2: disk already holds a replica"},
		},
		{
			name:  "node soft, disk soft: two replicas share the one disk",
			set:   soft(true, true, true),
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 100*gi))},
			count: 2,
			want:  []string{"a/d1", "a/d1"},
		},
		{
			name: "disk preference spans nodes of a stage",
			set:  soft(true, true, true),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 900*gi)),
				mkNode("b", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 100*gi)),
			},
			existing: []Replica{rep("a", "d1"), rep("b", "d1")},
			want:     []string{"b/d2"},
		},
	})
}

func TestPlaceChoice(t *testing.T) {
	runPlaceCases(t, []placeCase{
		{
			name: "node with the most usable space wins, summed over its disks",
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi)),
				mkNode("b", "z2", mkDisk("d1", 60*gi), mkDisk("d2", 60*gi)),
			},
			want: []string{"b/d1"},
		},
		{
			name: "usable space is limit minus scheduled",
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi, scheduled(50*gi))),
				mkNode("b", "z2", mkDisk("d1", 60*gi)),
			},
			want: []string{"b/d1"},
		},
		{
			name:  "disk with the most usable space on the chosen node",
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 60*gi), mkDisk("d2", 100*gi, scheduled(30*gi)))},
			want:  []string{"a/d2"},
		},
		{
			name: "ties go to the smaller node and disk name",
			nodes: []Node{
				mkNode("b", "z2", mkDisk("d1", 100*gi)),
				mkNode("a", "z1", mkDisk("d2", 50*gi), mkDisk("d1", 50*gi)),
			},
			want: []string{"a/d1"},
		},
		{
			name: "balancing spreads replicas by space across nodes",
			set:  soft(true, true, true),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi)),
				mkNode("b", "z1", mkDisk("d1", 85*gi)),
			},
			count: 4,
			// a (100) then b (85) by stage; then both used: a 90 vs b 75 → a; a 80 vs b 75 → a.
			want: []string{"a/d1", "b/d1", "a/d1", "a/d1"},
		},
	})
}

func TestPlaceLocality(t *testing.T) {
	bestEffort := func(node string) func(*lhv1.VolumeSpec) {
		return func(s *lhv1.VolumeSpec) { s.DataLocality, s.NodeID = lhv1.DataLocalityBestEffort, node }
	}
	strictLocal := func(node string) func(*lhv1.VolumeSpec) {
		return func(s *lhv1.VolumeSpec) {
			s.DataLocality, s.NodeID, s.NumberOfReplicas = lhv1.DataLocalityStrictLocal, node, 1
		}
	}
	threeNodes := []Node{
		mkNode("a", "z1", mkDisk("d1", 500*gi)),
		mkNode("b", "z2", mkDisk("d1", 100*gi)),
		mkNode("c", "z3", mkDisk("d1", 300*gi)),
	}
	runPlaceCases(t, []placeCase{
		{
			name: "strict-local waits for attachment", spec: strictLocal(""), nodes: threeNodes,
			wantReason: ReasonWaitingForAttachment, wantMsg: []string{"volume vol has data locality strict-local and is not attached"},
		},
		{
			name: "best-effort waits for attachment", spec: bestEffort(""), nodes: threeNodes, count: 3,
			wantReason: ReasonWaitingForAttachment, wantMsg: []string{"wait for attachment"},
		},
		{
			name: "strict-local uses only the attached node", spec: strictLocal("b"), nodes: threeNodes,
			want: []string{"b/d1"},
		},
		{
			name: "strict-local fails when the attached node cannot take it", spec: strictLocal("b"),
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 500*gi)), edit(mkNode("b", "z2", mkDisk("d1", 100*gi)), func(n *Node) { n.Schedulable = false })},
			wantMsg: []string{"(pinned to node b)", "b: node is cordoned"},
			notMsg:  []string{"a:", "a/"},
		},
		{
			name: "strict-local fails when the attached node is unknown", spec: strictLocal("x"), nodes: threeNodes,
			wantMsg: []string{"x: node not found"},
		},
		{
			name: "best-effort puts the first replica on the attached node", spec: bestEffort("b"), nodes: threeNodes,
			count: 3, want: []string{"b/d1", "a/d1", "c/d1"},
		},
		{
			name: "best-effort falls back when the attached node cannot take it", spec: bestEffort("b"),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 500*gi)),
				edit(mkNode("b", "z2", mkDisk("d1", 100*gi)), func(n *Node) { n.EvictionRequested = true }),
			},
			want: []string{"a/d1"},
		},
		{
			name: "best-effort prefers the attached node when its replica is unhealthy", spec: bestEffort("b"),
			set: soft(true, true, true),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 500*gi), mkDisk("d2", 500*gi)),
				mkNode("b", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 100*gi)),
			},
			existing: []Replica{rep("a", "d1"), {NodeID: "b", DiskUUID: "b-d1", Healthy: false}},
			want:     []string{"b/d2"},
		},
		{
			name: "best-effort uses the normal policy once the attached node holds a healthy replica", spec: bestEffort("b"),
			set: soft(true, true, true),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 500*gi), mkDisk("d2", 500*gi)),
				mkNode("b", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 100*gi)),
			},
			existing: []Replica{rep("a", "d1"), rep("b", "d1")},
			want:     []string{"a/d2"},
		},
		{
			name: "best-effort does not override zone anti-affinity", spec: bestEffort("b"),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 500*gi)),
				mkNode("b", "z1", mkDisk("d1", 500*gi)),
				mkNode("c", "z2", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{rep("a", "d1")},
			want:     []string{"c/d1"},
		},
		{
			name: "hard node affinity pins the node", pin: "b", nodes: threeNodes,
			want: []string{"b/d1"},
		},
		{
			name: "hard node affinity still obeys anti-affinity", pin: "b", nodes: threeNodes,
			existing: []Replica{rep("b", "d1")},
			wantMsg:  []string{"(pinned to node b)", "b: node already holds a replica of the volume and node anti-affinity is hard"},
		},
		{
			name: "hard node affinity conflicting with strict-local", pin: "a", spec: strictLocal("b"), nodes: threeNodes,
			wantMsg: []string{"volume vol is strict-local on node b but the replica is pinned to node a"},
		},
	})
}

func TestPlaceInvalidRequests(t *testing.T) {
	cases := []struct {
		name       string
		req        Request
		wantReason string
		wantMsg    string
	}{
		{"no count", Request{Count: 0}, "", ""},
		{"no volume", Request{Count: 1}, ReasonReplicaSchedulingFailure, "the request names no volume"},
		{"zero size", Request{Count: 1, Volume: mkVolume(func(s *lhv1.VolumeSpec) { s.Size = 0 })},
			ReasonReplicaSchedulingFailure, "volume vol requests 0 bytes per replica"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Place(c.req)
			if len(res.Choices) != 0 || res.Reason != c.wantReason || !strings.Contains(res.Message, c.wantMsg) {
				t.Errorf("Place = %+v, want reason %q and message containing %q", res, c.wantReason, c.wantMsg)
			}
		})
	}
}

func TestPlaceChoiceFields(t *testing.T) {
	res := Place(placeCase{nodes: []Node{mkNode("a", "z1", mkDisk("d1", 100*gi, diskEdit(func(d *Disk) { d.UUID = "uuid-1" })))}}.request())
	want := []Choice{{NodeID: "a", DiskName: "d1", DiskUUID: "uuid-1", DiskPath: "/mnt/d1"}}
	if !reflect.DeepEqual(res.Choices, want) {
		t.Errorf("choices = %+v, want %+v", res.Choices, want)
	}
}

func TestPlaceFailuresStructured(t *testing.T) {
	c := placeCase{nodes: []Node{
		mkNode("b", "z1", mkDisk("d1", 100*gi, scheduled(95*gi))),
		edit(mkNode("a", "z1", mkDisk("d1", 100*gi)), func(n *Node) { n.Ready = false }),
	}}
	res := Place(c.request())
	want := []Failure{
		{Node: "a", Reasons: []string{"node is not ready"}},
		{Node: "b", Disk: "d1", Reasons: []string{"insufficient storage: requested 10Gi, 5Gi usable of limit 100Gi"}},
	}
	if !reflect.DeepEqual(res.Failures, want) {
		t.Errorf("failures = %+v, want %+v", res.Failures, want)
	}
	wantMsg := "placed 0 of 1 new replicas of volume vol: a: node is not ready; b/d1: insufficient storage: requested 10Gi, 5Gi usable of limit 100Gi"
	if res.Message != wantMsg {
		t.Errorf("message = %q, want %q", res.Message, wantMsg)
	}
}

func TestPlaceDeterministic(t *testing.T) {
	nodes := []Node{
		mkNode("n1", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 100*gi), mkDisk("d3", 80*gi)),
		mkNode("n2", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 100*gi)),
		mkNode("n3", "z2", mkDisk("d1", 100*gi), mkDisk("d2", 100*gi)),
		mkNode("n4", "z2", mkDisk("d1", 200*gi)),
		mkNode("n5", "", mkDisk("d1", 200*gi)),
		edit(mkNode("n6", "z3", mkDisk("d1", 900*gi)), func(n *Node) { n.Ready = false }),
	}
	c := placeCase{
		set:      soft(true, true, false),
		nodes:    nodes,
		existing: []Replica{rep("n4", "d1"), rep("n1", "d3")},
		count:    12,
		size:     50 * gi,
	}
	first := Place(c.request())
	// Concrete expectation so the test fails if the policy drifts. n1 (z1)
	// and n4 (z2) hold replicas: n5 is the only new zone; then the new nodes
	// in used zones, n2 and n3 (tie on space, by name); then used nodes,
	// only on disks without a replica (disk anti-affinity is hard), the node
	// with the most usable space over those disks first.
	want := []string{"n5/d1", "n2/d1", "n3/d1", "n1/d1", "n1/d2", "n2/d2", "n3/d2"}
	got := make([]string, 0, len(first.Choices))
	for _, ch := range first.Choices {
		got = append(got, ch.NodeID+"/"+ch.DiskName)
	}
	if !slices.Equal(got, want) || first.Reason != ReasonReplicaSchedulingFailure {
		t.Fatalf("choices = %v, reason %q; want %v and a failure", got, first.Reason, want)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		shuffled := c
		shuffled.nodes = slices.Clone(nodes)
		for j := range shuffled.nodes {
			shuffled.nodes[j].Disks = slices.Clone(shuffled.nodes[j].Disks)
			r.Shuffle(len(shuffled.nodes[j].Disks), func(a, b int) {
				shuffled.nodes[j].Disks[a], shuffled.nodes[j].Disks[b] = shuffled.nodes[j].Disks[b], shuffled.nodes[j].Disks[a]
			})
		}
		r.Shuffle(len(shuffled.nodes), func(a, b int) { shuffled.nodes[a], shuffled.nodes[b] = shuffled.nodes[b], shuffled.nodes[a] })
		shuffled.existing = slices.Clone(c.existing)
		slices.Reverse(shuffled.existing)
		if res := Place(shuffled.request()); !reflect.DeepEqual(res, first) {
			t.Fatalf("shuffle %d: Place = %+v, want %+v", i, res, first)
		}
		if res := Place(c.request()); !reflect.DeepEqual(res, first) {
			t.Fatalf("repeat %d: Place = %+v, want %+v", i, res, first)
		}
	}
}

// TestPlaceReplicaCounting checks which existing replicas count for which
// anti-affinity, as Longhorn's scheduler counts them: for node and zone
// only on nodes that may take replicas, DiskOnly ones for disks only.
func TestPlaceReplicaCounting(t *testing.T) {
	runPlaceCases(t, []placeCase{
		{
			name: "a replica on a node that is not ready does not count for its zone",
			set:  soft(false, false, true),
			nodes: []Node{
				edit(mkNode("a", "z1", mkDisk("d1", 100*gi)), func(n *Node) { n.Ready = false }),
				mkNode("b", "z1", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{rep("a", "d1")},
			want:     []string{"b/d1"},
		},
		{
			name: "a replica on a cordoned node or one with scheduling disabled does not count for its zone",
			set:  soft(false, false, true),
			nodes: []Node{
				edit(mkNode("a", "z1", mkDisk("d1", 100*gi)), func(n *Node) { n.Schedulable = false }),
				edit(mkNode("b", "z1", mkDisk("d1", 100*gi)), func(n *Node) { n.AllowScheduling = false }),
				mkNode("c", "z1", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{rep("a", "d1"), rep("b", "d1")},
			want:     []string{"c/d1"},
		},
		{
			name: "a replica on a node whose tags miss the selector still counts for its zone",
			set:  soft(false, false, true),
			spec: func(s *lhv1.VolumeSpec) { s.NodeSelector = []string{"fast"} },
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi)),
				edit(mkNode("b", "z1", mkDisk("d1", 100*gi)), func(n *Node) { n.Tags = []string{"fast"} }),
			},
			existing: []Replica{rep("a", "d1")},
			wantMsg:  []string{`b: zone "z1" already holds a replica of the volume and zone anti-affinity is hard`},
		},
		{
			name: "pinned: only replicas on the pinned node count for node and zone",
			set:  soft(false, false, true),
			pin:  "b",
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi)),
				mkNode("b", "z1", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{rep("a", "d1")},
			want:     []string{"b/d1"},
		},
		{
			name: "a DiskOnly replica does not count for its node or zone",
			set:  soft(false, false, false),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 50*gi)),
			},
			existing: []Replica{{NodeID: "a", DiskUUID: "a-d1", DiskOnly: true}},
			want:     []string{"a/d2"},
		},
		{
			name: "a DiskOnly replica still counts for its disk",
			set:  soft(false, false, false),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{{NodeID: "a", DiskUUID: "a-d1", DiskOnly: true}},
			wantMsg:  []string{"a/d1: disk already holds a replica of the volume and disk anti-affinity is hard"},
		},
	})
}

// TestPlaceEvictedReplicas checks Longhorn's rule for replicas being
// evicted (Longhorn #3076): a node whose replicas are all being evicted may
// take their replacement where hard anti-affinity refuses other used nodes.
func TestPlaceEvictedReplicas(t *testing.T) {
	evicted := func(node, disk string) Replica {
		r := rep(node, disk)
		r.EvictionRequested = true
		return r
	}
	runPlaceCases(t, []placeCase{
		{
			name:     "zone hard: the evicted node of an evicted zone takes the replacement on another disk",
			set:      soft(false, false, false),
			nodes:    []Node{mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 100*gi)), mkNode("b", "z1", mkDisk("d1", 900*gi))},
			existing: []Replica{evicted("a", "d1")},
			want:     []string{"a/d2"},
			notMsg:   []string{"b/d1"},
		},
		{
			name:     "zone hard: not when another replica in the zone stays",
			set:      soft(false, false, false),
			nodes:    []Node{mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 100*gi)), mkNode("b", "z1", mkDisk("d1", 100*gi))},
			existing: []Replica{evicted("a", "d1"), rep("b", "d1")},
			wantMsg:  []string{`a: zone "z1" holds a replica of the volume that is not being evicted and zone anti-affinity is hard`},
		},
		{
			name:     "zone hard: a new node of an evicted zone is still refused",
			set:      soft(false, false, false),
			nodes:    []Node{mkNode("a", "z1", mkDisk("d1", 100*gi)), mkNode("b", "z1", mkDisk("d1", 100*gi))},
			existing: []Replica{evicted("a", "d1")},
			wantMsg:  []string{`b: zone "z1" already holds a replica of the volume and zone anti-affinity is hard`},
		},
		{
			name: "zone soft, node hard: a new node first, then the evicted node",
			set:  soft(false, true, false),
			nodes: []Node{
				mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 900*gi)),
				mkNode("b", "z1", mkDisk("d1", 100*gi)),
			},
			existing: []Replica{evicted("a", "d1")},
			count:    2,
			want:     []string{"b/d1", "a/d2"},
		},
		{
			name:     "zone soft, node hard: a node holding a staying replica is refused",
			set:      soft(false, true, false),
			nodes:    []Node{mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 100*gi))},
			existing: []Replica{evicted("a", "d1"), rep("a", "d2")},
			wantMsg:  []string{"a: node already holds a replica of the volume and node anti-affinity is hard"},
		},
	})
}

// TestPlaceDataEngineAndFileSystem checks the disk rules that depend on the
// volume: a v2 volume needs block disks, and a v1 volume must fit the
// disk's file system.
func TestPlaceDataEngineAndFileSystem(t *testing.T) {
	v2 := func(s *lhv1.VolumeSpec) { s.DataEngine = lhv1.DataEngineTypeV2 }
	block := diskEdit(func(d *Disk) { d.Type = lhv1.DiskTypeBlock })
	fs := func(t string) func(*Disk) { return func(d *Disk) { d.FSType = t } }
	big := func(size int64) func(*lhv1.VolumeSpec) { return func(s *lhv1.VolumeSpec) { s.Size = size } }
	const ti = 1024 * gi
	runPlaceCases(t, []placeCase{
		{
			name:  "a v2 volume takes a block disk only",
			spec:  v2,
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 500*gi), mkDisk("d2", 100*gi, block))},
			want:  []string{"a/d2"},
		},
		{
			name:    "a v2 volume on a filesystem disk is reported",
			spec:    v2,
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 500*gi))},
			wantMsg: []string{"a/d1: disk type filesystem does not match the volume's block (data engine v2)"},
		},
		{
			name:  "a v1 volume just under 16Ti fits ext4",
			spec:  big(16*ti - 1),
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 40*ti, fs("ext4")))},
			want:  []string{"a/d1"},
		},
		{
			name:    "a v1 volume of 16Ti does not fit ext4",
			spec:    big(16 * ti),
			nodes:   []Node{mkNode("a", "z1", mkDisk("d1", 40*ti, fs("ext4")))},
			wantMsg: []string{"a/d1: volume size 16Ti does not fit file system ext4 (limit 16Ti)"},
		},
		{
			name:  "xfs and a v2 volume have no such limit",
			spec:  big(16 * ti),
			nodes: []Node{mkNode("a", "z1", mkDisk("d1", 40*ti, fs("xfs")))},
			want:  []string{"a/d1"},
		},
	})
	withUUID := diskEdit(func(d *Disk) { d.UUID = "uuid-1" })
	if got := DiskFailures(mkDisk("d1", 40*ti, fs("ext4"), block, withUUID), nil, settings.Default()); len(got) != 1 ||
		got[0] != "disk type block does not match the volume's filesystem" {
		t.Errorf("DiskFailures (a v1 volume of unknown size) = %q, want only the type", got)
	}
}

// TestEligibility checks the verdict for one replica: the candidates of
// the winning stage after disk anti-affinity, and why each other disk is
// not one.
func TestEligibility(t *testing.T) {
	req := placeCase{
		set: soft(true, true, true),
		nodes: []Node{
			mkNode("a", "z1", mkDisk("d1", 100*gi), mkDisk("d2", 100*gi)),
			mkNode("b", "z2", mkDisk("d1", 100*gi), mkDisk("d2", 5*gi)),
			mkNode("c", "z1", mkDisk("d1", 100*gi)),
		},
		existing: []Replica{rep("a", "d1"), rep("b", "d1")},
		count:    3, // ignored
	}.request()
	got := Eligibility(req)
	want := Verdict{
		Candidates: []Choice{{NodeID: "c", DiskName: "d1", DiskUUID: "c-d1", DiskPath: "/mnt/d1"}},
		Failures: []Failure{
			{Node: "a", Disk: "d1", Reasons: []string{"anti-affinity prefers a node without a replica of the volume"}},
			{Node: "a", Disk: "d2", Reasons: []string{"anti-affinity prefers a node without a replica of the volume"}},
			{Node: "b", Disk: "d1", Reasons: []string{"anti-affinity prefers a node without a replica of the volume"}},
			{Node: "b", Disk: "d2", Reasons: []string{"insufficient storage: requested 10Gi, 5Gi usable of limit 5Gi"}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Eligibility =\n%+v\nwant\n%+v", got, want)
	}

	req.Nodes = req.Nodes[:2]
	got = Eligibility(req)
	if len(got.Candidates) != 1 || got.Candidates[0].DiskUUID != "a-d2" || got.Reason != "" {
		t.Errorf("Eligibility with a and b only = %+v, want a/d2 (the used nodes' disk without a replica)", got)
	}
	wantFailure := Failure{Node: "a", Disk: "d1", Reasons: []string{"disk anti-affinity prefers a disk without a replica of the volume"}}
	if !slices.ContainsFunc(got.Failures, func(f Failure) bool { return reflect.DeepEqual(f, wantFailure) }) {
		t.Errorf("failures %v do not include %v", got.Failures, wantFailure)
	}

	req.Nodes = req.Nodes[1:2]
	req.Settings.ReplicaDiskSoftAntiAffinity = false
	got = Eligibility(req)
	wantMsg := "placed 0 of 1 new replicas of volume vol: b/d1: disk already holds a replica of the volume and disk anti-affinity is hard; " +
		"b/d2: insufficient storage: requested 10Gi, 5Gi usable of limit 5Gi"
	if len(got.Candidates) != 0 || got.Reason != ReasonReplicaSchedulingFailure || got.Message != wantMsg {
		t.Errorf("Eligibility with b only and disk anti-affinity hard = %+v, want no candidate and message %q", got, wantMsg)
	}
}
