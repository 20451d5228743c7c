package longhorn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// TestPodRunsOnLonghornsDataPlane: in a sandbox running longhorn-manager's
// own controllers on the simulated data plane, Longhorn's node controller
// creates one InstanceManager per node, which Longhorn's instance manager
// controller finds running at its pod's IP (the node's address) and reads
// the API version of through gRPC; each Longhorn Node carries the
// conditions Longhorn's node controller writes (MountPropagation among
// them, which nothing else writes) and its disk's space as statfs reads it
// from the disk's filesystem, with the topology's UUID. A pod with a claim
// of the default class runs once Longhorn attached its volume to the pod's
// node (engine and replica running on that node's instance manager, the
// volume attached and healthy as Longhorn's controllers set it), and its
// volume is detached again when the pod goes. Expanding the claim grows
// the volume through Longhorn's API and its engine through the instance
// manager, with the ledger's grant following; an expansion no disk can hold
// is refused by Longhorn's own claim validator.
func TestPodRunsOnLonghornsDataPlane(t *testing.T) {
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: sandbox.Options{Topology: sandboxtest.Nodes(3, 400*gib)}, TailLogs: []string{"longhorn-controllers.log"}})
	c := sb.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ips := map[string]string{}
	for _, n := range sb.DataPlane().Nodes {
		ips[n.Name] = n.IP
	}
	if len(ips) != 3 {
		t.Fatalf("the data plane has %d nodes, want 3", len(ips))
	}

	testenv.Eventually(t, ctx, 2*time.Minute, "one running InstanceManager per node, at the node's address", func(ctx context.Context) (bool, string, error) {
		ims := &lhv1.InstanceManagerList{}
		if err := c.List(ctx, ims, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		running := map[string]bool{}
		for _, im := range ims.Items {
			if im.Status.CurrentState == lhv1.InstanceManagerStateRunning && im.Status.IP == ips[im.Spec.NodeID] && im.Status.APIVersion == 7 {
				running[im.Spec.NodeID] = true
			}
		}
		return len(ims.Items) == 3 && len(running) == 3, fmt.Sprintf("%d InstanceManagers, running at the node's address with API version 7 on %d nodes", len(ims.Items), len(running)), nil
	})
	testenv.Eventually(t, ctx, time.Minute, "every Longhorn Node Ready, with Longhorn's node controller's conditions and its disk read by statfs", func(ctx context.Context) (bool, string, error) {
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
			d := n.Status.DiskStatus["disk-1"]
			if d == nil || d.DiskUUID != sandbox.DiskUUID(name, "disk-1") || d.StorageMaximum != 400*gib || d.FSType != "fuseblk" {
				return false, fmt.Sprintf("node %s: disk-1 status %+v", name, d), nil
			}
		}
		return true, "", nil
	})

	pvc, pod, name := sandboxtest.RunPod(ctx, t, c, "app", "10Gi")
	if pod.Status.PodIP != ips[pod.Spec.NodeName] {
		t.Errorf("pod %s runs with IP %q, want its node's address %s", pod.Name, pod.Status.PodIP, ips[pod.Spec.NodeName])
	}
	engines := &lhv1.EngineList{}
	if err := c.List(ctx, engines, client.InNamespace(sandbox.Namespace), client.MatchingLabels{"longhornvolume": name}); err != nil {
		t.Fatal(err)
	}
	if len(engines.Items) != 1 || engines.Items[0].Status.CurrentState != lhv1.InstanceStateRunning || engines.Items[0].Status.IP != ips[pod.Spec.NodeName] {
		t.Errorf("want one running engine at %s for volume %s, got %+v", ips[pod.Spec.NodeName], name, engines.Items)
	}

	// Expansion through the claim: Longhorn's API (VolumeManager.Expand)
	// grows the volume, its engine expands through the instance manager's
	// proxy, the ledger grants the replica the new size, and the claim
	// gets its capacity.
	if _, err := sandboxtest.SetClaimRequest(ctx, c, pvc, "20Gi"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, ctx, 2*time.Minute, "the claim expanded to 20Gi, its replica granted 20Gi by the ledger", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		replicas := &lhv1.ReplicaList{}
		if err := c.List(ctx, replicas, client.InNamespace(sandbox.Namespace), client.MatchingLabels{"longhornvolume": name}); err != nil {
			return false, "", err
		}
		granted := int64(0)
		for _, r := range replicas.Items {
			ds := &dsv1.DiskSchedule{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: r.Spec.DiskID}, ds); err != nil {
				return false, err.Error(), nil
			}
			granted = ds.Status.Replicas[r.Name].ScheduledSize
		}
		capacity := pvc.Status.Capacity[corev1.ResourceStorage]
		return capacity.Value() == 20*gib && len(replicas.Items) == 1 && granted == 20*gib,
			fmt.Sprintf("claim capacity %s, %d replicas, granted %d bytes", capacity.String(), len(replicas.Items), granted), nil
	})
	// An expansion no disk can hold is refused by Longhorn's own PVC
	// validator, with its own words, before any Longhorn object changes.
	if _, err := sandboxtest.SetClaimRequest(ctx, c, pvc, "500Gi"); err == nil || !strings.Contains(err.Error(), "does not have sufficient physical space") {
		t.Errorf("expanding the claim to 500Gi on a 400Gi disk: got %v, want Longhorn's validator's refusal for physical space", err)
	}

	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, ctx, 2*time.Minute, "the volume detached once its pod is gone", func(ctx context.Context) (bool, string, error) {
		vol := &lhv1.Volume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: name}, vol); err != nil {
			return false, "", err
		}
		return vol.Status.State == lhv1.VolumeStateDetached, fmt.Sprintf("volume %s on %q", vol.Status.State, vol.Status.CurrentNodeID), nil
	})
}

// conditionTrue reports whether conds has typ with status True.
func conditionTrue(conds []lhv1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == lhv1.ConditionStatusTrue
		}
	}
	return false
}
