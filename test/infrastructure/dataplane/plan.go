package dataplane

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
)

// Plan is what the sandbox's simulated data plane consists of, as the
// sandbox hands it to sandbox-longhorn in a JSON file: each node's
// instance manager address and disks.
type Plan struct {
	// DiskRoot is the directory every disk is mounted under.
	DiskRoot string `json:"diskRoot"`
	// Nodes are the nodes, each with its instance manager and disks.
	Nodes []Node `json:"nodes"`
	// RebuildRate is how many bytes a second a rebuild copies onto a new
	// replica; 0 is DefaultRebuildRate.
	RebuildRate int64 `json:"rebuildRate,omitempty"`
}

// Node is one node's share of the data plane.
type Node struct {
	// Name is the node's name.
	Name string `json:"name"`
	// IP is the node's address (127.0.0.0/8), its pods' IP, where its
	// instance manager serves.
	IP string `json:"ip"`
	// Disks are the node's disks.
	Disks []Disk `json:"disks"`
}

// ReadPlan reads a Plan from a JSON file.
func ReadPlan(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the data plane: %w", err)
	}
	dp := &Plan{}
	if err := json.Unmarshal(b, dp); err != nil {
		return nil, fmt.Errorf("reading the data plane from %s: %w", path, err)
	}
	return dp, nil
}

// Write writes dp to a JSON file.
func (dp *Plan) Write(path string) error {
	b, err := json.MarshalIndent(dp, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing the data plane: %w", err)
	}
	return nil
}

// APIURL is where longhorn-manager's REST API serves: the first node's
// longhorn-manager pod, at Longhorn's API port (9500), as Longhorn's CSI
// driver reaches it through the longhorn-backend Service.
func (dp *Plan) APIURL() string {
	if len(dp.Nodes) == 0 {
		return ""
	}
	return "http://" + net.JoinHostPort(dp.Nodes[0].IP, "9500") + "/v1"
}

// Disks are every node's disks.
func (dp *Plan) Disks() []Disk {
	var out []Disk
	for _, n := range dp.Nodes {
		out = append(out, n.Disks...)
	}
	return out
}

// Disk is one disk of the sandbox's topology as a host has it: a
// filesystem of its size mounted at its path, which Longhorn's node
// controller reads with statfs.
type Disk struct {
	// Name is the disk's name in its Longhorn Node's spec.disks.
	Name string `json:"name"`
	// UUID is the disk's UUID, found in its longhorn-disk.cfg as on a disk
	// Longhorn used before.
	UUID string `json:"uuid"`
	// Path is where the disk is mounted, its spec.disks path.
	Path string `json:"path"`
	// Size is the filesystem's size in bytes.
	Size int64 `json:"size"`
}
