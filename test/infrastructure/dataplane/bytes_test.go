package dataplane_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/longhorn/longhorn-manager/engineapi"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhutil "github.com/longhorn/longhorn-manager/util"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
)

const mib = int64(1) << 20

// fixture is a network of two instance managers, A and B, on which
// volumes of size bytes run; disks are directories under root, of the
// sizes given.
type fixture struct {
	t        *testing.T
	n        *dataplane.Network
	root     string
	imA, imB *lhv1.InstanceManager
	clients  map[*lhv1.InstanceManager]*engineapi.InstanceManagerClient
}

const size = 20 << 20

func newFixture(t *testing.T, disks map[string]int64) *fixture {
	t.Helper()
	f := &fixture{t: t, n: dataplane.NewNetwork(), root: t.TempDir(), clients: map[*lhv1.InstanceManager]*engineapi.InstanceManagerClient{}}
	for name, size := range disks {
		f.n.AddDisk(filepath.Join(f.root, name), size)
	}
	f.imA, _ = startOn(t, f.n)
	f.imB, _ = startOn(t, f.n)
	for _, im := range []*lhv1.InstanceManager{f.imA, f.imB} {
		im.Status.APIVersion, im.Status.APIMinVersion = 7, 1
		im.Status.ProxyAPIVersion, im.Status.ProxyAPIMinVersion = 6, 1
		c, err := engineapi.NewInstanceManagerClient(im, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		f.clients[im] = c
	}
	return f
}

// dataDir is the data directory of replica name on disk.
func (f *fixture) dataDir(disk, name string) string {
	return filepath.Join(f.root, disk, "replicas", name+"-1a2b3c4d")
}

// replica starts replica name of volume on im, on disk, and returns its
// address.
func (f *fixture) replica(im *lhv1.InstanceManager, volume, name, disk string) string {
	t := f.t
	t.Helper()
	r := &lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lhv1.ReplicaSpec{
		InstanceSpec:      lhv1.InstanceSpec{VolumeName: volume, VolumeSize: size, DataEngine: lhv1.DataEngineTypeV1, Image: "longhornio/longhorn-engine:v1.12.0"},
		DataDirectoryName: name + "-1a2b3c4d",
	}}
	p, err := f.clients[im].ReplicaInstanceCreate(&engineapi.ReplicaInstanceCreateRequest{Replica: r, DiskName: disk, DataPath: f.dataDir(disk, name), EngineCLIAPIVersion: 11})
	if err != nil {
		t.Fatalf("replica %s: %v", name, err)
	}
	if _, err := os.Stat(f.dataDir(disk, name)); err != nil {
		t.Fatalf("replica %s: its data directory was not made: %v", name, err)
	}
	return fmt.Sprintf("%s:%d", im.Status.IP, p.Status.PortStart)
}

// engine starts volume's engine on A with replicas (by name).
func (f *fixture) engine(volume string, replicas map[string]string) *lhv1.Engine {
	t := f.t
	t.Helper()
	e := &lhv1.Engine{ObjectMeta: metav1.ObjectMeta{Name: volume + "-e-0"}, Spec: lhv1.EngineSpec{
		InstanceSpec: lhv1.InstanceSpec{VolumeName: volume, VolumeSize: size, DataEngine: lhv1.DataEngineTypeV1, Image: "longhornio/longhorn-engine:v1.12.0"},
		Frontend:     lhv1.VolumeFrontendBlockDev,
	}, Status: lhv1.EngineStatus{CurrentReplicaAddressMap: replicas}}
	p, err := f.clients[f.imA].EngineInstanceCreate(&engineapi.EngineInstanceCreateRequest{Engine: e, VolumeFrontend: lhv1.VolumeFrontendBlockDev, EngineCLIAPIVersion: 11})
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	e.Status.IP, e.Status.StorageIP, e.Status.Port = f.imA.Status.IP, f.imA.Status.IP, int(p.Status.PortStart)
	return e
}

// proxy returns Longhorn's engine proxy client of A.
func (f *fixture) proxy() engineapi.EngineClientProxy {
	f.t.Helper()
	proxy, err := engineapi.NewEngineClientProxy(f.imA, logrus.StandardLogger(), lhutil.NewAtomicCounter(), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { proxy.Close() })
	return proxy
}

// modes returns e's replicas' modes by address, as Longhorn reads them.
func modes(t *testing.T, proxy engineapi.EngineClientProxy, e *lhv1.Engine) map[string]lhv1.ReplicaMode {
	t.Helper()
	rs, err := proxy.ReplicaList(e)
	if err != nil {
		t.Fatalf("ReplicaList: %v", err)
	}
	out := map[string]lhv1.ReplicaMode{}
	for url, r := range rs {
		out[engineapi.GetAddressFromBackendReplicaURL(url)] = r.Mode
	}
	return out
}

// TestWritesFillDisks writes into a volume of two replicas on disks of
// different sizes, through the network's Write, and reads what Longhorn's
// own clients read: the bytes go to every replica in RW mode and count
// against their disks; the volume head's size (what longhorn-manager sums
// into the volume's actualSize) is what the volume holds; the replica on
// the disk that fills takes what fits, and the engine reports it in ERR,
// as longhorn-engine reports a replica whose write failed with ENOSPC; a
// write past the volume's end writes nothing; a rebuild onto a full disk
// fails and onto a disk with room copies the volume's bytes; a write that
// no replica can take fails with ErrNoSpace; a data directory deleted
// (longhorn-manager's replica cleanup) gives its bytes back to its disk.
func TestWritesFillDisks(t *testing.T) {
	f := newFixture(t, map[string]int64{"big": 30 * mib, "small": 15 * mib, "spare": 50 * mib, "tiny": 4 * mib})
	n, root, imA, imB, replica, engine, dataDir := f.n, f.root, f.imA, f.imB, f.replica, f.engine, f.dataDir
	_ = root
	r1, r2 := replica(imA, "vol", "vol-r-1", "big"), replica(imB, "vol", "vol-r-2", "small")
	e := engine("vol", map[string]string{"vol-r-1": r1, "vol-r-2": r2})
	proxy := f.proxy()
	head := func() int64 {
		t.Helper()
		snaps, err := proxy.SnapshotList(e)
		if err != nil {
			t.Fatalf("SnapshotList: %v", err)
		}
		var sum int64
		for _, s := range snaps {
			b, err := strconv.ParseInt(s.Size, 10, 64)
			if err != nil {
				t.Fatalf("snapshot %s size %q: %v", s.Name, s.Size, err)
			}
			sum += b
		}
		return sum
	}
	held := func(want map[string]int64) {
		t.Helper()
		for disk, w := range want {
			if got := n.DiskHeld(filepath.Join(root, disk)); got != w {
				t.Errorf("disk %s holds %d MiB, want %d MiB", disk, got/mib, w/mib)
			}
		}
	}
	if got := head(); got != 0 {
		t.Fatalf("a new volume's head is %d bytes, want 0", got)
	}

	res, err := n.Write("vol", 10*mib)
	if err != nil || res.Written != 10*mib || res.Held != 10*mib || len(res.Failed) != 0 {
		t.Fatalf("writing 10 MiB: %+v, %v; want 10 MiB written and held by both replicas", res, err)
	}
	held(map[string]int64{"big": 10 * mib, "small": 10 * mib})
	if got := head(); got != 10*mib {
		t.Fatalf("after 10 MiB written the volume head is %d bytes, want %d", got, 10*mib)
	}

	// The small disk has 5 MiB left: its replica takes them and fails.
	res, err = n.Write("vol", 10*mib)
	if err != nil || res.Written != 10*mib || !slices.Equal(res.Failed, []string{"tcp://" + r2}) {
		t.Fatalf("writing 10 MiB more: %+v, %v; want 10 MiB written and %s failed", res, err, r2)
	}
	held(map[string]int64{"big": 20 * mib, "small": 15 * mib})
	if got := modes(t, proxy, e); got[r1] != lhv1.ReplicaModeRW || got[r2] != lhv1.ReplicaModeERR {
		t.Fatalf("replicas %v after the small disk filled; want %s RW and %s ERR", got, r1, r2)
	}
	if got := head(); got != 20*mib {
		t.Fatalf("the volume head is %d bytes, want %d", got, 20*mib)
	}
	if res, err = n.Write("vol", mib); err != nil || res.Written != 0 || res.Held != size {
		t.Fatalf("writing past the volume's end: %+v, %v; want nothing written, %d held", res, err, size)
	}

	// A rebuild onto the full disk fails; onto one with room it copies the
	// volume's 20 MiB.
	r3 := replica(imB, "vol", "vol-r-3", "small")
	if err := proxy.ReplicaAdd(e, "vol-r-3", engineapi.GetBackendReplicaURL(r3), false, false, nil, 30, 60); err == nil {
		t.Fatal("rebuilding a replica onto a full disk succeeded")
	}
	r4 := replica(imB, "vol", "vol-r-4", "spare")
	if err := proxy.ReplicaAdd(e, "vol-r-4", engineapi.GetBackendReplicaURL(r4), false, false, nil, 30, 60); err != nil {
		t.Fatalf("rebuilding a replica onto a disk with room: %v", err)
	}
	held(map[string]int64{"spare": 20 * mib, "small": 15 * mib})
	if got := modes(t, proxy, e); got[r4] != lhv1.ReplicaModeRW {
		t.Fatalf("replicas %v after the rebuild; want %s RW", got, r4)
	}

	// Longhorn's replica cleanup deletes the failed replica's directory:
	// its bytes leave the disk.
	if err := os.RemoveAll(dataDir("small", "vol-r-2")); err != nil {
		t.Fatal(err)
	}
	held(map[string]int64{"small": 0})

	// A volume whose only replica's disk is too small fails the write.
	lone := replica(imA, "lone", "lone-r-1", "tiny")
	engine("lone", map[string]string{"lone-r-1": lone})
	res, err = n.Write("lone", 5*mib)
	if !errors.Is(err, dataplane.ErrNoSpace) || res.Held != 4*mib {
		t.Fatalf("writing 5 MiB onto a 4 MiB disk: %+v, %v; want ENOSPC with 4 MiB held", res, err)
	}
	if _, err := n.Write("lone", mib); err == nil {
		t.Fatal("writing into a volume with no replica left in RW mode succeeded")
	}
	if _, err := n.Write("absent", mib); err == nil {
		t.Fatal("writing into a volume with no engine succeeded")
	}
}

// TestRebuildTakesTime rebuilds a replica of a volume holding 16 MiB, and
// 4 MiB more written during the rebuild, at 8 MiB/s: ReplicaAdd returns
// after the copy, not before 2 s;
// meanwhile Longhorn's client reads the rebuild in progress and the new
// replica in WO mode, and a write made during the rebuild is copied too:
// the rebuilt replica is RW and holds what the volume holds.
func TestRebuildTakesTime(t *testing.T) {
	f := newFixture(t, map[string]int64{"a": 100 * mib, "b": 100 * mib})
	f.n.SetRebuildRate(8 * mib)
	r1 := f.replica(f.imA, "vol", "vol-r-1", "a")
	e := f.engine("vol", map[string]string{"vol-r-1": r1})
	if _, err := f.n.Write("vol", 16*mib); err != nil {
		t.Fatal(err)
	}
	proxy := f.proxy()
	r2 := f.replica(f.imB, "vol", "vol-r-2", "b")
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- proxy.ReplicaAdd(e, "vol-r-2", engineapi.GetBackendReplicaURL(r2), false, false, nil, 30, 60)
	}()
	sawProgress := false
	for !sawProgress {
		select {
		case err := <-done:
			t.Fatalf("ReplicaAdd returned (%v) after %s before its progress was seen", err, time.Since(start))
		case <-time.After(20 * time.Millisecond):
		}
		status, err := proxy.ReplicaRebuildStatus(e)
		if err != nil {
			t.Fatalf("ReplicaRebuildStatus: %v", err)
		}
		st := status[engineapi.GetBackendReplicaURL(r2)]
		if st != nil && st.IsRebuilding {
			if got := modes(t, proxy, e)[r2]; got != lhv1.ReplicaModeWO {
				t.Fatalf("replica %s is %s while it rebuilds, want WO", r2, got)
			}
			sawProgress = true
		}
	}
	if _, err := f.n.Write("vol", 4*mib); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("ReplicaAdd: %v", err)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("rebuilding 20 MiB at 8 MiB/s took %s, want 2.5 s", took)
	}
	if got := modes(t, proxy, e); got[r2] != lhv1.ReplicaModeRW {
		t.Fatalf("replicas %v after the rebuild; want %s RW", got, r2)
	}
	if a, b := f.n.DiskHeld(filepath.Join(f.root, "a")), f.n.DiskHeld(filepath.Join(f.root, "b")); a != 20*mib || b != 20*mib {
		t.Fatalf("disks hold %d and %d MiB after the rebuild, want 20 each", a/mib, b/mib)
	}
}
