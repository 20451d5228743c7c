package diskfs_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/longhorn/diskschedule/test/infrastructure/diskfs"
)

// inMountNamespace is set in the environment of the test binary that
// TestMain runs again in a mount namespace of its own.
const inMountNamespace = "DISKFS_TEST_IN_MOUNT_NAMESPACE"

// TestMain runs the tests again in a process of their own mount namespace
// (CLONE_NEWNS, its mounts made private), so that no disk they mount is
// seen on the host or outlives them; a process that cannot mount (not
// root) runs them here, where the tests that mount skip.
func TestMain(m *testing.M) {
	if os.Getenv(inMountNamespace) != "" {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fmt.Fprintln(os.Stderr, "making the mount namespace private:", err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	if os.Geteuid() != 0 {
		os.Exit(m.Run())
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), inMountNamespace+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "running the tests in a mount namespace of their own:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// mountDisk mounts a disk of size bytes, holding what held holds, in a
// directory of the test's own, and unmounts it when the test ends.
func mountDisk(tb testing.TB, size int64, held *atomic.Int64) *diskfs.Disk {
	tb.Helper()
	if os.Getenv(inMountNamespace) == "" {
		tb.Skip("mounting needs root, in a mount namespace of the test's own")
	}
	d, err := diskfs.Mount(tb.TempDir(), size, held.Load)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if mounted(tb, d.Dir()) == 0 {
			return
		}
		if err := d.Unmount(); err != nil {
			tb.Error(err)
		}
	})
	return d
}

// statfs is unix.Statfs of path.
func statfs(tb testing.TB, path string) unix.Statfs_t {
	tb.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		tb.Fatal(err)
	}
	return st
}

// free is what statfs of path reports free, in bytes, as Longhorn reads
// it (f_bfree × f_bsize), after checking that f_bavail says the same.
func free(tb testing.TB, path string) int64 {
	tb.Helper()
	st := statfs(tb, path)
	if st.Bavail != st.Bfree {
		tb.Errorf("statfs %s: %d blocks available, %d free; want them equal", path, st.Bavail, st.Bfree)
	}
	return int64(st.Bfree) * st.Bsize
}

// mounted is how many mounts /proc/self/mountinfo shows at dir.
func mounted(tb testing.TB, dir string) int {
	tb.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // read only
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		// Field 5 is the mount point.
		if fields := strings.Fields(s.Text()); len(fields) > 4 && fields[4] == dir {
			n++
		}
	}
	return n
}

func TestStatfsReportsSizeLessHeldAndFiles(t *testing.T) {
	const gib = int64(1) << 30
	size := 400 * gib
	var held atomic.Int64
	d := mountDisk(t, size, &held)

	st := statfs(t, d.Dir())
	if st.Type != unix.FUSE_SUPER_MAGIC || st.Bsize != diskfs.BlockSize || st.Frsize != diskfs.BlockSize {
		t.Errorf("statfs: type %#x, block size %d, fragment size %d; want FUSE's %#x and %d", st.Type, st.Bsize, st.Frsize, unix.FUSE_SUPER_MAGIC, diskfs.BlockSize)
	}
	if total := int64(st.Blocks) * st.Bsize; total != size {
		t.Errorf("statfs: total %d bytes; want the disk's size %d", total, size)
	}
	if st.Files == 0 || st.Ffree == 0 || st.Namelen != 255 {
		t.Errorf("statfs: %d files, %d free, names up to %d; want the tmpfs's", st.Files, st.Ffree, st.Namelen)
	}
	empty := free(t, d.Dir())
	if empty != size {
		t.Errorf("an empty disk: %d bytes free; want its size %d", empty, size)
	}

	held.Store(30 * gib)
	if got := free(t, d.Dir()); got != empty-30*gib {
		t.Errorf("30Gi held: %d bytes free; want %d", got, empty-30*gib)
	}

	// A file of 10000 bytes takes three pages of the tmpfs beneath.
	if err := os.WriteFile(filepath.Join(d.Dir(), "longhorn-disk.cfg"), make([]byte, 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := free(t, d.Dir()); got != empty-30*gib-3*4096 {
		t.Errorf("30Gi held and a file of 10000 bytes: %d bytes free; want %d", got, empty-30*gib-3*4096)
	}
	// Any file of the disk reports the disk.
	if err := os.Mkdir(filepath.Join(d.Dir(), "replicas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := free(t, filepath.Join(d.Dir(), "replicas")); got != empty-30*gib-3*4096 {
		t.Errorf("statfs of a directory of the disk: %d bytes free; want %d", got, empty-30*gib-3*4096)
	}

	held.Store(size + 1)
	if got := free(t, d.Dir()); got != 0 {
		t.Errorf("more than the disk held: %d bytes free; want 0", got)
	}
	held.Store(-1)
	if got := free(t, d.Dir()); got != empty-3*4096 {
		t.Errorf("a negative count held: %d bytes free; want %d, as with none", got, empty-3*4096)
	}
}

func TestFilesAreReal(t *testing.T) {
	var held atomic.Int64
	d := mountDisk(t, 1<<30, &held)
	dir := filepath.Join(d.Dir(), "replicas", "pvc-1-r-0123abcd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(dir, "volume.meta")
	if err := os.WriteFile(meta, []byte(`{"Size":1073741824}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(meta, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(meta); err != nil || string(b) != "{\"Size\":1073741824}\n" {
		t.Errorf("reading back %s: %q, %v", meta, b, err)
	}
	renamed := filepath.Join(d.Dir(), "replicas", "pvc-1-r-4567cdef")
	if err := os.Rename(dir, renamed); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(d.Dir(), "replicas"))
	if err != nil || len(entries) != 1 || entries[0].Name() != "pvc-1-r-4567cdef" || !entries[0].IsDir() {
		t.Errorf("replicas/ after the rename: %v, %v; want the directory pvc-1-r-4567cdef alone", entries, err)
	}
	if _, err := os.Stat(filepath.Join(renamed, "volume.meta")); err != nil {
		t.Errorf("the renamed directory's file: %v", err)
	}
	if err := os.Remove(filepath.Join(renamed, "volume.meta")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(renamed); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(d.Dir(), "replicas")); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(d.Dir()); err != nil || len(entries) != 0 {
		t.Errorf("the disk after removing everything: %v, %v; want it empty", entries, err)
	}
}

func TestUnmountLeavesNoMount(t *testing.T) {
	var held atomic.Int64
	d := mountDisk(t, 1<<30, &held)
	// The tmpfs holding the files, and the FUSE filesystem over it.
	if n := mounted(t, d.Dir()); n != 2 {
		t.Errorf("mounted: %d mounts at %s; want 2", n, d.Dir())
	}
	if err := os.WriteFile(filepath.Join(d.Dir(), "longhorn-disk.cfg"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmount(); err != nil {
		t.Fatal(err)
	}
	if n := mounted(t, d.Dir()); n != 0 {
		t.Errorf("unmounted: %d mounts at %s; want none", n, d.Dir())
	}
	if entries, err := os.ReadDir(d.Dir()); err != nil || len(entries) != 0 {
		t.Errorf("the directory after unmounting: %v, %v; want it empty as before", entries, err)
	}
}

func TestDisksAreDistinctDevices(t *testing.T) {
	var held atomic.Int64
	a, b := mountDisk(t, 1<<30, &held), mountDisk(t, 1<<30, &held)
	var sa, sb unix.Stat_t
	if err := unix.Stat(a.Dir(), &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(b.Dir(), &sb); err != nil {
		t.Fatal(err)
	}
	if sa.Dev == sb.Dev {
		t.Errorf("two disks on one device %d", sa.Dev)
	}
	// FUSE carries no fsid: statfs reports 0 for every disk.
	t.Logf("fsids: %v, %v", statfs(t, a.Dir()).Fsid, statfs(t, b.Dir()).Fsid)
}

// BenchmarkStatfs measures a statfs of a disk and, for comparison, of a
// tmpfs, and reports both and their ratio.
func BenchmarkStatfs(b *testing.B) {
	var held atomic.Int64
	d := mountDisk(b, 400<<30, &held)
	tmpfs := b.TempDir()
	if err := unix.Mount("tmpfs", tmpfs, "tmpfs", 0, "size=1m"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := unix.Unmount(tmpfs, 0); err != nil {
			b.Error(err)
		}
	})
	var st unix.Statfs_t
	n := 0
	for b.Loop() {
		if err := unix.Statfs(d.Dir(), &st); err != nil {
			b.Fatal(err)
		}
		n++
	}
	fuseNs := float64(b.Elapsed().Nanoseconds()) / float64(n)
	start := time.Now()
	for range n {
		if err := unix.Statfs(tmpfs, &st); err != nil {
			b.Fatal(err)
		}
	}
	tmpfsNs := float64(time.Since(start).Nanoseconds()) / float64(n)
	b.ReportMetric(tmpfsNs, "tmpfs-ns/statfs")
	b.ReportMetric(fuseNs/tmpfsNs, "diskfs/tmpfs")
}
