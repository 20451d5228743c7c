package dataplane_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/longhorn/longhorn-manager/engineapi"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhutil "github.com/longhorn/longhorn-manager/util"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
)

// start serves an instance manager on a free loopback address until the
// test ends, and returns the InstanceManager object Longhorn's controller
// would write for it once its pod runs.
func start(t *testing.T) *lhv1.InstanceManager {
	t.Helper()
	im, _ := startOn(t, dataplane.NewNetwork())
	return im
}

// startOn is start on network n; it also returns the instance manager's
// listeners.
func startOn(t *testing.T, n *dataplane.Network) (*lhv1.InstanceManager, *dataplane.Listeners) {
	t.Helper()
	var ls *dataplane.Listeners
	var ip string
	for range 20 {
		ip = fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(254))
		var err error
		if ls, err = n.InstanceManager(ip).Listen(); err == nil {
			break
		}
		if _, ok := err.(*net.OpError); !ok {
			t.Fatal(err)
		}
	}
	if ls == nil {
		t.Fatal("no free loopback address")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ls.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &lhv1.InstanceManager{
		ObjectMeta: metav1.ObjectMeta{Name: "instance-manager-test", Namespace: "longhorn-system"},
		Status: lhv1.InstanceManagerStatus{
			CurrentState:  lhv1.InstanceManagerStateRunning,
			IP:            ip,
			APIVersion:    engineapi.UnknownInstanceManagerAPIVersion,
			APIMinVersion: engineapi.UnknownInstanceManagerAPIVersion,
		},
	}, ls
}

// TestLonghornsClientsRunAVolume drives the simulated instance manager with
// longhorn-manager v1.12.0's own clients, as its instance manager, replica
// and engine controllers do: the API version read through the process
// manager, two replicas and an engine created running, the engine's
// replicas and size read through the proxy, a replica rebuilt, one
// removed, the volume expanded and the instances deleted.
func TestLonghornsClientsRunAVolume(t *testing.T) {
	im := start(t)
	c, err := engineapi.NewInstanceManagerClient(im, false)
	if err != nil {
		t.Fatalf("Longhorn's instance manager client: %v", err)
	}
	defer c.Close()
	minVersion, version, proxyMin, proxyVersion, err := c.VersionGet()
	if err != nil {
		t.Fatal(err)
	}
	if version != 7 || minVersion != 1 || proxyVersion != 6 || proxyMin != 1 {
		t.Fatalf("versions %d..%d, proxy %d..%d; want longhorn-instance-manager v1.12.0's 1..7 and 1..6", minVersion, version, proxyMin, proxyVersion)
	}
	im.Status.APIVersion, im.Status.APIMinVersion = version, minVersion
	im.Status.ProxyAPIVersion, im.Status.ProxyAPIMinVersion = proxyVersion, proxyMin
	c.Close()
	if c, err = engineapi.NewInstanceManagerClient(im, false); err != nil {
		t.Fatalf("Longhorn's instance manager client, API version known: %v", err)
	}
	defer c.Close()

	const size = 10 << 30
	addresses := map[string]string{}
	for _, name := range []string{"vol-r-1", "vol-r-2", "vol-r-3"} {
		r := &lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lhv1.ReplicaSpec{
			InstanceSpec:      lhv1.InstanceSpec{VolumeName: "vol", VolumeSize: size, DataEngine: lhv1.DataEngineTypeV1, Image: "longhornio/longhorn-engine:v1.12.0"},
			DataDirectoryName: name,
		}}
		p, err := c.ReplicaInstanceCreate(&engineapi.ReplicaInstanceCreateRequest{Replica: r, DiskName: "disk-1", DataPath: "/data/replicas/" + name, EngineCLIAPIVersion: 11})
		if err != nil {
			t.Fatalf("replica %s: %v", name, err)
		}
		if p.Status.State != lhv1.InstanceStateRunning || p.Status.PortStart == 0 {
			t.Fatalf("replica %s: state %q, port %d; want running on a port", name, p.Status.State, p.Status.PortStart)
		}
		addresses[name] = fmt.Sprintf("%s:%d", im.Status.IP, p.Status.PortStart)
	}
	e := &lhv1.Engine{ObjectMeta: metav1.ObjectMeta{Name: "vol-e-0"}, Spec: lhv1.EngineSpec{
		InstanceSpec: lhv1.InstanceSpec{VolumeName: "vol", VolumeSize: size, DataEngine: lhv1.DataEngineTypeV1, Image: "longhornio/longhorn-engine:v1.12.0"},
		Frontend:     lhv1.VolumeFrontendBlockDev,
	}, Status: lhv1.EngineStatus{CurrentReplicaAddressMap: map[string]string{"vol-r-1": addresses["vol-r-1"], "vol-r-2": addresses["vol-r-2"]}}}
	p, err := c.EngineInstanceCreate(&engineapi.EngineInstanceCreateRequest{Engine: e, VolumeFrontend: lhv1.VolumeFrontendBlockDev, EngineCLIAPIVersion: 11})
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	e.Status.IP, e.Status.StorageIP, e.Status.Port = im.Status.IP, im.Status.IP, int(p.Status.PortStart)
	list, err := c.InstanceList()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 4 {
		t.Fatalf("%d instances listed, want 4", len(list))
	}

	proxy, err := engineapi.NewEngineClientProxy(im, logrus.StandardLogger(), lhutil.NewAtomicCounter(), nil)
	if err != nil {
		t.Fatalf("Longhorn's engine proxy client: %v", err)
	}
	defer proxy.Close()
	replicaModes := func() map[string]lhv1.ReplicaMode {
		t.Helper()
		rs, err := proxy.ReplicaList(e)
		if err != nil {
			t.Fatalf("ReplicaList: %v", err)
		}
		out := map[string]lhv1.ReplicaMode{}
		for url, r := range rs {
			out[url] = r.Mode
		}
		return out
	}
	url := func(name string) string { return engineapi.GetBackendReplicaURL(addresses[name]) }
	if got := replicaModes(); len(got) != 2 || got[url("vol-r-1")] != lhv1.ReplicaModeRW || got[url("vol-r-2")] != lhv1.ReplicaModeRW {
		t.Fatalf("replicas %v; want vol-r-1 and vol-r-2 RW", got)
	}
	if err := proxy.ReplicaAdd(e, "vol-r-3", url("vol-r-3"), false, false, nil, 30, 60); err != nil {
		t.Fatalf("ReplicaAdd: %v", err)
	}
	if err := proxy.ReplicaRemove(e, url("vol-r-1"), "vol-r-1"); err != nil {
		t.Fatalf("ReplicaRemove: %v", err)
	}
	if got := replicaModes(); len(got) != 2 || got[url("vol-r-3")] != lhv1.ReplicaModeRW || got[url("vol-r-2")] != lhv1.ReplicaModeRW {
		t.Fatalf("replicas %v after rebuilding vol-r-3 and removing vol-r-1; want vol-r-2 and vol-r-3 RW", got)
	}
	// An engine started with replicas and a frontend serves its endpoint
	// at once, as longhorn-engine's controller starts its frontend with
	// them; starting it again changes nothing.
	if v, err := proxy.VolumeGet(e); err != nil || v.Endpoint != "/dev/longhorn/vol" {
		t.Fatalf("VolumeGet before VolumeFrontendStart: %+v, %v; want endpoint /dev/longhorn/vol", v, err)
	}
	if err := proxy.VolumeFrontendStart(e); err != nil {
		t.Fatalf("VolumeFrontendStart: %v", err)
	}
	if err := proxy.VolumeExpand(e, 2*size); err != nil {
		t.Fatalf("VolumeExpand: %v", err)
	}
	v, err := proxy.VolumeGet(e)
	if err != nil {
		t.Fatalf("VolumeGet: %v", err)
	}
	if v.Size != 2*size || v.ReplicaCount != 2 || v.Endpoint != "/dev/longhorn/vol" {
		t.Fatalf("volume %+v; want size %d, 2 replicas, endpoint /dev/longhorn/vol", v, 2*size)
	}
	if _, err := proxy.VersionGet(e, false); err != nil {
		t.Fatalf("engine VersionGet: %v", err)
	}
	for _, name := range []string{"vol-e-0", "vol-r-1", "vol-r-2", "vol-r-3"} {
		kind := string(lhv1.InstanceManagerTypeReplica)
		if name == "vol-e-0" {
			kind = string(lhv1.InstanceManagerTypeEngine)
		}
		if err := c.InstanceDelete(lhv1.DataEngineTypeV1, name, "", kind, "", false); err != nil {
			t.Fatalf("InstanceDelete %s: %v", name, err)
		}
	}
	if list, err = c.InstanceList(); err != nil || len(list) != 0 {
		t.Fatalf("%d instances left (%v), want none", len(list), err)
	}
}

// TestStoppedInstanceManager stops the instance manager of a node that
// holds a replica, as a node going down stops it: its ports refuse
// Longhorn's clients, and the engine on another node, on the same network,
// finds that replica in error (longhorn-manager's volume controller then
// marks it failed) and cannot add another replica of the stopped node,
// while its replica on a node that still serves stays RW.
func TestStoppedInstanceManager(t *testing.T) {
	n := dataplane.NewNetwork()
	engineIM, _ := startOn(t, n)
	downIM, down := startOn(t, n)
	clients := map[*lhv1.InstanceManager]*engineapi.InstanceManagerClient{}
	for _, im := range []*lhv1.InstanceManager{engineIM, downIM} {
		im.Status.APIVersion, im.Status.APIMinVersion = 7, 1
		im.Status.ProxyAPIVersion, im.Status.ProxyAPIMinVersion = 6, 1
		c, err := engineapi.NewInstanceManagerClient(im, false)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[im] = c
	}
	const size = 10 << 30
	replica := func(im *lhv1.InstanceManager, name string) string {
		t.Helper()
		r := &lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lhv1.ReplicaSpec{
			InstanceSpec:      lhv1.InstanceSpec{VolumeName: "vol", VolumeSize: size, DataEngine: lhv1.DataEngineTypeV1, Image: "longhornio/longhorn-engine:v1.12.0"},
			DataDirectoryName: name,
		}}
		p, err := clients[im].ReplicaInstanceCreate(&engineapi.ReplicaInstanceCreateRequest{Replica: r, DiskName: "disk-1", DataPath: "/data/replicas/" + name, EngineCLIAPIVersion: 11})
		if err != nil {
			t.Fatalf("replica %s: %v", name, err)
		}
		return fmt.Sprintf("%s:%d", im.Status.IP, p.Status.PortStart)
	}
	local, remote, more := replica(engineIM, "vol-r-1"), replica(downIM, "vol-r-2"), replica(downIM, "vol-r-3")
	e := &lhv1.Engine{ObjectMeta: metav1.ObjectMeta{Name: "vol-e-0"}, Spec: lhv1.EngineSpec{
		InstanceSpec: lhv1.InstanceSpec{VolumeName: "vol", VolumeSize: size, DataEngine: lhv1.DataEngineTypeV1, Image: "longhornio/longhorn-engine:v1.12.0"},
		Frontend:     lhv1.VolumeFrontendBlockDev,
	}, Status: lhv1.EngineStatus{CurrentReplicaAddressMap: map[string]string{"vol-r-1": local, "vol-r-2": remote}}}
	p, err := clients[engineIM].EngineInstanceCreate(&engineapi.EngineInstanceCreateRequest{Engine: e, VolumeFrontend: lhv1.VolumeFrontendBlockDev, EngineCLIAPIVersion: 11})
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	e.Status.IP, e.Status.StorageIP, e.Status.Port = engineIM.Status.IP, engineIM.Status.IP, int(p.Status.PortStart)
	proxy, err := engineapi.NewEngineClientProxy(engineIM, logrus.StandardLogger(), lhutil.NewAtomicCounter(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	if got := modes(t, proxy, e); got[local] != lhv1.ReplicaModeRW || got[remote] != lhv1.ReplicaModeRW {
		t.Fatalf("replicas %v before the stop; want both RW", got)
	}

	down.Stop()
	down.Stop() // a second Stop does nothing
	if got := modes(t, proxy, e); len(got) != 2 || got[local] != lhv1.ReplicaModeRW || got[remote] != lhv1.ReplicaModeERR {
		t.Fatalf("replicas %v after the stop; want %s RW and %s ERR", got, local, remote)
	}
	if err := proxy.ReplicaAdd(e, "vol-r-3", engineapi.GetBackendReplicaURL(more), false, false, nil, 30, 60); err == nil {
		t.Fatalf("ReplicaAdd of a replica of the stopped instance manager succeeded")
	}
	if got := modes(t, proxy, e); len(got) != 2 || got[remote] != lhv1.ReplicaModeERR {
		t.Fatalf("replicas %v after the refused ReplicaAdd; want vol-r-3 absent and %s still ERR", got, remote)
	}
	if _, err := clients[downIM].InstanceList(); err == nil {
		t.Fatal("the stopped instance manager still answers InstanceList")
	}
	if err := proxy.ReplicaRemove(e, engineapi.GetBackendReplicaURL(remote), "vol-r-2"); err != nil {
		t.Fatalf("ReplicaRemove: %v", err)
	}
	if got := modes(t, proxy, e); len(got) != 1 || got[local] != lhv1.ReplicaModeRW {
		t.Fatalf("replicas %v after removing the failed one; want %s alone, RW", got, local)
	}
}
