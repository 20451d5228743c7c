package diskfs

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// BlockSize is the block size the filesystem reports to statfs (f_bsize
// and f_frsize); its sizes are counted in these blocks, rounded down.
const BlockSize = 4096

// defaultFilesSize is the size of the tmpfs that holds a disk's real
// files unless FilesSize says otherwise: room for Longhorn's disk config
// and the directories of many replicas and backing images.
const defaultFilesSize = 1 << 20

// Option configures Mount.
type Option func(*options)

// options are what the Options set.
type options struct {
	filesSize int64
	debug     bool
}

// FilesSize sets the size in bytes of the tmpfs that holds the disk's real
// files (1 MiB unless set). Writing more than that to the disk fails with
// ENOSPC, whatever its size.
func FilesSize(bytes int64) Option {
	return func(o *options) { o.filesSize = bytes }
}

// Debug makes go-fuse log every FUSE request and its answer.
func Debug() Option {
	return func(o *options) { o.debug = true }
}

// Disk is a disk filesystem mounted by Mount.
type Disk struct {
	dir    string
	server *fuse.Server
	// files is an O_PATH descriptor of the tmpfs holding the disk's real
	// files, which the FUSE mount covers.
	files int
}

// Mount mounts a disk filesystem of size bytes at dir, an existing
// directory. Statfs on it reports size (in BlockSize blocks) as its total
// and, as free and available, size less held() (a negative count taken as
// 0) less the bytes the real files on it take (whole pages of the tmpfs
// beneath), never below 0; its file counts are those of the tmpfs
// holding the real files. held is called on every statfs, from the
// goroutines serving the filesystem: it must be safe to call concurrently
// and must not touch the disk itself.
func Mount(dir string, size int64, held func() int64, opts ...Option) (*Disk, error) {
	o := options{filesSize: defaultFilesSize}
	for _, opt := range opts {
		opt(&o)
	}
	if size <= 0 {
		return nil, fmt.Errorf("mounting a disk at %s: size %d is not positive", dir, size)
	}
	if o.filesSize <= 0 {
		return nil, fmt.Errorf("mounting a disk at %s: files size %d is not positive", dir, o.filesSize)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", o.filesSize)); err != nil {
		return nil, fmt.Errorf("mounting a disk at %s: mounting the tmpfs for its files: %w", dir, err)
	}
	d := &Disk{dir: dir, files: -1}
	fail := func(err error) (*Disk, error) {
		if cerr := d.unmountFiles(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, fmt.Errorf("mounting a disk at %s: %w", dir, err)
	}
	files, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("opening the tmpfs for its files: %w", err))
	}
	d.files = files
	loopback, err := fs.NewLoopbackRoot(d.filesPath())
	if err != nil {
		return fail(fmt.Errorf("serving the tmpfs for its files: %w", err))
	}
	root := &node{LoopbackNode: loopback.(*fs.LoopbackNode), space: &space{size: size, held: held, files: d.filesPath()}}
	root.RootData.RootNode = root
	d.server, err = fs.Mount(dir, root, &fs.Options{MountOptions: fuse.MountOptions{
		FsName:            "diskfs",
		Name:              "diskfs",
		DirectMountStrict: true,
		Debug:             o.debug,
	}})
	if err != nil {
		return fail(fmt.Errorf("mounting FUSE: %w", err))
	}
	return d, nil
}

// Dir is the directory the disk is mounted at.
func (d *Disk) Dir() string { return d.dir }

// Unmount unmounts the disk: the FUSE filesystem, once the kernel holds no
// file of it open, then the tmpfs beneath it, which takes its real files
// with it. The directory is left as it was before Mount.
func (d *Disk) Unmount() error {
	if err := d.server.Unmount(); err != nil {
		return fmt.Errorf("unmounting the disk at %s: %w", d.dir, err)
	}
	if err := d.unmountFiles(); err != nil {
		return fmt.Errorf("unmounting the disk at %s: %w", d.dir, err)
	}
	return nil
}

// filesPath is a path of the tmpfs holding the disk's real files that
// stays reachable under the FUSE mount: its descriptor's.
func (d *Disk) filesPath() string { return fmt.Sprintf("/proc/self/fd/%d", d.files) }

// unmountFiles closes the descriptor of the tmpfs holding the disk's real
// files and unmounts it.
func (d *Disk) unmountFiles() error {
	if d.files >= 0 {
		if err := unix.Close(d.files); err != nil {
			return fmt.Errorf("closing the tmpfs for its files: %w", err)
		}
		d.files = -1
	}
	if err := unix.Unmount(d.dir, 0); err != nil {
		return fmt.Errorf("unmounting the tmpfs for its files: %w", err)
	}
	return nil
}

// space is what a disk's statfs reports.
type space struct {
	size  int64
	held  func() int64
	files string
}

// statfs fills out: size as the total, and as free what neither held()
// nor the real files (the tmpfs at s.files) take.
func (s *space) statfs(out *fuse.StatfsOut) syscall.Errno {
	var st unix.Statfs_t
	if err := unix.Statfs(s.files, &st); err != nil {
		return fs.ToErrno(err)
	}
	used := int64(st.Blocks-st.Bfree) * st.Bsize
	free := max(s.size-max(s.held(), 0)-used, 0)
	*out = fuse.StatfsOut{}
	out.Blocks = uint64(s.size / BlockSize)
	out.Bfree = uint64(free / BlockSize)
	out.Bavail = out.Bfree
	out.Files = st.Files
	out.Ffree = st.Ffree
	out.Bsize = BlockSize
	out.Frsize = BlockSize
	out.NameLen = uint32(st.Namelen)
	return fs.OK
}

// node is a loopback node of the disk's real files whose statfs reports
// the disk's space; every node under it is one too.
type node struct {
	*fs.LoopbackNode
	space *space
}

var (
	_ fs.NodeStatfser    = (*node)(nil)
	_ fs.NodeWrapChilder = (*node)(nil)
)

// Statfs reports the disk's space, whichever of its files it is asked on.
func (n *node) Statfs(_ context.Context, out *fuse.StatfsOut) syscall.Errno {
	return n.space.statfs(out)
}

// WrapChild makes the nodes go-fuse's loopback creates under n nodes of
// the disk.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	loopback, ok := ops.(*fs.LoopbackNode)
	if !ok {
		return ops
	}
	return &node{LoopbackNode: loopback, space: n.space}
}
