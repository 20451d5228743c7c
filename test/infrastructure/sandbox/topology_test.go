package sandbox_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

const gi = int64(1) << 30

func TestTopologyParse(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want *sandbox.Topology
		// errs are substrings the error must contain; nil means no error.
		errs []string
	}{{
		name: "every field, and the defaults",
		doc: `
nodes:
- name: node-1
  zone: zone-a
  region: region-1
  tags: [main, storage]
  disks:
  - name: disk-1
    size: 400Gi
    reserved: 10Gi
    tags: [ssd]
  - name: disk-2
    size: 1073741824
- name: node-2
`,
		want: &sandbox.Topology{Nodes: []sandbox.Node{
			{Name: "node-1", Zone: "zone-a", Region: "region-1", Tags: []string{"main", "storage"}, Disks: []sandbox.Disk{
				{Name: "disk-1", Size: 400 * gi, Reserved: 10 * gi, Tags: []string{"ssd"}},
				{Name: "disk-2", Size: gi},
			}},
			{Name: "node-2"},
		}},
	}, {
		name: "reserved may be a plain 0",
		doc:  "nodes:\n- name: n\n  disks:\n  - {name: d, size: 1Gi, reserved: 0}\n",
		want: &sandbox.Topology{Nodes: []sandbox.Node{{Name: "n", Disks: []sandbox.Disk{{Name: "d", Size: gi}}}}},
	}, {
		name: "an unknown node field",
		doc:  "nodes:\n- name: n\n  zones: a\n",
		errs: []string{"line 3: field zones not found"},
	}, {
		name: "an unknown disk field",
		doc:  "nodes:\n- name: n\n  disks:\n  - {name: d, size: 1Gi, capacity: 2Gi}\n",
		errs: []string{"line 4: field capacity not found"},
	}, {
		name: "an unknown top-level field",
		doc:  "nodes: [{name: n}]\nextender: true\n",
		errs: []string{"line 2: field extender not found"},
	}, {
		name: "a duplicate key",
		doc:  "nodes:\n- name: n\n  name: m\n",
		errs: []string{`mapping key "name" already defined`},
	}, {
		name: "an empty file",
		doc:  "",
		errs: []string{"at least one node is required"},
	}, {
		name: "no nodes",
		doc:  "nodes: []\n",
		errs: []string{"at least one node is required"},
	}, {
		name: "duplicate node and disk names",
		doc: `
nodes:
- name: n
  disks:
  - {name: d, size: 1Gi}
  - {name: d, size: 2Gi}
- name: n
`,
		errs: []string{`node "n" disk "d": duplicate disk name`, `node "n": duplicate node name`},
	}, {
		name: "bad sizes, each reported where it is",
		doc: `
nodes:
- name: n
  disks:
  - {name: a, size: 40Gx}
  - {name: b, size: -1Gi}
  - {name: c, size: 0}
  - {name: d}
  - {name: e, size: 1Gi, reserved: 2Gi}
  - {name: f, size: 1Gi, reserved: lots}
`,
		errs: []string{
			`node "n" disk "a": size: "40Gx"`,
			`node "n" disk "b": size: "-1Gi" must not be negative`,
			`node "n" disk "c": size must be greater than 0`,
			`node "n" disk "d": size is required`,
			`node "n" disk "e": reserved 2Gi exceeds size 1Gi`,
			`node "n" disk "f": reserved: "lots"`,
		},
	}, {
		name: "bad names, labels and tags",
		doc: `
nodes:
- name: Node_1
  zone: "not a zone"
  tags: ["", ok, ok]
  disks:
  - {name: disk.1, size: 1Gi}
- disks: [{size: 1Gi}]
`,
		errs: []string{
			`node "Node_1": name:`,
			`node "Node_1": zone "not a zone"`,
			`node "Node_1": tags: "": a tag is`,
			`node "Node_1": tags: "ok": duplicate tag`,
			`node "Node_1" disk "disk.1": name:`,
			`nodes[1]: name is required`,
			`nodes[1] disks[0]: name is required`,
		},
	}, {
		name: "not YAML",
		doc:  "nodes: [",
		errs: []string{"parsing"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sandbox.ParseTopology([]byte(tt.doc))
			if tt.errs == nil {
				if err != nil {
					t.Fatalf("ParseTopology: %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("ParseTopology =\n%+v\nwant\n%+v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseTopology = %+v, want an error", got)
			}
			for _, want := range tt.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\ndoes not contain %q", err, want)
				}
			}
		})
	}
}

// TestTopologyFiles checks the shipped topologies: the setups of the
// Longhorn scheduler extender's test plan.
func TestTopologyFiles(t *testing.T) {
	tests := []struct {
		file string
		// disks are each node's disk sizes in GiB, in order.
		disks [][]int64
	}{
		{"topology.yaml", [][]int64{{400}, {400}, {400}, {400}}},
		{"multi-disk.yaml", [][]int64{{100}, {100, 100}, {100, 100, 100}, {100, 100, 100, 100}}},
		{"drain.yaml", [][]int64{{400}, {400}, {99}, {99}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			topo, err := sandbox.LoadTopology(filepath.Join(testenv.RepoRoot(), "config", "sandbox", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var got [][]int64
			for _, n := range topo.Nodes {
				var sizes []int64
				for _, d := range n.Disks {
					if d.Reserved != 0 {
						t.Errorf("node %s disk %s reserves %d bytes, want 0", n.Name, d.Name, d.Reserved)
					}
					sizes = append(sizes, d.Size/gi)
				}
				got = append(got, sizes)
			}
			if !reflect.DeepEqual(got, tt.disks) {
				t.Errorf("disk sizes (GiB) = %v, want %v", got, tt.disks)
			}
		})
	}
	if _, err := sandbox.LoadTopology(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("LoadTopology of a missing file succeeded")
	}
}

func TestTopologyObjects(t *testing.T) {
	topo, err := sandbox.ParseTopology([]byte(`
nodes:
- name: node-1
  zone: zone-a
  region: region-1
  tags: [main]
  disks:
  - {name: disk-1, size: 400Gi, reserved: 1Gi, tags: [ssd]}
  - {name: disk-2, size: 100Gi}
- name: node-2
  disks:
  - {name: disk-1, size: 400Gi}
`))
	if err != nil {
		t.Fatal(err)
	}

	kn := simcluster.KubernetesNode(topo.Longhorn()[0])
	wantLabels := map[string]string{
		"kubernetes.io/hostname": "node-1", "topology.kubernetes.io/zone": "zone-a", "topology.kubernetes.io/region": "region-1",
	}
	if !reflect.DeepEqual(kn.Labels, wantLabels) {
		t.Errorf("Kubernetes node labels = %v, want %v", kn.Labels, wantLabels)
	}

	ln := topo.Longhorn()[0]
	wantNode := simcluster.NodeSpec{
		Name: "node-1", Zone: "zone-a", Region: "region-1", Tags: []string{"main"},
		Disks: []simcluster.DiskSpec{
			{Name: "disk-1", Reserved: gi, Tags: []string{"ssd"}},
			{Name: "disk-2"},
		},
	}
	if !reflect.DeepEqual(ln, wantNode) {
		t.Errorf("the simulated cluster's node = %+v, want %+v", ln, wantNode)
	}

	// Disk UUIDs name DiskSchedules: stable, distinct per node and disk, valid names.
	seen := map[string]bool{}
	for _, node := range topo.Nodes {
		for _, d := range node.Disks {
			uuid := sandbox.DiskUUID(node.Name, d.Name)
			if uuid != sandbox.DiskUUID(node.Name, d.Name) {
				t.Errorf("DiskUUID(%s, %s) is not stable", node.Name, d.Name)
			}
			if seen[uuid] {
				t.Errorf("DiskUUID(%s, %s) = %s is not unique", node.Name, d.Name, uuid)
			}
			seen[uuid] = true
			if errs := validation.IsDNS1123Subdomain(uuid); len(errs) > 0 || len(uuid) != 36 {
				t.Errorf("DiskUUID(%s, %s) = %q is not a UUID-shaped object name: %v", node.Name, d.Name, uuid, errs)
			}
		}
	}
}
