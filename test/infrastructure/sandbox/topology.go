package sandbox

import (
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// Topology is a simulated cluster: its nodes and their disks. It is read
// from a YAML file (LoadTopology) of the form
//
//	nodes:
//	- name: node-1
//	  zone: zone-a          # optional; region optional too
//	  tags: [main, storage] # optional Longhorn node tags
//	  disks:
//	  - name: disk-1
//	    size: 400Gi         # storageMaximum; storageAvailable starts equal
//	    reserved: 0         # storageReserved (default 0)
//	    tags: [ssd]         # optional
type Topology struct {
	// Nodes are the cluster's nodes, in file order.
	Nodes []Node
}

// Node is one simulated node: a Ready Kubernetes Node and a Longhorn Node.
type Node struct {
	// Name names both the Kubernetes and the Longhorn Node.
	Name string
	// Zone is the topology.kubernetes.io/zone label; "" for none.
	Zone string
	// Region is the topology.kubernetes.io/region label; "" for none.
	Region string
	// Tags are the Longhorn node tags.
	Tags []string
	// Disks are the node's disks, in file order.
	Disks []Disk
}

// Disk is one simulated disk of a node.
type Disk struct {
	// Name is the disk's name in the Longhorn Node's spec.disks.
	Name string
	// Size is storageMaximum in bytes; storageAvailable starts equal.
	Size int64
	// Reserved is storageReserved in bytes.
	Reserved int64
	// Tags are the Longhorn disk tags.
	Tags []string
}

// topologyFile is the file format; unknown fields are rejected.
// It is read as YAML 1.2 (a node named "n" or "no" stays a string).
type topologyFile struct {
	Nodes []nodeFile `yaml:"nodes"`
}

type nodeFile struct {
	Name   string     `yaml:"name"`
	Zone   string     `yaml:"zone"`
	Region string     `yaml:"region"`
	Tags   []string   `yaml:"tags"`
	Disks  []diskFile `yaml:"disks"`
}

type diskFile struct {
	Name     string   `yaml:"name"`
	Size     quantity `yaml:"size"`
	Reserved quantity `yaml:"reserved"`
	Tags     []string `yaml:"tags"`
}

// quantity keeps a size as written, a quantity ("400Gi") or a plain byte
// count, so that a bad one is reported with the node and disk it belongs to.
type quantity string

// UnmarshalYAML keeps the scalar's text.
func (q *quantity) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a size must be a quantity such as 400Gi or a byte count", node.Line)
	}
	*q = quantity(node.Value)
	return nil
}

// tagPattern is what a Longhorn node or disk tag may look like.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// LoadTopology reads and validates the topology file at path.
func LoadTopology(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the topology: %w", err)
	}
	t, err := ParseTopology(data)
	if err != nil {
		return nil, fmt.Errorf("topology %s: %w", path, err)
	}
	return t, nil
}

// ParseTopology parses and validates a topology document. Unknown fields,
// duplicate keys, duplicate names, bad names and bad sizes are errors;
// every problem found is reported, one per line.
func ParseTopology(data []byte) (*Topology, error) {
	var f topologyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(f.Nodes) == 0 {
		bad("nodes: at least one node is required")
	}
	t := &Topology{}
	nodeNames := map[string]bool{}
	for i, nf := range f.Nodes {
		where := fmt.Sprintf("nodes[%d]", i)
		if nf.Name != "" {
			where = fmt.Sprintf("node %q", nf.Name)
		}
		switch {
		case nf.Name == "":
			bad("%s: name is required", where)
		case nodeNames[nf.Name]:
			bad("%s: duplicate node name", where)
		default:
			for _, msg := range validation.IsDNS1123Subdomain(nf.Name) {
				bad("%s: name: %s", where, msg)
			}
		}
		nodeNames[nf.Name] = true
		for _, label := range []struct{ field, value string }{{"zone", nf.Zone}, {"region", nf.Region}} {
			for _, msg := range validation.IsValidLabelValue(label.value) {
				bad("%s: %s %q: %s", where, label.field, label.value, msg)
			}
		}
		for _, err := range checkTags(nf.Tags) {
			bad("%s: tags: %v", where, err)
		}
		n := Node{Name: nf.Name, Zone: nf.Zone, Region: nf.Region, Tags: nf.Tags}
		diskNames := map[string]bool{}
		for j, df := range nf.Disks {
			dwhere := fmt.Sprintf("%s disks[%d]", where, j)
			if df.Name != "" {
				dwhere = fmt.Sprintf("%s disk %q", where, df.Name)
			}
			switch {
			case df.Name == "":
				bad("%s: name is required", dwhere)
			case diskNames[df.Name]:
				bad("%s: duplicate disk name", dwhere)
			default:
				for _, msg := range validation.IsDNS1123Label(df.Name) {
					bad("%s: name: %s", dwhere, msg)
				}
			}
			diskNames[df.Name] = true
			d := Disk{Name: df.Name, Tags: df.Tags}
			var err error
			if df.Size == "" {
				bad("%s: size is required", dwhere)
			} else if d.Size, err = parseSize(df.Size); err != nil {
				bad("%s: size: %v", dwhere, err)
			} else if d.Size == 0 {
				bad("%s: size must be greater than 0", dwhere)
			}
			if df.Reserved != "" {
				if d.Reserved, err = parseSize(df.Reserved); err != nil {
					bad("%s: reserved: %v", dwhere, err)
				} else if d.Size > 0 && d.Reserved > d.Size {
					bad("%s: reserved %s exceeds size %s", dwhere, df.Reserved, df.Size)
				}
			}
			for _, err := range checkTags(df.Tags) {
				bad("%s: tags: %v", dwhere, err)
			}
			n.Disks = append(n.Disks, d)
		}
		t.Nodes = append(t.Nodes, n)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t, nil
}

// parseSize parses a quantity into bytes; it must not be negative.
func parseSize(q quantity) (int64, error) {
	v, err := resource.ParseQuantity(string(q))
	if err != nil {
		return 0, fmt.Errorf("%q: %w", string(q), err)
	}
	if v.Sign() < 0 {
		return 0, fmt.Errorf("%q must not be negative", string(q))
	}
	return v.Value(), nil
}

func checkTags(tags []string) []error {
	var errs []error
	seen := map[string]bool{}
	for _, tag := range tags {
		switch {
		case !tagPattern.MatchString(tag):
			errs = append(errs, fmt.Errorf("%q: a tag is letters, digits, '-', '_' and '.', starting and ending with a letter or digit", tag))
		case seen[tag]:
			errs = append(errs, fmt.Errorf("%q: duplicate tag", tag))
		}
		seen[tag] = true
	}
	return errs
}

// DiskCount returns how many disks the topology has.
func (t *Topology) DiskCount() int {
	n := 0
	for _, node := range t.Nodes {
		n += len(node.Disks)
	}
	return n
}

// DiskUUID returns the stable UUID of a node's disk: a name-based (version
// 5 style) UUID of node and disk name, so a restarted sandbox names every
// DiskSchedule as before.
func DiskUUID(node, disk string) string {
	sum := sha1.Sum([]byte("diskschedule-sandbox/" + node + "/" + disk))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Longhorn returns the topology as the simulated cluster's node list: each
// disk with its reservation and tags (its size and UUID are the data
// plane's: newDataPlane).
func (t *Topology) Longhorn() []simcluster.NodeSpec {
	out := make([]simcluster.NodeSpec, 0, len(t.Nodes))
	for _, n := range t.Nodes {
		spec := simcluster.NodeSpec{Name: n.Name, Zone: n.Zone, Region: n.Region, Tags: n.Tags}
		for _, d := range n.Disks {
			spec.Disks = append(spec.Disks, simcluster.DiskSpec{
				Name: d.Name, Reserved: d.Reserved, Tags: d.Tags,
			})
		}
		out = append(out, spec)
	}
	return out
}
