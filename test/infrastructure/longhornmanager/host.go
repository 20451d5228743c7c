package longhornmanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	lhns "github.com/longhorn/go-common-libs/ns"
	lhcltypes "github.com/longhorn/go-common-libs/types"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhutil "github.com/longhorn/longhorn-manager/util"
	"golang.org/x/sys/unix"

	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
	"github.com/longhorn/diskschedule/test/infrastructure/diskfs"
)

// Disks are the sandbox's disks, mounted by MountDisks.
type Disks struct {
	root    string
	mounted []*diskfs.Disk
}

// MountDisks gives each disk a filesystem of its size at its path, under
// one tmpfs mounted at root: a diskfs filesystem whose statfs reports the
// disk's size, and as free what neither held(disk.Path) (the bytes the
// data plane holds on the disk, counted, not stored) nor the real files on
// it take. Longhorn's disk config is written to each, with the replicas/
// directory Longhorn keeps its replicas' data directories in. It must run
// in a mount namespace of the process's own, and refuses otherwise:
// mounted in the host's, the disks would outlive the sandbox; in its own
// they go with the process however it ends.
func MountDisks(root string, disks []dataplane.Disk, held func(diskPath string) int64) (*Disks, error) {
	if err := privateMountNamespace("the sandbox's disks"); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", root, err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		return nil, fmt.Errorf("mounting a tmpfs at %s: %w", root, err)
	}
	ds := &Disks{root: root}
	for _, d := range disks {
		if err := ds.mount(d, held); err != nil {
			return nil, errors.Join(err, ds.Unmount())
		}
	}
	return ds, nil
}

// mount mounts the disk d (MountDisks).
func (ds *Disks) mount(d dataplane.Disk, held func(diskPath string) int64) error {
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return fmt.Errorf("disk %s: %w", d.Name, err)
	}
	m, err := diskfs.Mount(d.Path, d.Size, func() int64 { return held(d.Path) })
	if err != nil {
		return fmt.Errorf("disk %s: %w", d.Name, err)
	}
	ds.mounted = append(ds.mounted, m)
	cfg, err := json.Marshal(lhutil.DiskConfig{DiskName: d.Name, DiskUUID: d.UUID, DiskDriver: lhv1.DiskDriverNone})
	if err != nil {
		return fmt.Errorf("disk %s: %w", d.Name, err)
	}
	if err := os.WriteFile(filepath.Join(d.Path, lhutil.DiskConfigFile), cfg, 0o644); err != nil {
		return fmt.Errorf("disk %s: writing its disk config: %w", d.Name, err)
	}
	if err := os.Mkdir(filepath.Join(d.Path, "replicas"), 0o755); err != nil {
		return fmt.Errorf("disk %s: %w", d.Name, err)
	}
	return nil
}

// Unmount unmounts every disk, then the tmpfs they are under, and says
// which could not be.
func (ds *Disks) Unmount() error {
	var errs []error
	for _, m := range ds.mounted {
		if err := m.Unmount(); err != nil {
			errs = append(errs, err)
		}
	}
	ds.mounted = nil
	if len(errs) == 0 {
		if err := unix.Unmount(ds.root, 0); err != nil {
			errs = append(errs, fmt.Errorf("unmounting the tmpfs at %s: %w", ds.root, err))
		}
	}
	return errors.Join(errs...)
}

// privateMountNamespace makes the process's own mount namespace private,
// so that nothing mounted in it propagates to the host, and refuses when
// the process shares the host's: what would be mounted there (what) would
// outlive the sandbox.
func privateMountNamespace(what string) error {
	own, err := ownMountNamespace()
	if err != nil {
		return err
	}
	if !own {
		return fmt.Errorf("mounting %s: the process shares the host's mount namespace; start it in one of its own (CLONE_NEWNS)", what)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("mounting %s: making the mount namespace private: %w", what, err)
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

// Run runs fn and returns what it returns, but for a disk's stat
// (go-common-libs' ns.GetDiskStat) that carries no filesystem ID: the
// sandbox's disks are FUSE filesystems (MountDisks), FUSE's protocol
// carries no fsid, and the kernel reports 0 for each, so Longhorn's node
// controller, which lets one disk per filesystem ID be ready, would find
// every disk of a node on one filesystem. Such a stat is given an ID made
// of the disk's device number (each FUSE mount has a device of its own),
// as the kernel's u64_to_fsid(huge_encode_dev(dev)) makes one for
// filesystems without one of their own, in io.GetDiskStat's format.
func (thisHost) Run(fn func() (interface{}, error)) (interface{}, error) {
	res, err := fn()
	if stat, ok := res.(lhcltypes.DiskStat); ok && err == nil && stat.DiskID == noFilesystemID {
		var st unix.Stat_t
		if err := unix.Stat(stat.Path, &st); err != nil {
			return nil, fmt.Errorf("reading the device of %s: %w", stat.Path, err)
		}
		// The fsid's two words, low then high, joined as io.GetDiskStat joins them.
		stat.DiskID = fmt.Sprintf("%012x", uint64(uint32(st.Dev))<<32|uint64(uint32(st.Dev>>32)))
		return stat, nil
	}
	return res, err
}

// noFilesystemID is io.GetDiskStat's DiskID of a filesystem whose statfs
// reports no fsid.
const noFilesystemID = "000000000000"

// ServiceAccountDir is where a pod finds its service account's token and
// the API server's CA (client-go's rest.InClusterConfig reads them there).
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// MountServiceAccountDir makes dir (ServiceAccountDir) an empty tmpfs in
// the process's own mount namespace, for the files a pod's service account
// mount holds, without creating anything on the host, and refuses to run
// in the host's mount namespace. When dir exists, the tmpfs is mounted on
// it (hiding, for this process only, what it held). Otherwise the tmpfs is
// mounted on dir's deepest existing ancestor (for ServiceAccountDir on a
// host that is no pod, /run, which /var/run links to) and every entry the
// ancestor held is put back in it as it was: a directory or file bound
// (recursively) from the original, which stays reachable through a
// descriptor opened before the mount, a symbolic link made again; then the
// missing directories down to dir are made in the tmpfs.
func MountServiceAccountDir(dir string) error {
	if err := privateMountNamespace("the service account's files"); err != nil {
		return err
	}
	anchor := dir
	for {
		if _, err := os.Stat(anchor); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("mounting the service account's files: %w", err)
		}
		anchor = filepath.Dir(anchor)
	}
	if anchor == dir {
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
			return fmt.Errorf("mounting a tmpfs at %s: %w", dir, err)
		}
		return nil
	}
	anchor, err := filepath.EvalSymlinks(anchor)
	if err != nil {
		return fmt.Errorf("mounting the service account's files: %w", err)
	}
	if anchor == "/" {
		return fmt.Errorf("mounting the service account's files: no directory of %s but / exists", dir)
	}
	if err := overlayTmpfs(anchor); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mounting the service account's files: %w", err)
	}
	return nil
}

// overlayTmpfs mounts a tmpfs on the directory dir and puts dir's entries
// back in it (MountServiceAccountDir).
func overlayTmpfs(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dir, err)
	}
	defer unix.Close(fd) //nolint:errcheck // an O_PATH descriptor
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=1m,mode=%04o", st.Mode&0o7777)); err != nil {
		return fmt.Errorf("mounting a tmpfs at %s: %w", dir, err)
	}
	if err := os.Chown(dir, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("mounting a tmpfs at %s: %w", dir, err)
	}
	original := fmt.Sprintf("/proc/self/fd/%d", fd)
	for _, e := range entries {
		src, dst := filepath.Join(original, e.Name()), filepath.Join(dir, e.Name())
		switch {
		case e.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				return fmt.Errorf("putting %s back: %w", dst, err)
			}
			if err := os.Symlink(target, dst); err != nil {
				return fmt.Errorf("putting %s back: %w", dst, err)
			}
			continue
		case e.IsDir():
			if err := os.Mkdir(dst, 0o755); err != nil {
				return fmt.Errorf("putting %s back: %w", dst, err)
			}
		default:
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return fmt.Errorf("putting %s back: %w", dst, err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("putting %s back: %w", dst, err)
			}
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("putting %s back: binding it from the original: %w", dst, err)
		}
	}
	return nil
}
