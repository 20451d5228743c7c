package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// kindTopology has a node whose one disk is too small for any claim of the
// test (node-1, 10Gi), a node with room for one 50Gi claim and not for
// more (node-2, 100Gi), and three nodes with room for every other replica.
func kindTopology() *sandbox.Topology {
	node := func(name, size string) sandbox.Node {
		q := resource.MustParse(size)
		return sandbox.Node{Name: name, Disks: []sandbox.Disk{{Name: "disk-1", Size: q.Value()}}}
	}
	return &sandbox.Topology{Nodes: []sandbox.Node{
		node("node-1", "10Gi"), node("node-2", "100Gi"),
		node("node-3", "400Gi"), node("node-4", "400Gi"), node("node-5", "400Gi"),
	}}
}

// longhornDefaultClass is the default StorageClass of Longhorn v1.12's
// chart (its longhorn-storageclass ConfigMap) at the chart's defaults,
// under another name: Immediate binding, 3 replicas, data locality
// disabled.
func longhornDefaultClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: "longhorn-chart-default"},
		Provisioner:          simcluster.CSIDriver,
		AllowVolumeExpansion: ptr.To(true),
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
		Parameters: map[string]string{
			"numberOfReplicas":    "3",
			"staleReplicaTimeout": "30",
			"fromBackup":          "",
			"fsType":              "ext4",
			"mkfsParams":          "",
			"dataLocality":        "disabled",
		},
	}
}

// bestEffortClass is a best-effort class of two replicas that binds once
// kube-scheduler chose the pod's node, so the extender reads the claim's
// kind from the class's parameters.
func bestEffortClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "longhorn-best-effort-2"},
		Provisioner:       simcluster.CSIDriver,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		Parameters:        map[string]string{"numberOfReplicas": "2", "dataLocality": "best-effort", "staleReplicaTimeout": "30"},
	}
}

// TestVolumeKinds runs pods through the real kube-scheduler and the
// extender, with Longhorn's own controllers placing replicas: a claim of
// Longhorn's default class (3 replicas, data locality disabled) takes no
// space on the pod's node, so its pod runs on a node whose disk cannot
// hold it and nothing is reserved for it; a best-effort claim of 2
// replicas gets one reservation, on its pod's node, and one local replica;
// a pod with one claim of each kind lands where the best-effort volume
// fits, though both would not, and only that volume is reserved.
func TestVolumeKinds(t *testing.T) {
	t.Parallel()
	cl := startSandbox(t, "topology.yaml", func(o *sandbox.Options) { o.Topology = kindTopology() })
	ctx := context.Background()
	for _, sc := range []*storagev1.StorageClass{longhornDefaultClass(), bestEffortClass()} {
		if err := cl.c.Create(ctx, sc); err != nil {
			t.Fatalf("creating StorageClass %s: %v", sc.Name, err)
		}
	}
	seen := cl.watchReservations(t)
	defer cl.dumpLedgers(t)

	t.Run("default class on a node with no free local disk", func(t *testing.T) {
		ns := cl.namespace(t, "kind-default")
		claim := cl.claim(t, ns, "data", "longhorn-chart-default", "50Gi")
		volume := cl.boundVolume(t, claim)
		pod := cl.pinnedPod(t, ns, "app", "node-1", claim)
		cl.waitRunningOn(t, pod, "node-1")
		if got := seen.of(ns + "/app"); len(got) != 0 {
			t.Errorf("reservations written for pod app: %v, want none", got)
		}
		if got := seen.ofVolume(volume); len(got) != 0 {
			t.Errorf("reservations written for volume %s: %v, want none", volume, got)
		}
	})

	t.Run("best-effort with two replicas", func(t *testing.T) {
		ns := cl.namespace(t, "kind-best-effort")
		claim := cl.claim(t, ns, "data", "longhorn-best-effort-2", "50Gi")
		pod := cl.pinnedPod(t, ns, "app", "node-3", claim)
		cl.waitRunningOn(t, pod, "node-3")
		volume := cl.boundVolume(t, claim)
		want := []string{fmt.Sprintf("%s on node-3 (50Gi)", volume)}
		if got := seen.of(ns + "/app"); !slices.Equal(got, want) {
			t.Errorf("reservations written for pod app: %v, want %v", got, want)
		}
		cl.waitReplicas(t, volume, "node-3", 2)
	})

	t.Run("one claim of each kind", func(t *testing.T) {
		ns := cl.namespace(t, "kind-mixed")
		shared := cl.claim(t, ns, "shared", "longhorn-chart-default", "200Gi")
		sharedVolume := cl.boundVolume(t, shared)
		local := cl.claim(t, ns, "local", "longhorn-best-effort-2", "50Gi")
		// node-2's 100Gi hold the best-effort volume's 50Gi, not 250Gi.
		pod := cl.pinnedPod(t, ns, "app", "node-2", shared, local)
		cl.waitRunningOn(t, pod, "node-2")
		localVolume := cl.boundVolume(t, local)
		want := []string{fmt.Sprintf("%s on node-2 (50Gi)", localVolume)}
		if got := seen.of(ns + "/app"); !slices.Equal(got, want) {
			t.Errorf("reservations written for pod app: %v, want %v", got, want)
		}
		if got := seen.ofVolume(sharedVolume); len(got) != 0 {
			t.Errorf("reservations written for volume %s: %v, want none", sharedVolume, got)
		}
		cl.waitReplicas(t, localVolume, "node-2", 2)
	})
}

// reservationLog records every reservation any DiskSchedule's spec held
// while the test ran.
type reservationLog struct {
	mu   sync.Mutex
	seen map[string]reservationSeen // by disk UUID/volume/pod
}

type reservationSeen struct {
	node, volume, pod string
	size              int64
}

func (l *reservationLog) record(ds *dsv1.DiskSchedule) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for volume, res := range ds.Spec.Reservations {
		l.seen[ds.Name+"/"+volume+"/"+res.Pod] = reservationSeen{node: ds.Spec.NodeID, volume: volume, pod: res.Pod, size: res.Size}
	}
}

// of returns the reservations made for pod ("namespace/name"), sorted.
func (l *reservationLog) of(pod string) []string {
	return l.where(func(r reservationSeen) bool { return r.pod == pod })
}

// ofVolume returns the reservations made for volume, sorted.
func (l *reservationLog) ofVolume(volume string) []string {
	return l.where(func(r reservationSeen) bool { return r.volume == volume })
}

func (l *reservationLog) where(match func(reservationSeen) bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.seen {
		if match(r) {
			out = append(out, fmt.Sprintf("%s on %s (%s)", r.volume, r.node, resource.NewQuantity(r.size, resource.BinarySI)))
		}
	}
	sort.Strings(out)
	return out
}

// watchReservations records, from an informer, every reservation written
// into a DiskSchedule from now until the test ends.
func (cl *cluster) watchReservations(t *testing.T) *reservationLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := cache.New(cl.sb.AdminConfig(), cache.Options{Scheme: cl.sb.Scheme(),
		DefaultNamespaces: map[string]cache.Config{sandbox.Namespace: {}}})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := c.GetInformer(ctx, &dsv1.DiskSchedule{})
	if err != nil {
		t.Fatal(err)
	}
	log := &reservationLog{seen: map[string]reservationSeen{}}
	see := func(obj any) {
		if ds, ok := obj.(*dsv1.DiskSchedule); ok {
			log.record(ds)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: see, UpdateFunc: func(_, obj any) { see(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the DiskSchedule informer did not sync")
	}
	return log
}

// namespace creates a namespace for one part of a test.
func (cl *cluster) namespace(t *testing.T, name string) string {
	t.Helper()
	if err := cl.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

// claim creates a claim of class.
func (cl *cluster) claim(t *testing.T, ns, name, class, size string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	if err := cl.c.Create(context.Background(), pvc); err != nil {
		t.Fatalf("creating claim %s/%s: %v", ns, name, err)
	}
	return pvc
}

// boundVolume waits until claim is bound and returns its Longhorn volume's name.
func (cl *cluster) boundVolume(t *testing.T, claim *corev1.PersistentVolumeClaim) string {
	t.Helper()
	cur := &corev1.PersistentVolumeClaim{}
	pv := &corev1.PersistentVolume{}
	testenv.Eventually(t, context.Background(), 60*time.Second, fmt.Sprintf("claim %s/%s is bound", claim.Namespace, claim.Name), func(ctx context.Context) (bool, string, error) {
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(claim), cur); err != nil {
			return false, "", err
		}
		if cur.Status.Phase != corev1.ClaimBound {
			return false, fmt.Sprintf("phase %q", cur.Status.Phase), nil
		}
		return true, "", cl.c.Get(ctx, client.ObjectKey{Name: cur.Spec.VolumeName}, pv)
	}, testenv.Every(100*time.Millisecond))
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != simcluster.CSIDriver {
		t.Fatalf("claim %s/%s is bound to %s, which is not a Longhorn volume", claim.Namespace, claim.Name, pv.Name)
	}
	return pv.Spec.CSI.VolumeHandle
}

// pinnedPod creates a pod using claims that goes through the extender and
// may only run on node.
func (cl *cluster) pinnedPod(t *testing.T, ns, name, node string, claims ...*corev1.PersistentVolumeClaim) *corev1.Pod {
	t.Helper()
	one := corev1.ResourceList{simcluster.ExtendedResource: resource.MustParse("1")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers: []corev1.Container{{Name: "app", Image: "busybox", Command: []string{"sleep", "infinity"},
				Resources: corev1.ResourceRequirements{Requests: one, Limits: one}}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		}}
	for i, c := range claims {
		vol := fmt.Sprintf("data-%d", i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: "/" + vol})
	}
	if err := cl.c.Create(context.Background(), pod); err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return pod
}

// waitRunningOn waits until pod is bound to node and Running, and fails
// with kube-scheduler's last word on it otherwise.
func (cl *cluster) waitRunningOn(t *testing.T, pod *corev1.Pod, node string) {
	t.Helper()
	cur := &corev1.Pod{}
	testenv.Eventually(t, context.Background(), 90*time.Second, fmt.Sprintf("pod %s/%s is Running on %s", pod.Namespace, pod.Name, node), func(ctx context.Context) (bool, string, error) {
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
			return false, "", err
		}
		why := ""
		for _, c := range cur.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				why = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return cur.Spec.NodeName == node && cur.Status.Phase == corev1.PodRunning,
			fmt.Sprintf("on %q in phase %s (PodScheduled %s)", cur.Spec.NodeName, cur.Status.Phase, why), nil
	}, testenv.Every(100*time.Millisecond))
}

// waitReplicas waits until Longhorn's volume has replicas placed replicas,
// exactly one of them on node.
func (cl *cluster) waitReplicas(t *testing.T, volume, node string, replicas int) {
	t.Helper()
	testenv.Eventually(t, context.Background(), 60*time.Second, fmt.Sprintf("volume %s has %d replicas, one on %s", volume, replicas, node), func(ctx context.Context) (bool, string, error) {
		list := &lhv1.ReplicaList{}
		if err := cl.c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		var placed []string
		local := 0
		for _, r := range list.Items {
			if r.Spec.VolumeName != volume || !r.DeletionTimestamp.IsZero() || r.Spec.DiskID == "" {
				continue
			}
			placed = append(placed, r.Spec.NodeID)
			if r.Spec.NodeID == node {
				local++
			}
		}
		sort.Strings(placed)
		return len(placed) == replicas && local == 1, "on " + strings.Join(placed, ", "), nil
	}, testenv.Every(100*time.Millisecond))
}
