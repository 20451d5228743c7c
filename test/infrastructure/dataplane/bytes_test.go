package dataplane_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/longhorn/longhorn-manager/engineapi"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhutil "github.com/longhorn/longhorn-manager/util"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
)

const mib = int64(1) << 20

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
	n := dataplane.NewNetwork()
	root := t.TempDir()
	disks := map[string]int64{"big": 30 * mib, "small": 15 * mib, "spare": 50 * mib, "tiny": 4 * mib}
	for name, size := range disks {
		n.AddDisk(filepath.Join(root, name), size)
	}
	imA, _ := startOn(t, n)
	imB, _ := startOn(t, n)
	clients := map[*lhv1.InstanceManager]*engineapi.InstanceManagerClient{}
	for _, im := range []*lhv1.InstanceManager{imA, imB} {
		im.Status.APIVersion, im.Status.APIMinVersion = 7, 1
		im.Status.ProxyAPIVersion, im.Status.ProxyAPIMinVersion = 6, 1
		c, err := engineapi.NewInstanceManagerClient(im, false)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[im] = c
	}
	const size = 20 << 20
	dataDir := func(disk, name string) string { return filepath.Join(root, disk, "replicas", name+"-1a2b3c4d") }
	replica := func(im *lhv1.InstanceManager, volume, name, disk string) string {
		t.Helper()
		r := &lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lhv1.ReplicaSpec{
			InstanceSpec:      lhv1.InstanceSpec{VolumeName: volume, VolumeSize: size, DataEngine: lhv1.DataEngineTypeV1, Image: "longhornio/longhorn-engine:v1.12.0"},
			DataDirectoryName: name + "-1a2b3c4d",
		}}
		p, err := clients[im].ReplicaInstanceCreate(&engineapi.ReplicaInstanceCreateRequest{Replica: r, DiskName: disk, DataPath: dataDir(disk, name), EngineCLIAPIVersion: 11})
		if err != nil {
			t.Fatalf("replica %s: %v", name, err)
		}
		if _, err := os.Stat(dataDir(disk, name)); err != nil {
			t.Fatalf("replica %s: its data directory was not made: %v", name, err)
		}
		return fmt.Sprintf("%s:%d", im.Status.IP, p.Status.PortStart)
	}
	engine := func(volume string, replicas map[string]string) *lhv1.Engine {
		t.Helper()
		e := &lhv1.Engine{ObjectMeta: metav1.ObjectMeta{Name: volume + "-e-0"}, Spec: lhv1.EngineSpec{
			InstanceSpec: lhv1.InstanceSpec{VolumeName: volume, VolumeSize: size, DataEngine: lhv1.DataEngineTypeV1, Image: "longhornio/longhorn-engine:v1.12.0"},
			Frontend:     lhv1.VolumeFrontendBlockDev,
		}, Status: lhv1.EngineStatus{CurrentReplicaAddressMap: replicas}}
		p, err := clients[imA].EngineInstanceCreate(&engineapi.EngineInstanceCreateRequest{Engine: e, VolumeFrontend: lhv1.VolumeFrontendBlockDev, EngineCLIAPIVersion: 11})
		if err != nil {
			t.Fatalf("engine: %v", err)
		}
		e.Status.IP, e.Status.StorageIP, e.Status.Port = imA.Status.IP, imA.Status.IP, int(p.Status.PortStart)
		return e
	}
	r1, r2 := replica(imA, "vol", "vol-r-1", "big"), replica(imB, "vol", "vol-r-2", "small")
	e := engine("vol", map[string]string{"vol-r-1": r1, "vol-r-2": r2})
	proxy, err := engineapi.NewEngineClientProxy(imA, logrus.StandardLogger(), lhutil.NewAtomicCounter(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	modes := func() map[string]lhv1.ReplicaMode {
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
	if got := modes(); got[r1] != lhv1.ReplicaModeRW || got[r2] != lhv1.ReplicaModeERR {
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
	if got := modes(); got[r4] != lhv1.ReplicaModeRW {
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
