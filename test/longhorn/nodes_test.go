package longhorn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/replicawriter"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// TestNodesOnLonghornsNodeController: in a sandbox whose Longhorn runs the
// nodes only (LonghornNodesOnly) on longhorn-manager's own controllers,
// Longhorn's node, instance manager and Kubernetes node controllers run and
// nothing else of Longhorn's control plane: one InstanceManager per node
// running at the node's address, each Longhorn Node Ready and Schedulable
// with the conditions Longhorn's node controller writes (MountPropagation
// among them) and its disks read by statfs, two disks of one node each a
// filesystem of its own. Replicas placed by a test's own
// writer (Longhorn's scheduler and datastore, test/framework/testenv/
// replicawriter) are counted in their disks' storageScheduled and
// scheduledReplica by Longhorn's node controller, while no Longhorn
// controller acts on them or their volumes: no Engine exists, no volume or
// replica has an owner, and each replica stays as the writer left it.
func TestNodesOnLonghornsNodeController(t *testing.T) {
	var progress testenv.LockedBuffer
	// node-1 has a second disk, a filesystem of its own beside the first,
	// reserved whole so that no replica goes there.
	topo := sandboxtest.Nodes(3, 400*gib)
	topo.Nodes[0].Disks = append(topo.Nodes[0].Disks, sandbox.Disk{Name: "disk-2", Size: 100 * gib, Reserved: 100 * gib})
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: sandbox.Options{
		Topology: topo, LonghornNodesOnly: true, Out: &progress,
	}, TailLogs: []string{"longhorn-controllers.log"}})
	if p := progress.String(); !strings.Contains(p, "running longhorn-node, longhorn-instance-manager, longhorn-kubernetes-node\n") {
		t.Errorf("the sandbox's progress does not say that Longhorn's node controllers alone run:\n%s", p)
	}
	c := sb.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ips := map[string]string{}
	for _, n := range sb.DataPlane().Nodes {
		ips[n.Name] = n.IP
	}
	testenv.Eventually(t, ctx, 2*time.Minute, "one running InstanceManager per node, at the node's address", func(ctx context.Context) (bool, string, error) {
		ims := &lhv1.InstanceManagerList{}
		if err := c.List(ctx, ims, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		running := map[string]bool{}
		for _, im := range ims.Items {
			if im.Status.CurrentState == lhv1.InstanceManagerStateRunning && im.Status.IP == ips[im.Spec.NodeID] {
				running[im.Spec.NodeID] = true
			}
		}
		return len(ims.Items) == 3 && len(running) == 3, fmt.Sprintf("%d InstanceManagers, running at the node's address on %d nodes", len(ims.Items), len(running)), nil
	})
	testenv.Eventually(t, ctx, time.Minute, "every Longhorn Node Ready and Schedulable, with Longhorn's node controller's conditions and its disk read by statfs", func(ctx context.Context) (bool, string, error) {
		for name := range ips {
			n := &lhv1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: name}, n); err != nil {
				return false, "", err
			}
			for _, typ := range []string{lhv1.NodeConditionTypeReady, lhv1.NodeConditionTypeSchedulable, lhv1.NodeConditionTypeMountPropagation} {
				if !conditionTrue(n.Status.Conditions, typ) {
					return false, fmt.Sprintf("node %s: %s not True: %+v", name, typ, n.Status.Conditions), nil
				}
			}
			// Nothing is held on the disk: its disk config (one page) is
			// all statfs counts as used, and Longhorn's node controller
			// rounds what is available down to 100 MiB.
			d := n.Status.DiskStatus["disk-1"]
			if d == nil || d.DiskUUID != sandbox.DiskUUID(name, "disk-1") || d.StorageMaximum != 400*gib || d.StorageAvailable != 400*gib-100<<20 ||
				d.FSType != "fuseblk" || !conditionTrue(d.Conditions, lhv1.DiskConditionTypeReady) || !conditionTrue(d.Conditions, lhv1.DiskConditionTypeSchedulable) {
				return false, fmt.Sprintf("node %s: disk-1 status %+v", name, d), nil
			}
		}
		n := &lhv1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: "node-1"}, n); err != nil {
			return false, "", err
		}
		if d := n.Status.DiskStatus["disk-2"]; d == nil || d.DiskUUID != sandbox.DiskUUID("node-1", "disk-2") || d.StorageMaximum != 100*gib ||
			!conditionTrue(d.Conditions, lhv1.DiskConditionTypeReady) {
			return false, fmt.Sprintf("node node-1: disk-2 status %+v", d), nil
		}
		return true, "", nil
	})

	// The test's writer places replicas as Longhorn's volume controller
	// would: Longhorn's scheduler over its own datastore, and the
	// datastore's UpdateReplica.
	pods, err := replicawriter.StartPods(ctx, sb.AdminConfig(), sandbox.Namespace, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	placed := map[string]replicawriter.Outcome{}
	versions := map[string]string{}
	for i := range 4 {
		rep, err := replicawriter.CreateVolume(ctx, c, sandbox.Namespace, fmt.Sprintf("nodes-%d", i), 10*gib)
		if err != nil {
			t.Fatal(err)
		}
		vr := map[string][]string{rep.Spec.VolumeName: {rep.Name}}
		if err := pods[0].WaitForVolumes(ctx, vr); err != nil {
			t.Fatal(err)
		}
		out, err := pods[0].Place(ctx, rep.Spec.VolumeName, rep.Name, replicawriter.Options{Live: c, Resync: replicawriter.LonghornResync})
		if err != nil {
			t.Fatal(err)
		}
		if !out.Placed {
			t.Fatalf("replica %s not placed: %+v", rep.Name, out)
		}
		placed[rep.Name] = out
		r := &lhv1.Replica{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: rep.Name}, r); err != nil {
			t.Fatal(err)
		}
		versions[rep.Name] = r.ResourceVersion
	}

	testenv.Eventually(t, ctx, time.Minute, "Longhorn's node controller counts every placed replica on its disk", func(ctx context.Context) (bool, string, error) {
		want := map[string]map[string]int64{}
		for name, out := range placed {
			if want[out.NodeID] == nil {
				want[out.NodeID] = map[string]int64{}
			}
			want[out.NodeID][name] = 10 * gib
		}
		for name := range ips {
			n := &lhv1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: name}, n); err != nil {
				return false, "", err
			}
			d := n.Status.DiskStatus["disk-1"]
			total := int64(0)
			for _, size := range want[name] {
				total += size
			}
			if d == nil || d.StorageScheduled != total || len(d.ScheduledReplica) != len(want[name]) {
				return false, fmt.Sprintf("node %s: disk-1 storageScheduled %v, scheduledReplica %v; want %d bytes of %v", name, d.StorageScheduled, d.ScheduledReplica, total, want[name]), nil
			}
			for r, size := range want[name] {
				if d.ScheduledReplica[r] != size {
					return false, fmt.Sprintf("node %s: disk-1 scheduledReplica %v, want %v", name, d.ScheduledReplica, want[name]), nil
				}
			}
		}
		return true, "", nil
	})

	// Nothing of Longhorn's acted on the volumes and replicas: Longhorn's
	// node controller counted the replicas above from the same reads in
	// which it would have rewritten them.
	engines := &lhv1.EngineList{}
	if err := c.List(ctx, engines, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(engines.Items) != 0 {
		t.Errorf("%d Engines exist; no volume controller should have created one", len(engines.Items))
	}
	for name, out := range placed {
		r := &lhv1.Replica{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: name}, r); err != nil {
			t.Fatal(err)
		}
		if r.ResourceVersion != versions[name] || r.Spec.NodeID != out.NodeID || r.Spec.DiskID != out.DiskID ||
			r.Spec.EvictionRequested || r.Status.OwnerID != "" || r.Status.CurrentState != "" {
			t.Errorf("replica %s changed after its writer placed it on %s/%s (resourceVersion %s, then %s): spec %+v, status %+v",
				name, out.NodeID, out.DiskID, versions[name], r.ResourceVersion, r.Spec, r.Status)
		}
		vol := &lhv1.Volume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: r.Spec.VolumeName}, vol); err != nil {
			t.Fatal(err)
		}
		if vol.Status.OwnerID != "" || vol.Status.State != "" {
			t.Errorf("volume %s has owner %q and state %q; no volume controller should own it", vol.Name, vol.Status.OwnerID, vol.Status.State)
		}
	}
}
