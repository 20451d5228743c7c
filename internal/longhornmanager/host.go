package longhornmanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	lhns "github.com/longhorn/go-common-libs/ns"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhutil "github.com/longhorn/longhorn-manager/util"
	"golang.org/x/sys/unix"

	"github.com/longhorn/diskschedule/internal/dataplane"
)

// MountDisks gives each disk a filesystem of its size at its path: a tmpfs
// of that size (statfs reports exactly it; nothing is written to it but
// Longhorn's disk config), under one tmpfs mounted at root. It must run in
// a mount namespace of the process's own, and refuses otherwise: mounted in
// the host's, the disks would outlive the sandbox.
func MountDisks(root string, disks []dataplane.Disk) error {
	own, err := ownMountNamespace()
	if err != nil {
		return err
	}
	if !own {
		return errors.New("mounting the sandbox's disks: the process shares the host's mount namespace; start it in one of its own (CLONE_NEWNS)")
	}
	// Nothing mounted here propagates to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mount namespace private: %w", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", root, err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		return fmt.Errorf("mounting a tmpfs at %s: %w", root, err)
	}
	for _, d := range disks {
		if err := os.MkdirAll(d.Path, 0o755); err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
		if err := unix.Mount("tmpfs", d.Path, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", d.Size)); err != nil {
			return fmt.Errorf("disk %s: mounting a tmpfs of %d bytes at %s: %w", d.Name, d.Size, d.Path, err)
		}
		cfg, err := json.Marshal(lhutil.DiskConfig{DiskName: d.Name, DiskUUID: d.UUID, DiskDriver: lhv1.DiskDriverNone})
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
		if err := os.WriteFile(filepath.Join(d.Path, lhutil.DiskConfigFile), cfg, 0o644); err != nil {
			return fmt.Errorf("disk %s: writing its disk config: %w", d.Name, err)
		}
		// Longhorn keeps a disk's replicas' data directories here.
		if err := os.Mkdir(filepath.Join(d.Path, "replicas"), 0o755); err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
	}
	return nil
}

// ownMountNamespace reports whether the process's mount namespace differs
// from its parent's.
func ownMountNamespace() (bool, error) {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return false, fmt.Errorf("reading the mount namespace: %w", err)
	}
	parent, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", os.Getppid()))
	if err != nil {
		return false, fmt.Errorf("reading the parent's mount namespace: %w", err)
	}
	return self != parent, nil
}

// RunOnThisHost makes longhorn-manager's host operations (go-common-libs'
// ns.RunFunc: a disk's statfs, its disk config) run in the process itself.
// In a cluster longhorn-manager runs in a container and joins the host's
// namespaces through /host/proc; here it runs on the host, in the mount
// namespace that holds the sandbox's disks. ns.NewJoiner is the hook
// go-common-libs exports for this.
func RunOnThisHost() {
	lhns.NewJoiner = func(string, time.Duration) (lhns.JoinerInterface, error) { return thisHost{}, nil }
}

// thisHost runs functions in the process's own namespaces.
type thisHost struct{}

// Revert has nothing to revert.
func (thisHost) Revert() error { return nil }

// Run runs fn.
func (thisHost) Run(fn func() (interface{}, error)) (interface{}, error) { return fn() }
