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

// freeLoopbackIP returns a loopback address where nothing listens on port.
func freeLoopbackIP(t *testing.T, port int) string {
	t.Helper()
	for range 20 {
		ip := fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(254))
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err == nil {
			_ = l.Close()
			return ip
		}
	}
	t.Fatal("no free loopback address")
	return ""
}

// TestPodServices: a backing-image manager pod and a data source pod,
// running with IPs of their own on a node of the plan, are served there
// (the data source with what its command line declares, as Longhorn's data
// source controller writes it); a pod on another node is not; a pod that
// goes is no longer served.
func TestPodServices(t *testing.T) {
	const ns = "longhorn-system"
	port := engineapi.BackingImageManagerDefaultPort
	bimIP, dsIP, otherIP := freeLoopbackIP(t, port), freeLoopbackIP(t, port), freeLoopbackIP(t, port)
	running := func(name, node, ip string, labels map[string]string, command ...string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID("uid-" + name), Labels: labels},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Command: command}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
		}
	}
	bim := running("backing-image-manager-1", "node-1", bimIP, lhtypes.GetBackingImageManagerLabels("node-1", "disk-1"))
	ds := running("backing-image-ds-image", "node-1", dsIP, lhtypes.GetBackingImageDataSourceLabels("image", "node-1", "disk-1"),
		"backing-image-manager", "--debug", "data-source", "--listen", ":8000", "--sync-listen", ":8001",
		"--name", "image", "--uuid", "uuid-1", "--source-type", "download",
		"--parameters", "url=http://x.invalid/i", "--parameters", "size=2Gi")
	elsewhere := running("backing-image-manager-2", "node-9", otherIP, lhtypes.GetBackingImageManagerLabels("node-9", "disk-9"))
	kube := fake.NewClientset(bim, ds, elsewhere)
	plan := &dataplane.Plan{Nodes: []dataplane.Node{{Name: "node-1"}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dataplane.NewPodServices(kube, ns, plan, nil, nil, logrus.StandardLogger()).Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	manager := func(ip string) *engineapi.BackingImageManagerClient {
		c, err := engineapi.NewBackingImageManagerClient(runningManager(ip))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if state, err := testenv.Poll(ctx, 10*time.Second, func(context.Context) (bool, string, error) {
		_, _, err := manager(bimIP).VersionGet()
		return err == nil, fmt.Sprint(err), nil
	}, testenv.Every(20*time.Millisecond)); err != nil {
		t.Fatalf("the backing-image manager pod is not served: %v (last: %s)", err, state)
	}
	info, err := engineapi.NewBackingImageDataSourceClient(dsIP).Get()
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "image" || info.UUID != "uuid-1" || info.DiskUUID != "disk-1" || info.Size != 2<<30 || info.State != string(lhv1.BackingImageStateReadyForTransfer) {
		t.Errorf("the data source pod serves %+v", info)
	}
	if _, _, err := manager(otherIP).VersionGet(); err == nil {
		t.Error("a pod on a node outside the plan is served")
	}

	if err := kube.CoreV1().Pods(ns).Delete(ctx, bim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Poll(ctx, 10*time.Second, func(context.Context) (bool, string, error) {
		_, _, err := manager(bimIP).VersionGet()
		return err != nil, "", nil
	}, testenv.Every(20*time.Millisecond)); err != nil {
		t.Errorf("the deleted pod is still served: %v", err)
	}
}
