package dataplane_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/longhorn/longhorn-manager/engineapi"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
)

// TestShareManager: a share manager pod, running with an IP of its own on
// a node of the plan as Longhorn's share manager controller creates it
// (daemon --volume), is served there and driven with longhorn-manager
// v1.12.0's own client (engineapi.ShareManagerClient), as its share
// manager controller, API and pod controller call it. Before the volume's
// engine runs on the node, Mount and Unmount do nothing, the share is not
// serving, trim and resize are refused for the missing device and no NFS
// server listens; once the engine runs there with its block-device
// frontend (the device /dev/longhorn/<volume>), the share manager finds it
// at its next look and its NFS server listens on 2049 (what the sandbox's
// kubelet probes), serving; Unmount stops serving, Mount serves again.
func TestShareManager(t *testing.T) {
	const ns, volume = "longhorn-system", "pvc-rwx"
	network := dataplane.NewNetwork()
	var imIP string
	var im *dataplane.InstanceManager
	var ls *dataplane.Listeners
	for range 20 {
		imIP = fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(254))
		im = network.InstanceManager(imIP)
		var err error
		if ls, err = im.Listen(); err == nil {
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
	defer cancel()
	imDone := make(chan error, 1)
	go func() { imDone <- ls.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-imDone; err != nil {
			t.Error(err)
		}
	}()

	smIP := freeLoopbackIP(t, engineapi.ShareManagerDefaultPort)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lhtypes.GetShareManagerPodNameFromShareManagerName(volume),
			UID: k8stypes.UID("uid-sm"), Labels: lhtypes.GetShareManagerLabels(volume, "longhornio/longhorn-share-manager:v1.12.0")},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{
			Name: lhtypes.LonghornLabelShareManager, Args: []string{"--debug", "daemon", "--volume", volume, "--data-engine", "v1"},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: smIP},
	}
	kube := fake.NewClientset(pod)
	plan := &dataplane.Plan{Nodes: []dataplane.Node{{Name: "node-1", IP: imIP}}}
	svcDone := make(chan error, 1)
	svcCtx, stopServices := context.WithCancel(ctx)
	go func() {
		svcDone <- dataplane.NewPodServices(kube, ns, plan, dataplane.NodeInstanceManagers{"node-1": im}, nil, logrus.StandardLogger()).Run(svcCtx)
	}()
	defer func() {
		stopServices()
		if err := <-svcDone; err != nil {
			t.Error(err)
		}
	}()

	c, err := engineapi.NewShareManagerClientByName(volume, pod)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The share manager serves its gRPC service at once.
	if state, err := testenv.Poll(ctx, 10*time.Second, func(context.Context) (bool, string, error) {
		err := c.Mount()
		return err == nil, fmt.Sprint(err), nil
	}, testenv.Every(20*time.Millisecond)); err != nil {
		t.Fatalf("the share manager pod is not served: %v (last: %s)", err, state)
	}
	if err := c.Unmount(); err != nil {
		t.Errorf("Unmount before the NFS server runs: %v", err)
	}
	if serving, err := c.IsServing(); serving || err == nil {
		t.Errorf("serving %t (%v) before the volume's device exists", serving, err)
	}
	if err := c.FilesystemTrim(false); err == nil {
		t.Error("FilesystemTrim without the volume's device: no error")
	}
	if err := c.FilesystemResize(); err == nil {
		t.Error("FilesystemResize without the volume's device: no error")
	}
	nfs := net.JoinHostPort(smIP, strconv.Itoa(dataplane.NFSPort))
	if conn, err := net.DialTimeout("tcp", nfs, time.Second); err == nil {
		_ = conn.Close()
		t.Error("the NFS server listens before the volume's device exists")
	}

	// The volume's engine starts on node-1 with its block-device frontend,
	// as Longhorn attaches the volume on the share manager's node.
	imObj := &lhv1.InstanceManager{
		ObjectMeta: metav1.ObjectMeta{Name: "instance-manager-test", Namespace: ns},
		Status: lhv1.InstanceManagerStatus{CurrentState: lhv1.InstanceManagerStateRunning, IP: imIP,
			APIVersion: engineapi.UnknownInstanceManagerAPIVersion, APIMinVersion: engineapi.UnknownInstanceManagerAPIVersion},
	}
	imc, err := engineapi.NewInstanceManagerClient(imObj, false)
	if err != nil {
		t.Fatal(err)
	}
	minVersion, version, proxyMin, proxyVersion, err := imc.VersionGet()
	imc.Close()
	if err != nil {
		t.Fatal(err)
	}
	imObj.Status.APIVersion, imObj.Status.APIMinVersion = version, minVersion
	imObj.Status.ProxyAPIVersion, imObj.Status.ProxyAPIMinVersion = proxyVersion, proxyMin
	if imc, err = engineapi.NewInstanceManagerClient(imObj, false); err != nil {
		t.Fatal(err)
	}
	defer imc.Close()
	e := &lhv1.Engine{ObjectMeta: metav1.ObjectMeta{Name: volume + "-e-0"}, Spec: lhv1.EngineSpec{
		InstanceSpec: lhv1.InstanceSpec{VolumeName: volume, VolumeSize: 1 << 30, DataEngine: lhv1.DataEngineTypeV1, Image: "longhornio/longhorn-engine:v1.12.0"},
		Frontend:     lhv1.VolumeFrontendBlockDev,
	}, Status: lhv1.EngineStatus{CurrentReplicaAddressMap: map[string]string{volume + "-r-1": imIP + ":10000"}}}
	if _, err := imc.EngineInstanceCreate(&engineapi.EngineInstanceCreateRequest{Engine: e, VolumeFrontend: lhv1.VolumeFrontendBlockDev, EngineCLIAPIVersion: 11}); err != nil {
		t.Fatalf("engine: %v", err)
	}
	if !im.BlockDevice(volume) {
		t.Fatalf("no block device of %s on the node of its running engine", volume)
	}
	start := time.Now()
	state, err := testenv.Poll(ctx, 2*dataplane.ShareManagerDeviceCheckInterval, func(context.Context) (bool, string, error) {
		conn, err := net.DialTimeout("tcp", nfs, time.Second)
		if err != nil {
			return false, err.Error(), nil
		}
		_ = conn.Close()
		return true, "", nil
	})
	if err != nil {
		err = fmt.Errorf("%w (last: %s)", err, state)
		t.Fatalf("the NFS server does not listen once the volume's device exists: %v", err)
	}
	t.Logf("the NFS server listens %s after the device appeared", time.Since(start).Round(time.Millisecond))
	if serving, err := c.IsServing(); !serving || err != nil {
		t.Errorf("serving %t (%v) once exported", serving, err)
	}
	if err := c.FilesystemTrim(false); err != nil {
		t.Errorf("FilesystemTrim: %v", err)
	}
	if err := c.FilesystemResize(); err != nil {
		t.Errorf("FilesystemResize: %v", err)
	}
	if err := c.Unmount(); err != nil {
		t.Fatal(err)
	}
	if serving, _ := c.IsServing(); serving {
		t.Error("serving after Unmount")
	}
	if err := c.Mount(); err != nil {
		t.Fatal(err)
	}
	if serving, err := c.IsServing(); !serving || err != nil {
		t.Errorf("serving %t (%v) after Mount", serving, err)
	}
}
