package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	lhtypes "github.com/longhorn/longhorn-manager/types"
	"github.com/longhorn/types/pkg/generated/enginerpc"
)

// ErrNoSpace is what a write past a full disk fails with, in the replica
// that cannot take it: the error a replica's sparse file returns when its
// filesystem has no block left.
var ErrNoSpace = syscall.ENOSPC

// holdings are the bytes the replicas of one network hold, counted and
// never stored: per replica data directory (the directory longhorn-manager
// gives the replica process, under its disk's replicas/), what was written
// to it. A directory's bytes stay on its disk while the directory exists,
// whether or not a replica process runs on it, and go when
// longhorn-manager's replica controller deletes the directory, as a
// replica's files do.
type holdings struct {
	mu sync.Mutex
	// disks are the disks' sizes by path; a data directory under none of
	// them holds bytes without a bound and is never looked for on disk.
	disks map[string]int64
	// held is the bytes each data directory holds.
	held map[string]int64
	// dirs are the replica processes' data directories by their address
	// (ip:port, the first of their ports).
	dirs map[string]string
}

func newHoldings() *holdings {
	return &holdings{disks: map[string]int64{}, held: map[string]int64{}, dirs: map[string]string{}}
}

// AddDisk tells the network a disk of size bytes is mounted at path: the
// bytes of the replica data directories under it count against it, and a
// write that would take more than it has left fails with ErrNoSpace.
func (n *Network) AddDisk(path string, size int64) {
	h := n.data
	h.mu.Lock()
	defer h.mu.Unlock()
	h.disks[filepath.Clean(path)] = size
}

// DiskHeld returns the bytes the replica data directories on the disk at
// path hold: what statfs reports used on it, besides the small files
// longhorn-manager writes there itself.
func (n *Network) DiskHeld(path string) int64 {
	n.data.prune()
	h := n.data
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.diskHeldLocked(filepath.Clean(path))
}

// DiskBytes is what one disk holds.
type DiskBytes struct {
	// Path is where the disk is mounted.
	Path string `json:"path"`
	// Size is the disk's size and Held the bytes its replica data
	// directories hold, in bytes.
	Size int64 `json:"size"`
	Held int64 `json:"held"`
}

// Disks returns what each disk the network knows holds, by path.
func (n *Network) Disks() []DiskBytes {
	n.data.prune()
	h := n.data
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]DiskBytes, 0, len(h.disks))
	for path, size := range h.disks {
		out = append(out, DiskBytes{Path: path, Size: size, Held: h.diskHeldLocked(path)})
	}
	slices.SortFunc(out, func(a, b DiskBytes) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// diskOf returns the known disk a data directory is on; h.mu is held.
func (h *holdings) diskOf(dir string) (string, bool) {
	for disk := range h.disks {
		if strings.HasPrefix(dir, disk+string(filepath.Separator)) {
			return disk, true
		}
	}
	return "", false
}

// diskHeldLocked sums the bytes of the data directories on disk; h.mu is
// held.
func (h *holdings) diskHeldLocked(disk string) int64 {
	var sum int64
	for dir, b := range h.held {
		if d, ok := h.diskOf(dir); ok && d == disk {
			sum += b
		}
	}
	return sum
}

// freeLocked returns what the disk of dir has left, and false when dir is
// on no known disk (no bound); h.mu is held.
func (h *holdings) freeLocked(dir string) (int64, bool) {
	disk, ok := h.diskOf(dir)
	if !ok {
		return 0, false
	}
	return max(h.disks[disk]-h.diskHeldLocked(disk), 0), true
}

// prune forgets the data directories on known disks that no longer exist:
// longhorn-manager deleted them, and their bytes with them.
func (h *holdings) prune() {
	h.mu.Lock()
	var dirs []string
	for dir := range h.held {
		if _, ok := h.diskOf(dir); ok {
			dirs = append(dirs, dir)
		}
	}
	h.mu.Unlock()
	var gone []string
	for _, dir := range dirs {
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			gone = append(gone, dir)
		}
	}
	if len(gone) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, dir := range gone {
		// A directory made again meanwhile (a replica started on it) keeps
		// what it holds now.
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			delete(h.held, dir)
		}
	}
}

// replicaStarted records that the replica process at addr (ip:port) runs
// on the data directory dir, making the directory as the replica process
// does when dir is on a known disk.
func (h *holdings) replicaStarted(addr, dir string) error {
	dir = filepath.Clean(dir)
	h.mu.Lock()
	_, known := h.diskOf(dir)
	h.mu.Unlock()
	if known {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("making the replica's data directory: %w", err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dirs[addr] = dir
	if _, ok := h.held[dir]; !ok {
		h.held[dir] = 0
	}
	return nil
}

// holdFile makes dir, a directory on a known disk, hold bytes (a
// backing-image copy's file), as backing-image-manager writes a file
// there; it fails with ErrNoSpace, holding nothing, when the disk has less
// left, and does nothing on a directory of no known disk. The bytes go
// when the directory is removed.
func (h *holdings) holdFile(dir string, bytes int64) error {
	dir = filepath.Clean(dir)
	h.mu.Lock()
	_, known := h.diskOf(dir)
	h.mu.Unlock()
	if !known {
		return nil
	}
	h.prune()
	h.mu.Lock()
	defer h.mu.Unlock()
	need := bytes - h.held[dir]
	if free, _ := h.freeLocked(dir); need > free {
		return fmt.Errorf("%d bytes to write into %s, %d left on its disk: %w", need, dir, free, ErrNoSpace)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	h.held[dir] = max(bytes, h.held[dir])
	return nil
}

// replicaDataDir reads the data directory from a replica process's
// arguments ("replica <dir> ..."), as longhorn-manager gives it: under
// the host's root mounted at lhtypes.ReplicaHostPrefix in the instance
// manager's pod, which here is this process's own root.
func replicaDataDir(args []string) string {
	i := slices.Index(args, "replica")
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	dir := args[i+1]
	if rest, ok := strings.CutPrefix(dir, lhtypes.ReplicaHostPrefix+"/"); ok {
		dir = "/" + rest
	}
	return dir
}

// replicaKey turns an engine's replica address (tcp://ip:port) into the
// key of holdings.dirs.
func replicaKey(addr string) string {
	return strings.TrimPrefix(addr, "tcp://")
}

// heldBy returns the bytes the replica at addr holds; h.mu is held.
func (h *holdings) heldByLocked(addr string) int64 {
	return h.held[h.dirs[replicaKey(addr)]]
}

// volumeHeldLocked returns the bytes e's volume holds: what its
// replicas in RW mode hold (they hold the same; the most, when a write
// failed in one), else what any of its replicas holds. e's instance
// manager's mu and h.mu are held.
func (h *holdings) volumeHeldLocked(e *engine) int64 {
	var rw, any int64
	for addr, mode := range e.replicas {
		b := h.heldByLocked(addr)
		any = max(any, b)
		if mode == enginerpc.ReplicaMode_RW {
			rw = max(rw, b)
		}
	}
	if rw > 0 {
		return rw
	}
	return any
}

// WriteResult is what a write to a volume did.
type WriteResult struct {
	// Written is how many bytes the volume holds more than before: the
	// bytes asked for, less what lay past the volume's end.
	Written int64 `json:"written"`
	// Held is what the volume holds after the write, and Size its size.
	Held int64 `json:"held"`
	Size int64 `json:"size"`
	// Failed are the replicas (their addresses) that could not take the
	// write, their disk full: the engine set them to ERR, as longhorn-engine
	// does a replica whose write failed.
	Failed []string `json:"failed,omitempty"`
}

// Write writes bytes more into volume through its engine, the one whose
// frontend is started, from where it holds data up to its end: each of the
// engine's replicas in RW mode takes them onto its disk. A replica whose
// disk has less left takes what fits and fails with ErrNoSpace: the
// engine sets it to ERR and the write goes on with the others. The write
// fails, with ErrNoSpace, when no replica could take it; with another
// error when the volume has no engine serving it or no replica in RW mode.
func (n *Network) Write(volume string, bytes int64) (WriteResult, error) {
	if bytes < 0 {
		return WriteResult{}, fmt.Errorf("writing %d bytes: a write is not negative", bytes)
	}
	n.data.prune()
	for _, im := range n.instanceManagers() {
		res, found, err := im.write(volume, bytes)
		if found {
			return res, err
		}
	}
	return WriteResult{}, fmt.Errorf("volume %s has no engine with its frontend started: it is not attached", volume)
}

// write writes into volume through the engine im runs for it, if any.
func (im *InstanceManager) write(volume string, bytes int64) (WriteResult, bool, error) {
	im.mu.Lock()
	defer im.mu.Unlock()
	var e *engine
	for _, name := range im.instanceNames() {
		if in := im.instances[name]; in.engine != nil && in.engine.volume == volume && in.engine.started {
			e = in.engine
			break
		}
	}
	if e == nil {
		return WriteResult{}, false, nil
	}
	var rw []string
	for _, addr := range e.addresses() {
		if e.replicas[addr] != enginerpc.ReplicaMode_RW {
			continue
		}
		if !im.net.reachable(addr) {
			e.replicas[addr] = enginerpc.ReplicaMode_ERR
			continue
		}
		rw = append(rw, addr)
	}
	if len(rw) == 0 {
		im.notifyLocked()
		return WriteResult{}, true, fmt.Errorf("volume %s: no replica in RW mode takes the write", volume)
	}
	h := im.net.data
	h.mu.Lock()
	defer h.mu.Unlock()
	before := h.volumeHeldLocked(e)
	target := max(min(e.size, before+bytes), before)
	res := WriteResult{Size: e.size}
	for _, addr := range rw {
		dir := h.dirs[replicaKey(addr)]
		need := target - h.held[dir]
		if need <= 0 {
			continue
		}
		if free, bounded := h.freeLocked(dir); bounded && free < need {
			h.held[dir] += free
			e.replicas[addr] = enginerpc.ReplicaMode_ERR
			res.Failed = append(res.Failed, addr)
			continue
		}
		h.held[dir] = target
	}
	res.Held = h.volumeHeldLocked(e)
	res.Written = res.Held - before
	if len(res.Failed) > 0 {
		im.notifyLocked()
	}
	if len(res.Failed) == len(rw) {
		return res, true, fmt.Errorf("volume %s: every replica failed the write (%s): %w", volume, strings.Join(res.Failed, ", "), ErrNoSpace)
	}
	return res, true, nil
}

// DefaultRebuildRate is how fast a rebuild copies a volume's bytes onto a
// new replica unless the plan says otherwise (Plan.RebuildRate): 256 MiB/s.
const DefaultRebuildRate = 256 << 20

// rebuildTick is how often a rebuild copies its next share of bytes.
const rebuildTick = 100 * time.Millisecond

// rebuildProgress is a rebuild in progress: the replicas it copies from
// and the percentage copied.
type rebuildProgress struct {
	from     []string
	progress int32
}

// SetRebuildRate sets how many bytes a second a rebuild copies (0 or less:
// DefaultRebuildRate).
func (n *Network) SetRebuildRate(bytesPerSecond int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.rebuildRate = bytesPerSecond
}

// RebuildRate returns how many bytes a second a rebuild copies.
func (n *Network) RebuildRate() int64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.rebuildRate <= 0 {
		return DefaultRebuildRate
	}
	return n.rebuildRate
}

// rebuildStep copies up to chunk bytes more of what e's volume holds onto
// the replica at addr, as a rebuild syncs a new replica's files from the
// others, and reports whether the replica now holds all of it (it is RW
// then). When its disk has less left than the copy needs, the replica
// takes what fits, is set to ERR and the step fails with ErrNoSpace; a
// replica removed from the engine meanwhile fails the rebuild too. im.mu
// is held.
func (im *InstanceManager) rebuildStep(e *engine, addr string, chunk int64) (bool, error) {
	r, ok := e.rebuilds[addr]
	if _, member := e.replicas[addr]; !ok || !member {
		return false, fmt.Errorf("rebuilding replica %s: it was removed from the engine", addr)
	}
	h := im.net.data
	h.mu.Lock()
	defer h.mu.Unlock()
	want := h.volumeHeldLocked(e)
	dir := h.dirs[replicaKey(addr)]
	need := want - h.held[dir]
	if need <= 0 {
		delete(e.rebuilds, addr)
		e.replicas[addr] = enginerpc.ReplicaMode_RW
		return true, nil
	}
	step := min(need, chunk)
	if free, bounded := h.freeLocked(dir); bounded && free < step {
		h.held[dir] += free
		delete(e.rebuilds, addr)
		e.replicas[addr] = enginerpc.ReplicaMode_ERR
		return false, fmt.Errorf("rebuilding replica %s: %d bytes left to copy, %d left on its disk: %w", addr, need, free, ErrNoSpace)
	}
	h.held[dir] += step
	if h.held[dir] >= want {
		delete(e.rebuilds, addr)
		e.replicas[addr] = enginerpc.ReplicaMode_RW
		return true, nil
	}
	r.progress = int32(h.held[dir] * 100 / want)
	return false, nil
}

// rwAddresses returns the engine's replicas in RW mode, sorted.
func (e *engine) rwAddresses() []string {
	var out []string
	for _, addr := range e.addresses() {
		if e.replicas[addr] == enginerpc.ReplicaMode_RW {
			out = append(out, addr)
		}
	}
	return out
}

// instanceNames returns im's instance names, sorted; im.mu is held.
func (im *InstanceManager) instanceNames() []string {
	names := make([]string, 0, len(im.instances))
	for name := range im.instances {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
