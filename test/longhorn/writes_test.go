package longhorn_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// TestPodsWriteTheirVolumes: pods annotated to write into their Longhorn
// volumes write through the simulated engine, and Longhorn's own
// controllers see the bytes. A pod writing 30Gi into a 50Gi volume of two
// replicas makes the volume's actualSize (longhorn-manager's sum of the
// engine's snapshot sizes) 30Gi. Two pods writing 30Gi each into 30Gi
// volumes whose single replicas share a 40Gi disk (Longhorn's
// over-provisioning at 200% lets both be placed there) fill it: one
// volume's write fails with ENOSPC in its replica, the pod gets a
// WriteFailed Event, and Longhorn's controllers mark that replica failed.
func TestPodsWriteTheirVolumes(t *testing.T) {
	topo := &sandbox.Topology{}
	for i, size := range []int64{100 * gib, 100 * gib, 40 * gib} {
		tag := "big"
		if size < 100*gib {
			tag = "small"
		}
		topo.Nodes = append(topo.Nodes, sandbox.Node{Name: fmt.Sprintf("node-%d", i+1), Disks: []sandbox.Disk{{Name: "disk-1", Size: size, Tags: []string{tag}}}})
	}
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: sandbox.Options{Topology: topo}, TailLogs: []string{"longhorn-controllers.log"}})
	c := sb.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Over-provisioning at 200%, as an operator sets it, so that two 30Gi
	// volumes are placed on the 40Gi disk.
	setting := &lhv1.Setting{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: string(lhtypes.SettingNameStorageOverProvisioningPercentage)}, setting); err != nil {
		t.Fatal(err)
	}
	setting.Value = "200"
	if err := c.Update(ctx, setting); err != nil {
		t.Fatalf("setting over-provisioning to 200%%: %v", err)
	}
	for name, params := range map[string]map[string]string{
		"two-big":   {simcluster.ParamNumberOfReplicas: "2", simcluster.ParamDiskSelector: "big"},
		"one-small": {simcluster.ParamNumberOfReplicas: "1", simcluster.ParamDiskSelector: "small"},
	} {
		class := sandbox.StorageClass()
		class.Name, class.Annotations = name, nil
		for k, v := range params {
			class.Parameters[k] = v
		}
		if err := c.Create(ctx, class); err != nil {
			t.Fatal(err)
		}
	}

	// Every Replica event is watched: a failed replica is seen even when
	// Longhorn salvages or replaces it soon after.
	var mu sync.Mutex
	failed := map[string]string{} // volume → a replica failed
	sandboxtest.WatchEach(ctx, t, sandboxtest.WatchingClient(t, sb), func(obj runtime.Object, _ bool, _ time.Time) {
		if r, ok := obj.(*lhv1.Replica); ok && r.Spec.FailedAt != "" {
			mu.Lock()
			failed[r.Spec.VolumeName] = r.Name
			mu.Unlock()
		}
	}, &lhv1.ReplicaList{})

	// 30Gi into a 50Gi volume of two replicas.
	before := map[string]int64{} // storageAvailable of the big disks, by node
	for _, node := range []string{"node-1", "node-2"} {
		n := &lhv1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: node}, n); err != nil {
			t.Fatal(err)
		}
		before[node] = n.Status.DiskStatus["disk-1"].StorageAvailable
	}
	vol := runWriter(ctx, t, c, "writer", "two-big", "50Gi", "30Gi")
	testenv.Eventually(t, ctx, 2*time.Minute, "volume "+vol+" holds 30Gi (its actualSize), the pod told so", func(ctx context.Context) (bool, string, error) {
		v := &lhv1.Volume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, v); err != nil {
			return false, "", err
		}
		events, err := podEvents(ctx, c, "writer")
		if err != nil {
			return false, "", err
		}
		return v.Status.ActualSize == 30*gib && strings.Contains(events, simcluster.EventReasonWritten),
			fmt.Sprintf("actualSize %d, robustness %s, the pod's events: %s", v.Status.ActualSize, v.Status.Robustness, events), nil
	})

	// Longhorn's disk monitor reads each replica's disk with statfs (every
	// 30 s): its storageAvailable falls by the 30Gi, within two periods
	// (Longhorn's node controller rounds it down to 100Mi).
	testenv.Eventually(t, ctx, 75*time.Second, "the storageAvailable of both replicas' disks fell by 30Gi", func(ctx context.Context) (bool, string, error) {
		var state []string
		fell := 0
		for node, was := range before {
			n := &lhv1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: node}, n); err != nil {
				return false, "", err
			}
			now := n.Status.DiskStatus["disk-1"].StorageAvailable
			if drop := was - now; drop >= 30*gib-100*mib && drop <= 30*gib+100*mib {
				fell++
			}
			state = append(state, fmt.Sprintf("%s: %d MiB available, was %d MiB", node, now/mib, was/mib))
		}
		return fell == len(before), strings.Join(state, "; "), nil
	})

	// 2 × 30Gi into one 40Gi disk.
	vols := map[string]string{}
	for _, name := range []string{"filler-a", "filler-b"} {
		vols[name] = runWriter(ctx, t, c, name, "one-small", "30Gi", "30Gi")
	}
	testenv.Eventually(t, ctx, 2*time.Minute, "one pod's write failed for space, the other's written, and Longhorn marked the full replica failed", func(ctx context.Context) (bool, string, error) {
		var written, refused []string
		var state []string
		for name := range vols {
			events, err := podEvents(ctx, c, name)
			if err != nil {
				return false, "", err
			}
			switch {
			case strings.Contains(events, simcluster.EventReasonWriteFailed) && strings.Contains(events, "no space left on device"):
				refused = append(refused, name)
			case strings.Contains(events, simcluster.EventReasonWritten):
				written = append(written, name)
			}
			state = append(state, name+": "+events)
		}
		mu.Lock()
		defer mu.Unlock()
		ok := len(written) == 1 && len(refused) == 1 && failed[vols[refused[0]]] != ""
		return ok, fmt.Sprintf("written %v, refused %v, failed replicas by volume %v; %s", written, refused, failed, strings.Join(state, "; ")), nil
	})
	mu.Lock()
	defer mu.Unlock()
	if r := failed[vol]; r != "" {
		t.Errorf("replica %s of volume %s, which had room, failed", r, vol)
	}
}

// runWriter creates a claim of size in class and a pod using it, annotated
// to write write bytes into it, waits until the pod runs, and returns the
// volume's name.
func runWriter(ctx context.Context, t *testing.T, c client.Client, name, class, size, write string) string {
	t.Helper()
	pvc, pod := sandboxtest.ClaimAndPod(name, size, class)
	pod.Annotations = map[string]string{simcluster.AnnotationWrite: write}
	for _, o := range []client.Object{pvc, pod} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, ctx, 2*time.Minute, "pod "+name+" running", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		return pod.Status.Phase == corev1.PodRunning, fmt.Sprintf("pod %s on %q", pod.Status.Phase, pod.Spec.NodeName), nil
	})
	return simcluster.VolumeName(pvc)
}

// podEvents returns the reasons and notes of the Events about the pod
// name in the default namespace, joined.
func podEvents(ctx context.Context, c client.Client, name string) (string, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
		return "", err
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Pod" && e.Regarding.Name == name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return strings.Join(out, " | "), nil
}
