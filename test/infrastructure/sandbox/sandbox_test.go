package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// gracePeriod is the sandbox's node monitor grace period in these tests:
// short, so that a node without heartbeats is marked unhealthy soon, yet
// long enough that a busy machine does not stall the simulated kubelets'
// leases (renewed every 3s, lasting 12s) past it.
const gracePeriod = 15 * time.Second

// waitTimeout is how long a test waits for the sandbox to reach a state.
const waitTimeout = time.Minute

// twoNodes is the sandbox the end-to-end test runs.
const twoNodes = `
nodes:
- name: node-1
  zone: zone-a
  disks:
  - {name: disk-1, size: 100Gi}
- name: node-2
  zone: zone-b
  disks:
  - {name: disk-1, size: 100Gi}
`

// TestSandbox starts the sandbox with real etcd, kube-apiserver and
// kube-scheduler processes, without and with the extender, and runs a pod
// with a Longhorn volume through it: kube-scheduler binds the pod, the
// data plane provisions and attaches the volume, the manager (under its
// generated RBAC only) places the replica on the pod's node through the
// ledger, and everything is released and stopped again.
func TestSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	for _, tt := range []struct {
		name     string
		extender bool
	}{
		{name: "without the extender", extender: false},
		{name: "with the extender", extender: true},
	} {
		t.Run(tt.name, func(t *testing.T) { testSandbox(t, tt.extender) })
	}
}

func testSandbox(t *testing.T, extender bool) {
	topo, err := sandbox.ParseTopology([]byte(twoNodes))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := &testenv.LockedBuffer{}
	sb, err := sandbox.Start(context.Background(), sandbox.Options{
		Topology:       topo,
		Extender:       extender,
		KubeconfigPath: filepath.Join(dir, "kubeconfig"),
		ConfigDir:      filepath.Join(testenv.RepoRoot(), "config"),
		AssetsDir:      testenv.AssetsDir(),
		LogDir:         filepath.Join(dir, "logs"),
		Out:            out,

		NodeMonitorGracePeriod: gracePeriod,
	})
	if err != nil {
		t.Fatalf("starting the sandbox: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if err := sb.Stop(); err != nil {
			t.Errorf("stopping the sandbox: %v", err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			testenv.LogTail(t, filepath.Join(dir, "logs", "kube-scheduler.log"))
			testenv.LogTail(t, filepath.Join(dir, "logs", "kube-controller-manager.log"))
		}
	})
	if !strings.Contains(out.String(), "\nsandbox ready\n") {
		t.Errorf("the progress lines have no line `sandbox ready`:\n%s", out)
	}
	if _, err := os.Stat(sb.KubeconfigPath()); err != nil {
		t.Errorf("the administrator's kubeconfig: %v", err)
	}
	if got := sb.ExtenderURL() != ""; got != extender {
		t.Errorf("ExtenderURL() = %q with extender=%v", sb.ExtenderURL(), extender)
	}

	if !extender {
		t.Run("the nodes keep their leases past the node monitor grace period", func(t *testing.T) {
			testNodeHeartbeats(t, sb, "node-1", "node-2")
		})
	}
	t.Run("a pod is scheduled by kube-scheduler and its replica placed on the pod's node", func(t *testing.T) {
		testWorkload(t, sb)
	})
	t.Run("a WaitForFirstConsumer claim is provisioned on the node kube-scheduler selected", func(t *testing.T) {
		testWaitForFirstConsumer(t, sb)
	})
	t.Run("the samples' StatefulSet and Deployment run with bound Longhorn claims", func(t *testing.T) {
		testSampleWorkloads(t, sb)
	})
	t.Run("the manager runs under the deployment's RBAC only", func(t *testing.T) {
		testManagerRBAC(t, sb)
	})
	t.Run("Stop leaves no process and no port behind", func(t *testing.T) {
		select {
		case <-sb.Done():
			t.Errorf("a component of the sandbox stopped on its own: %v", sb.Err())
		default:
		}
		testStop(t, sb)
	})
}

func testWorkload(t *testing.T, sb *sandbox.Sandbox) {
	ctx := context.Background()
	c := sb.Client()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "workload"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	size := resource.MustParse("10Gi")
	pvc, pod := claimAndPod(ns.Name, sandbox.StorageClassName, size)
	for _, obj := range []client.Object{pvc, pod} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	// kube-scheduler binds the pod (nothing else in the sandbox binds pods)
	// and says so in a Scheduled event.
	testenv.Eventually(t, t.Context(), waitTimeout, "the pod is bound to a node by kube-scheduler", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		scheduled := false
		for _, cond := range pod.Status.Conditions {
			scheduled = scheduled || cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue
		}
		return pod.Spec.NodeName != "" && scheduled, fmt.Sprintf("nodeName %q, conditions %v", pod.Spec.NodeName, pod.Status.Conditions), nil
	})
	node := pod.Spec.NodeName
	if node != "node-1" && node != "node-2" {
		t.Fatalf("the pod is on %q, not a sandbox node", node)
	}
	testenv.Eventually(t, t.Context(), waitTimeout, "kube-scheduler reports the binding", func(ctx context.Context) (bool, string, error) {
		events := &eventsv1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(ns.Name)); err != nil {
			return false, "", err
		}
		var seen []string
		for _, e := range events.Items {
			seen = append(seen, e.ReportingController+"/"+e.Reason)
			if e.Regarding.Name == pod.Name && e.Reason == "Scheduled" && e.ReportingController == "default-scheduler" {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("events %v", seen), nil
	})

	// The data plane provisions the claim and attaches the volume to the pod's node.
	testenv.Eventually(t, t.Context(), waitTimeout, "the claim is bound", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		return pvc.Spec.VolumeName != "" && pvc.Status.Phase == corev1.ClaimBound, fmt.Sprintf("volumeName %q, phase %s", pvc.Spec.VolumeName, pvc.Status.Phase), nil
	})
	volKey := client.ObjectKey{Namespace: sandbox.Namespace, Name: "pvc-" + string(pvc.UID)}
	if pvc.Spec.VolumeName != volKey.Name {
		t.Errorf("the claim is bound to %s, want %s", pvc.Spec.VolumeName, volKey.Name)
	}
	vol := &lhv1.Volume{}
	testenv.Eventually(t, t.Context(), waitTimeout, "the volume is attached to the pod's node", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, volKey, vol); err != nil {
			return false, "", client.IgnoreNotFound(err)
		}
		return vol.Spec.NodeID == node, fmt.Sprintf("nodeID %q", vol.Spec.NodeID), nil
	})
	if vol.Spec.Size != size.Value() || vol.Spec.NumberOfReplicas != 1 || vol.Spec.DataLocality != lhv1.DataLocalityBestEffort {
		t.Errorf("volume spec = %+v, want 10Gi, 1 replica, best-effort (from the StorageClass)", vol.Spec)
	}

	// Longhorn places the replica on the pod's node (best-effort locality);
	// the manager's ledger grants it (the extender's reservation handed over,
	// or the mirror adopting it); Longhorn starts it, then the pod.
	disk := sandbox.DiskUUID(node, "disk-1")
	var rep lhv1.Replica
	testenv.Eventually(t, t.Context(), waitTimeout, "a replica is granted on the pod's node's disk and running", func(ctx context.Context) (bool, string, error) {
		reps, err := volumeReplicas(ctx, c, vol.Name)
		if err != nil || len(reps) != 1 {
			return false, fmt.Sprintf("%d replicas", len(reps)), err
		}
		rep = reps[0]
		if rep.Spec.NodeID != node || rep.Spec.DiskID != disk {
			return false, fmt.Sprintf("replica %s on node %q disk %q", rep.Name, rep.Spec.NodeID, rep.Spec.DiskID), nil
		}
		ds := &dsv1.DiskSchedule{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: disk}, ds); err != nil {
			return false, "", err
		}
		entry, ok := ds.Status.Replicas[rep.Name]
		if !ok || entry.State != dsv1.RequestStateScheduled || entry.ScheduledSize != size.Value() || rep.Spec.VolumeSize != size.Value() {
			return false, fmt.Sprintf("ledger entry %+v, replica size %d", entry, rep.Spec.VolumeSize), nil
		}
		return rep.Status.CurrentState == lhv1.InstanceStateRunning, fmt.Sprintf("replica state %q", rep.Status.CurrentState), nil
	})
	testenv.Eventually(t, t.Context(), waitTimeout, "the pod is Running", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		return pod.Status.Phase == corev1.PodRunning, fmt.Sprintf("phase %s", pod.Status.Phase), nil
	})

	// Expanding the claim: kube-controller-manager's expander leaves it to
	// the external resizer, which grows the volume (the gate lets it), the
	// replica, the PersistentVolume and the claim. (The expander's
	// ExternalExpanding event is checked in package simcluster, where a
	// refused expansion keeps the claim asking: here the expansion may be
	// done before the expander looks.)
	size = resource.MustParse("20Gi")
	testenv.SetClaimRequest(t, c, pvc, size)
	testenv.Eventually(t, t.Context(), waitTimeout, "the volume, its replica and the claim are expanded", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, volKey, vol); err != nil {
			return false, "", err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		reps, err := volumeReplicas(ctx, c, vol.Name)
		if err != nil || len(reps) != 1 {
			return false, fmt.Sprintf("%d replicas", len(reps)), err
		}
		capacity := pvc.Status.Capacity[corev1.ResourceStorage]
		return vol.Spec.Size == size.Value() && reps[0].Spec.VolumeSize == size.Value() && capacity.Cmp(size) == 0,
			fmt.Sprintf("volume %d, replica %d, claim %s", vol.Spec.Size, reps[0].Spec.VolumeSize, capacity.String()), nil
	})

	// Deleting the pod detaches the volume; deleting the claim reclaims the
	// volume, its replica and its ledger entry.
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), waitTimeout, "the pod is gone and the volume detached", func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		if client.IgnoreNotFound(err) != nil {
			return false, "", err
		}
		if err := c.Get(ctx, volKey, vol); err != nil {
			return false, "", err
		}
		return apierrors.IsNotFound(err) && vol.Spec.NodeID == "", fmt.Sprintf("pod found: %v, nodeID %q", err == nil, vol.Spec.NodeID), nil
	})
	if err := c.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), waitTimeout, "the claim, its PersistentVolume, the volume and the ledger entry are gone", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, obj := range []client.Object{&corev1.PersistentVolumeClaim{ObjectMeta: pvc.ObjectMeta},
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volKey.Name}}, &lhv1.Volume{ObjectMeta: metav1.ObjectMeta{Namespace: volKey.Namespace, Name: volKey.Name}}} {
			err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if client.IgnoreNotFound(err) != nil {
				return false, "", err
			}
			if err == nil {
				left = append(left, fmt.Sprintf("%T %s", obj, obj.GetName()))
			}
		}
		ds := &dsv1.DiskSchedule{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: disk}, ds); err != nil {
			return false, "", err
		}
		if _, ok := ds.Status.Replicas[rep.Name]; ok || ds.Status.StorageScheduled != 0 {
			left = append(left, fmt.Sprintf("ledger %s grants %d bytes", disk, ds.Status.StorageScheduled))
		}
		return len(left) == 0, strings.Join(left, ", "), nil
	})
}

// testNodeHeartbeats checks that kube-controller-manager's node lifecycle
// controller watches the nodes and finds the simulated ones alive: it
// removes the not-ready taint the API server gives new nodes, marks a node
// nobody renews a Lease for unhealthy within the grace period, and leaves
// the simulated nodes, whose Leases the simulated kubelets renew, Ready and
// untainted for one and a half grace periods.
func testNodeHeartbeats(t *testing.T, sb *sandbox.Sandbox, nodes ...string) {
	ctx := context.Background()
	c := sb.Client()
	ghost := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ghost", Labels: map[string]string{corev1.LabelHostname: "ghost"}}}
	if err := c.Create(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), ghost); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting node %s: %v", ghost.Name, err)
		}
	})
	// kube-controller-manager may write the new node first (its taints):
	// report Ready on the latest version.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ghost), ghost); err != nil {
			return err
		}
		now := metav1.Now()
		ghost.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now}}
		return c.Status().Update(ctx, ghost)
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testenv.Eventually(t, t.Context(), waitTimeout, "a node without heartbeats is marked unhealthy", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ghost), ghost); err != nil {
			return false, "", err
		}
		return hasTaint(ghost, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) && readyStatus(ghost) == corev1.ConditionUnknown,
			fmt.Sprintf("taints %v, Ready %s", ghost.Spec.Taints, readyStatus(ghost)), nil
	})
	deadline := start.Add(gracePeriod + gracePeriod/2)
	testenv.Eventually(t, t.Context(), waitTimeout, "the simulated nodes' leases renewed one and a half grace periods after the start", func(ctx context.Context) (bool, string, error) {
		for _, name := range nodes {
			lease := &coordinationv1.Lease{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}, lease); err != nil {
				return false, "", client.IgnoreNotFound(err)
			}
			if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(deadline) {
				return false, fmt.Sprintf("lease %s renewed at %v", name, lease.Spec.RenewTime), nil
			}
			if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].Kind != "Node" || lease.OwnerReferences[0].Name != name {
				return false, fmt.Sprintf("lease %s owned by %v", name, lease.OwnerReferences), nil
			}
		}
		return true, "", nil
	})
	for _, name := range nodes {
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			t.Fatal(err)
		}
		if readyStatus(node) != corev1.ConditionTrue || len(node.Spec.Taints) != 0 {
			t.Errorf("node %s: Ready %s, taints %v; want Ready and untainted", name, readyStatus(node), node.Spec.Taints)
		}
	}
}

// readyStatus returns the status of a node's Ready condition, or "".
func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// hasTaint reports whether the node has the taint key with effect.
func hasTaint(node *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

// testWaitForFirstConsumer runs a pod with a claim of the sandbox's
// WaitForFirstConsumer Longhorn class, whose capacity the CSI driver
// publishes per node for kube-scheduler: kube-scheduler selects the node
// (the claim's volume.kubernetes.io/selected-node), the PV controller hands
// the claim to the external provisioner, which provisions it, the PV
// controller binds it, and the pod runs on the selected node.
func testWaitForFirstConsumer(t *testing.T, sb *sandbox.Sandbox) {
	ctx := context.Background()
	c := sb.Client()
	class := &storagev1.StorageClass{}
	if err := c.Get(ctx, client.ObjectKey{Name: sandbox.WaitForFirstConsumerClassName}, class); err != nil {
		t.Fatal(err)
	}
	if mode := ptr.Deref(class.VolumeBindingMode, ""); mode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Fatalf("StorageClass %s binds %s, want WaitForFirstConsumer", class.Name, mode)
	}
	testenv.Eventually(t, t.Context(), waitTimeout, "CSIDriver "+simcluster.CSIDriver+" asks kube-scheduler to check a CSIStorageCapacity per node", func(ctx context.Context) (bool, string, error) {
		driver := &storagev1.CSIDriver{}
		if err := c.Get(ctx, client.ObjectKey{Name: simcluster.CSIDriver}, driver); err != nil {
			return false, "", client.IgnoreNotFound(err)
		}
		list := &storagev1.CSIStorageCapacityList{}
		if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		nodes := map[string]bool{}
		for _, cap := range list.Items {
			if cap.StorageClassName == class.Name && cap.NodeTopology != nil && cap.Capacity != nil && cap.Capacity.Sign() > 0 {
				nodes[cap.NodeTopology.MatchLabels[corev1.LabelHostname]] = true
			}
		}
		return ptr.Deref(driver.Spec.StorageCapacity, false) && len(nodes) == 2 && nodes["node-1"] && nodes["node-2"],
			fmt.Sprintf("storageCapacity %v, capacity published for %d nodes", ptr.Deref(driver.Spec.StorageCapacity, false), len(nodes)), nil
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wffc"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	pvc, pod := claimAndPod(ns.Name, class.Name, resource.MustParse("10Gi"))
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), waitTimeout, "the claim waits for its first consumer", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		return pvc.Status.Phase == corev1.ClaimPending, fmt.Sprintf("phase %s", pvc.Status.Phase), nil
	})
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), waitTimeout, "the claim is bound on the node kube-scheduler selected and the pod runs there", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		selected := pvc.Annotations["volume.kubernetes.io/selected-node"]
		return selected != "" && selected == pod.Spec.NodeName && pvc.Status.Phase == corev1.ClaimBound && pod.Status.Phase == corev1.PodRunning,
			fmt.Sprintf("selected node %q, pod on %q (%s), claim %s", selected, pod.Spec.NodeName, pod.Status.Phase, pvc.Status.Phase), nil
	})
	vol := &lhv1.Volume{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: pvc.Spec.VolumeName}, vol); err != nil {
		t.Fatalf("the claim's volume: %v", err)
	}
	for _, obj := range []client.Object{pod, pvc} {
		if err := c.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, t.Context(), waitTimeout, "the volume is deleted with its claim and every ledger is empty and decided", func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(vol), vol)
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("volume: %v", err), client.IgnoreNotFound(err)
		}
		return ledgersSettled(ctx, c)
	})
}

// ledgersSettled reports whether every DiskSchedule grants nothing and has
// decided its latest generation.
func ledgersSettled(ctx context.Context, c client.Client) (bool, string, error) {
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		return false, "", err
	}
	for _, ds := range list.Items {
		if len(ds.Status.Replicas) > 0 || ds.Status.StorageScheduled != 0 || ds.Status.ObservedGeneration != ds.Generation {
			return false, fmt.Sprintf("ledger %s grants %d bytes to %d replicas, observed generation %d of %d",
				ds.Name, ds.Status.StorageScheduled, len(ds.Status.Replicas), ds.Status.ObservedGeneration, ds.Generation), nil
		}
	}
	return true, "", nil
}

// testSampleWorkloads applies config/samples/workloads: the StatefulSet
// controller creates its pods and claims, the ReplicaSet controller the
// Deployment's pod, every claim is provisioned and bound to a Longhorn
// volume attached to its pod's node, and the pods run. Deleting the
// workloads and the claims removes the pods (the garbage collector), the
// volumes and their ledger entries.
func testSampleWorkloads(t *testing.T, sb *sandbox.Sandbox) {
	ctx := context.Background()
	c := sb.Client()
	objs, err := sandbox.RenderDeployment(filepath.Join(testenv.RepoRoot(), "config", "samples", "workloads"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cache"}}
	testenv.Eventually(t, t.Context(), waitTimeout, "the StatefulSet and the Deployment are ready", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
			return false, "", err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
			return false, "", err
		}
		return sts.Status.ReadyReplicas == 4 && deploy.Status.AvailableReplicas == 1,
			fmt.Sprintf("StatefulSet %d/4 ready, Deployment %d/1 available", sts.Status.ReadyReplicas, deploy.Status.AvailableReplicas), nil
	})
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace("default"), client.HasLabels{"app"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 5 {
		t.Errorf("%d pods, want the StatefulSet's 4 and the Deployment's 1", len(pods.Items))
	}
	for i := range pods.Items {
		checkPodVolumes(ctx, t, c, &pods.Items[i])
	}

	for _, o := range objs {
		if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), waitTimeout, "the pods and the volumes are gone and every ledger is empty and decided", func(ctx context.Context) (bool, string, error) {
		left := &corev1.PodList{}
		if err := c.List(ctx, left, client.InNamespace("default"), client.HasLabels{"app"}); err != nil {
			return false, "", err
		}
		vols := &lhv1.VolumeList{}
		if err := c.List(ctx, vols, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		if len(left.Items) > 0 || len(vols.Items) > 0 {
			return false, fmt.Sprintf("%d pods, %d volumes", len(left.Items), len(vols.Items)), nil
		}
		return ledgersSettled(ctx, c)
	})
}

// checkPodVolumes fails the test unless the pod runs and each of its claims
// is bound to a PersistentVolume of the Longhorn CSI driver whose volume is
// attached to the pod's node.
func checkPodVolumes(ctx context.Context, t *testing.T, c client.Client, pod *corev1.Pod) {
	t.Helper()
	if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
		t.Errorf("pod %s: phase %s on node %q", pod.Name, pod.Status.Phase, pod.Spec.NodeName)
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.PersistentVolumeClaim.ClaimName}, pvc); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			t.Fatalf("pod %s: the PersistentVolume of claim %s: %v", pod.Name, pvc.Name, err)
		}
		if pvc.Status.Phase != corev1.ClaimBound || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != simcluster.CSIDriver {
			t.Errorf("pod %s: claim %s is %s, bound to %s of %+v", pod.Name, pvc.Name, pvc.Status.Phase, pv.Name, pv.Spec.CSI)
			continue
		}
		vol := &lhv1.Volume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: pv.Spec.CSI.VolumeHandle}, vol); err != nil {
			t.Fatalf("pod %s: the volume of claim %s: %v", pod.Name, pvc.Name, err)
		}
		if vol.Status.CurrentNodeID != pod.Spec.NodeName {
			t.Errorf("pod %s on %s: volume %s attached to %q", pod.Name, pod.Spec.NodeName, vol.Name, vol.Status.CurrentNodeID)
		}
	}
}

// claimAndPod returns a claim of size of class in ns and a pod using it
// that requests the scheduler extender's resource.
func claimAndPod(ns, class string, size resource.Quantity) (*corev1.PersistentVolumeClaim, *corev1.Pod) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	one := corev1.ResourceList{simcluster.ExtendedResource: resource.MustParse("1")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox",
				Resources:    corev1.ResourceRequirements{Requests: one, Limits: one},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
			}}},
		},
	}
	return pvc, pod
}

func testManagerRBAC(t *testing.T, sb *sandbox.Sandbox) {
	ctx := context.Background()
	mc, err := client.New(sb.ManagerConfig(), client.Options{Scheme: sb.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := mc.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	user := review.Status.UserInfo
	if user.Username != sb.ManagerUser() || !strings.HasPrefix(user.Username, "system:serviceaccount:longhorn-system:") {
		t.Errorf("the manager authenticates as %q, want its ServiceAccount %q", user.Username, sb.ManagerUser())
	}
	for _, g := range user.Groups {
		if g == "system:masters" {
			t.Errorf("the manager's user is in system:masters: %v", user.Groups)
		}
	}
	for _, tt := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "update", Group: "longhorn.io", Resource: "diskschedules", Subresource: "status"}, true},
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "list", Group: "longhorn.io", Resource: "replicas"}, true},
		// Longhorn's kinds are Longhorn's: read, never written.
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "create", Group: "longhorn.io", Resource: "replicas"}, false},
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "update", Group: "longhorn.io", Resource: "replicas"}, false},
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "patch", Group: "longhorn.io", Resource: "volumes"}, false},
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "update", Group: "longhorn.io", Resource: "nodes", Subresource: "status"}, false},
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "create", Group: "longhorn.io", Resource: "settings"}, false},
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: manager.DefaultLeaderElectionID}, true},
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "longhorn-manager-upgrade-lock"}, false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Resource: "namespaces"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Resource: "pods"}, false},
		// The gate's certificate Secret is the one Secret it may read and
		// write; every other, in Longhorn's namespace (its backup-target
		// credentials) or elsewhere, stays out of reach, and it lists none.
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "update", Resource: "secrets", Name: gate.DefaultSecretName}, true},
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "get", Resource: "secrets", Name: "longhorn-backup-target-credentials"}, false},
		{authorizationv1.ResourceAttributes{Namespace: sandbox.Namespace, Verb: "list", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "get", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: gate.ConfigurationName}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "longhorn-webhook-validator"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Group: "discovery.k8s.io", Resource: "endpointslices"}, false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}, false},
		// The pod opt-in webhook's caBundle, kept by the same rotator.
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: "diskschedule-pods"}, true},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "update", Group: "coordination.k8s.io", Resource: "leases"}, false},
	} {
		ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &tt.attrs}}
		if err := mc.Create(ctx, ssar); err != nil {
			t.Fatal(err)
		}
		if ssar.Status.Allowed != tt.want {
			t.Errorf("the manager may %s %s.%s/%s in %q: %v, want %v (%s)", tt.attrs.Verb, tt.attrs.Resource, tt.attrs.Group,
				tt.attrs.Subresource, tt.attrs.Namespace, ssar.Status.Allowed, tt.want, ssar.Status.Reason)
		}
	}

	// The happy path needs nothing more: the manager leads, and every ledger
	// was decided (its status written) under the manager's identity.
	c := sb.Client()
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: manager.DefaultLeaderElectionID}, lease); err != nil {
		t.Fatalf("the manager's lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("nobody holds the manager's lease")
	}
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("%d DiskSchedules, want one per disk (2)", len(list.Items))
	}
	for _, ds := range list.Items {
		if ds.Status.ObservedGeneration != ds.Generation || !meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady) {
			t.Errorf("DiskSchedule %s is not decided: observedGeneration %d of %d, conditions %v",
				ds.Name, ds.Status.ObservedGeneration, ds.Generation, ds.Status.Conditions)
		}
	}
}

func testStop(t *testing.T, sb *sandbox.Sandbox) {
	procs, ports := sb.Processes(), sb.Ports()
	var names []string
	for _, p := range procs {
		names = append(names, p.Name)
		if !sandbox.ProcessAlive(p.PID) {
			t.Errorf("%s (pid %d) is not running before Stop", p.Name, p.PID)
		}
	}
	if got := strings.Join(names, ","); got != "etcd,kube-apiserver,kube-controller-manager,sandbox-longhorn,sandbox-csi,kube-scheduler" {
		t.Errorf("Processes() = %s, want etcd, kube-apiserver, kube-controller-manager, sandbox-longhorn, sandbox-csi and kube-scheduler", got)
	}
	if len(ports) < 5 {
		t.Errorf("Ports() = %v, want at least kube-apiserver, etcd, kube-controller-manager, metrics and kube-scheduler", ports)
	}
	for _, port := range ports {
		if sandbox.PortFree(port) {
			t.Errorf("port %d is free before Stop", port)
		}
	}
	if err := sb.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	testenv.Eventually(t, t.Context(), waitTimeout, "every process exited and every port is free", func(context.Context) (bool, string, error) {
		var left []string
		for _, p := range procs {
			if sandbox.ProcessAlive(p.PID) {
				left = append(left, fmt.Sprintf("%s (pid %d)", p.Name, p.PID))
			}
		}
		for _, port := range ports {
			if !sandbox.PortFree(port) {
				left = append(left, fmt.Sprintf("port %d", port))
			}
		}
		return len(left) == 0, strings.Join(left, ", ") + " still in use", nil
	})
	if _, err := os.Stat(sb.KubeconfigPath()); !os.IsNotExist(err) {
		t.Errorf("the kubeconfig %s is still there after Stop (%v)", sb.KubeconfigPath(), err)
	}
}

// volumeReplicas returns the live replicas of a volume.
func volumeReplicas(ctx context.Context, c client.Client, volume string) ([]lhv1.Replica, error) {
	list := &lhv1.ReplicaList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		return nil, err
	}
	var out []lhv1.Replica
	for _, r := range list.Items {
		if r.Spec.VolumeName == volume && r.DeletionTimestamp.IsZero() {
			out = append(out, r)
		}
	}
	return out, nil
}
