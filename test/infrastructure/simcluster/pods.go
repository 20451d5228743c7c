package simcluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	lhtypes "github.com/longhorn/longhorn-manager/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ownIPComponents are the Longhorn components whose pods get an IP of their
// own rather than their node's: several run on one node, each serving on
// its pod's IP (a backing-image manager per disk, a backing-image data
// source per image being prepared, a share manager per RWX volume).
var ownIPComponents = map[string]bool{
	lhtypes.LonghornLabelBackingImageManager:    true,
	lhtypes.LonghornLabelBackingImageDataSource: true,
	lhtypes.LonghornLabelShareManager:           true,
}

// needsOwnIP reports whether pod gets an IP of its own (ownIPComponents).
func needsOwnIP(pod *corev1.Pod) bool {
	return ownIPComponents[pod.Labels[lhtypes.GetLonghornLabelComponentKey()]]
}

// probeInterval is how often the kubelet probes a running pod's readiness
// until it passes; quicker than a kubelet's probe period, which the sandbox
// does not need to reproduce.
const probeInterval = 100 * time.Millisecond

// podIPs hands out the pod IPs of pods that get an IP of their own: the
// addresses of the nodes' /24 on loopback (127.a.b.0/24, drawn per
// sandbox) that no node takes, from the top down, each held by one pod
// until it is gone, and reused last-freed-last.
type podIPs struct {
	mu    sync.Mutex
	free  []string
	byPod map[types.UID]string
	keys  map[types.NamespacedName]types.UID
}

// newPodIPs returns the allocator for nodeIPs' /24; nil when the nodes have
// no addresses of their own or do not share one /24 of loopback.
func newPodIPs(nodeIPs map[string]string) *podIPs {
	var prefix net.IP
	taken := map[string]bool{}
	for _, s := range nodeIPs {
		ip := net.ParseIP(s).To4()
		if ip == nil || ip[0] != 127 {
			return nil
		}
		p := net.IPv4(ip[0], ip[1], ip[2], 0).To4()
		if prefix != nil && !prefix.Equal(p) {
			return nil
		}
		prefix, taken[ip.String()] = p, true
	}
	if prefix == nil {
		return nil
	}
	a := &podIPs{byPod: map[types.UID]string{}, keys: map[types.NamespacedName]types.UID{}}
	for i := 254; i >= 1; i-- {
		ip := net.IPv4(prefix[0], prefix[1], prefix[2], byte(i)).String()
		if !taken[ip] {
			a.free = append(a.free, ip)
		}
	}
	return a
}

// get returns pod's IP, taking a free one the first time.
func (a *podIPs) get(pod *corev1.Pod) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byPod[pod.UID]; ok {
		return ip, nil
	}
	// A pod's name is unique while it lives: an older pod of this name
	// is gone.
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if old, ok := a.keys[key]; ok {
		a.releaseLocked(old)
	}
	if len(a.free) == 0 {
		return "", fmt.Errorf("no pod IP left for pod %s/%s", pod.Namespace, pod.Name)
	}
	ip := a.free[0]
	a.free = a.free[1:]
	a.byPod[pod.UID] = ip
	a.keys[key] = pod.UID
	return ip, nil
}

// release frees the IP of the pod named key, which is gone.
func (a *podIPs) release(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if uid, ok := a.keys[key]; ok {
		delete(a.keys, key)
		a.releaseLocked(uid)
	}
}

func (a *podIPs) releaseLocked(uid types.UID) {
	if ip, ok := a.byPod[uid]; ok {
		delete(a.byPod, uid)
		a.free = append(a.free, ip)
	}
}

// podIP returns the IP the kubelet gives pod: an IP of its own for the
// components of ownIPComponents, otherwise its node's ("" when the nodes
// have no addresses).
func (k *kubelet) podIP(pod *corev1.Pod) (string, error) {
	if k.ips != nil && needsOwnIP(pod) {
		return k.ips.get(pod)
	}
	return k.sim.nodeIPs[pod.Spec.NodeName], nil
}

// ganeshaPIDFile is the file Longhorn's share manager pods' readiness probe
// reads (cat /var/run/ganesha.pid): NFS-Ganesha writes it once it runs.
const ganeshaPIDFile = "/var/run/ganesha.pid"

// nfsPort is where NFS-Ganesha serves NFS in a share manager pod, the port
// of the Service Longhorn's share manager controller creates for it.
const nfsPort = 2049

// tcpReadinessPort returns the port the kubelet connects to on the pod's IP
// to probe its readiness, 0 when it has no probe it can run that way: the
// port of the first container's TCP readiness probe, or, for the exec probe
// Longhorn gives its share manager pods (cat of ganeshaPIDFile, which
// passes once NFS-Ganesha runs, serving NFS), the NFS port: the sandbox's
// kubelet runs no command in a container, and the simulated share manager
// (test/infrastructure/dataplane) listens there once its NFS server runs.
func tcpReadinessPort(pod *corev1.Pod) int {
	for _, c := range pod.Spec.Containers {
		p := c.ReadinessProbe
		switch {
		case p == nil:
		case p.TCPSocket != nil:
			return p.TCPSocket.Port.IntValue()
		case p.Exec != nil && slices.Equal(p.Exec.Command, []string{"cat", ganeshaPIDFile}):
			return nfsPort
		}
	}
	return 0
}

// probeReadiness reports a running pod's containers ready once its TCP
// readiness probe connects to the pod's IP, as the kubelet does, and asks
// to be called again until then. A pod without such a probe was reported
// ready when it started.
func (k *kubelet) probeReadiness(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	port := tcpReadinessPort(pod)
	if port == 0 || pod.Status.PodIP == "" || podContainersReady(pod) {
		return reconcile.Result{}, nil
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)), time.Second)
	if err != nil {
		return reconcile.Result{RequeueAfter: probeInterval}, nil
	}
	_ = conn.Close()
	base := pod.DeepCopy()
	setPodRunning(pod, metav1.Now())
	if err := k.sim.client.Status().Patch(ctx, pod, client.StrategicMergeFrom(base)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("The pod passed its readiness probe", "pod", klog.KObj(pod), "ip", pod.Status.PodIP)
	return reconcile.Result{}, nil
}

// setPodStarted sets the status of a pod that started on a host of hostIP
// with podIP: running, and ready at once unless it has a TCP readiness
// probe to pass first.
func setPodStarted(pod *corev1.Pod, hostIP, podIP string, now metav1.Time) {
	setPodRunning(pod, now)
	if hostIP != "" {
		pod.Status.HostIP = hostIP
		pod.Status.HostIPs = []corev1.HostIP{{IP: hostIP}}
	}
	if podIP != "" {
		pod.Status.PodIP = podIP
		pod.Status.PodIPs = []corev1.PodIP{{IP: podIP}}
	}
	if tcpReadinessPort(pod) == 0 {
		return
	}
	for i := range pod.Status.Conditions {
		if t := pod.Status.Conditions[i].Type; t == corev1.ContainersReady || t == corev1.PodReady {
			pod.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	for i := range pod.Status.ContainerStatuses {
		pod.Status.ContainerStatuses[i].Ready = false
	}
}

// podContainersReady reports whether every container of pod is ready.
func podContainersReady(pod *corev1.Pod) bool {
	if len(pod.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, st := range pod.Status.ContainerStatuses {
		if !st.Ready {
			return false
		}
	}
	return true
}
