package simcluster

import (
	"fmt"
	"testing"

	lhtypes "github.com/longhorn/longhorn-manager/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestPodIPs: Longhorn's backing-image and share manager pods get IPs of
// their own in the nodes' /24, none a node's or another live pod's, kept
// while the pod lives and freed when it is gone; other pods are not
// theirs to have.
func TestPodIPs(t *testing.T) {
	nodes := map[string]string{"node-1": "127.150.7.1", "node-2": "127.150.7.2"}
	ips := newPodIPs(nodes)
	if ips == nil {
		t.Fatal("no allocator for nodes on one /24 of loopback")
	}
	if newPodIPs(map[string]string{"a": "127.1.1.1", "b": "127.1.2.1"}) != nil || newPodIPs(map[string]string{"a": "10.0.0.1"}) != nil || newPodIPs(nil) != nil {
		t.Error("an allocator for nodes that do not share one /24 of loopback")
	}
	pod := func(name, uid, component string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "longhorn-system", Name: name, UID: types.UID(uid),
			Labels: map[string]string{lhtypes.GetLonghornLabelComponentKey(): component}}}
	}
	for _, c := range []string{lhtypes.LonghornLabelBackingImageManager, lhtypes.LonghornLabelBackingImageDataSource, lhtypes.LonghornLabelShareManager} {
		if !needsOwnIP(pod("p", "u", c)) {
			t.Errorf("a %s pod gets its node's IP", c)
		}
	}
	if needsOwnIP(pod("p", "u", lhtypes.LonghornLabelInstanceManager)) {
		t.Error("an instance manager pod gets an IP of its own")
	}
	seen := map[string]bool{"127.150.7.1": true, "127.150.7.2": true}
	var first string
	for i := range 252 {
		ip, err := ips.get(pod(fmt.Sprintf("bim-%d", i), fmt.Sprintf("uid-%d", i), lhtypes.LonghornLabelBackingImageManager))
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if seen[ip] {
			t.Fatalf("pod %d got %s, which is taken", i, ip)
		}
		seen[ip] = true
		if i == 0 {
			first = ip
		}
	}
	if first != "127.150.7.254" {
		t.Errorf("the first pod IP is %s, want the top of the /24", first)
	}
	if _, err := ips.get(pod("more", "zz", lhtypes.LonghornLabelBackingImageManager)); err == nil {
		t.Error("a pod IP beyond the /24")
	}
	// A pod keeps its IP; one gone frees it, and so does a new pod of the
	// same name.
	if again, _ := ips.get(pod("bim-0", "uid-0", lhtypes.LonghornLabelBackingImageManager)); again != first {
		t.Errorf("the pod's IP changed from %s to %s", first, again)
	}
	ips.release(types.NamespacedName{Namespace: "longhorn-system", Name: "bim-0"})
	if ip, err := ips.get(pod("next", "n1", lhtypes.LonghornLabelBackingImageManager)); err != nil || ip != first {
		t.Errorf("after a pod went: %q, %v, want its IP %s", ip, err, first)
	}
	second, _ := ips.get(pod("bim-1", "uid-1", lhtypes.LonghornLabelBackingImageManager))
	if ip, err := ips.get(pod("bim-1", "uid-1-new", lhtypes.LonghornLabelBackingImageManager)); err != nil || ip != second {
		t.Errorf("a new pod of the same name: %q, %v, want the old one's %s", ip, err, second)
	}
}

// TestSetPodStarted: a started pod runs at its IP on its host's, ready at
// once unless it has a TCP readiness probe to pass first, or the probe of
// Longhorn's share manager pods (cat /var/run/ganesha.pid), which the
// kubelet runs as a TCP probe of the NFS port.
func TestSetPodStarted(t *testing.T) {
	probed := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", ReadinessProbe: &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(8000)}},
	}}}}}
	shareManager := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "share-manager", ReadinessProbe: &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/var/run/ganesha.pid"}}},
	}}}}}
	otherExec := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", ReadinessProbe: &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
	}}}}}
	plain := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	if port := tcpReadinessPort(shareManager); port != 2049 {
		t.Errorf("the share manager pod is probed at port %d, want NFS's 2049", port)
	}
	for _, tc := range []struct {
		pod   *corev1.Pod
		ready bool
	}{{probed, false}, {shareManager, false}, {otherExec, true}, {plain, true}} {
		setPodStarted(tc.pod, "127.1.1.1", "127.1.1.254", metav1.Now())
		if tc.pod.Status.Phase != corev1.PodRunning || tc.pod.Status.HostIP != "127.1.1.1" || tc.pod.Status.PodIP != "127.1.1.254" {
			t.Errorf("status %+v", tc.pod.Status)
		}
		if got := podContainersReady(tc.pod); got != tc.ready {
			t.Errorf("probe port %d: ready %t, want %t", tcpReadinessPort(tc.pod), got, tc.ready)
		}
	}
}
