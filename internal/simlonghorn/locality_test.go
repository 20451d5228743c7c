package simlonghorn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/simlonghorn"
	"github.com/longhorn/diskschedule/internal/testenv"
)

// TestBestEffortLocality follows a best-effort volume of one replica as its
// pod moves: placed on the pod's node once attached; on a move, a local
// replica is added where a disk can take it and the remote one removed once
// the local one runs; on a node whose disk cannot take it, no local replica
// is created and the pod runs on the remote replica.
func TestBestEffortLocality(t *testing.T) {
	ns := env.NewNamespace(t)
	n1, n2, n3 := nodeName(ns, "n1"), nodeName(ns, "n2"), nodeName(ns, "n3")
	startSim(t, simlonghorn.Options{Namespace: ns, PlaceReplicas: true, Nodes: []simlonghorn.NodeSpec{
		{Name: n1, Disks: []simlonghorn.DiskSpec{disk("disk-1", 100)}},
		{Name: n2, Disks: []simlonghorn.DiskSpec{disk("disk-1", 100)}},
		{Name: n3, Disks: []simlonghorn.DiskSpec{disk("disk-1", 10)}},
	}})
	nodesReady(t, ns, n1, n2, n3)
	class := createClass(t, ns, map[string]string{
		simlonghorn.ParamNumberOfReplicas: "1", simlonghorn.ParamDataLocality: string(lhv1.DataLocalityBestEffort),
	})
	pvc, volName := createClaim(t, ns, "data", class, 20)
	ctx := context.Background()

	// Not attached: the replica waits, unscheduled, and the volume counts as
	// scheduled, as Longhorn reports it.
	testenv.Eventually(t, t.Context(), 10*time.Second, "replica waiting for attachment", func(ctx context.Context) (bool, string, error) {
		rs, err := replicasOf(ctx, ns, volName)
		if err != nil || len(rs) != 1 {
			return false, fmt.Sprintf("%d replicas (%v)", len(rs), err), nil
		}
		v, err := getVolume(ctx, ns, volName)
		if err != nil {
			return false, err.Error(), nil
		}
		return rs[0].Spec.NodeID == "" && condTrue(v.Status.Conditions, lhv1.VolumeConditionTypeScheduled),
			fmt.Sprintf("replica on %q, volume %+v", rs[0].Spec.NodeID, v.Status.Conditions), nil
	})

	// Attached to n2: the replica goes there.
	pod := createPod(t, ns, "app-1", n2, pvc.Name)
	podRunning(t, pod)
	replicaNodes(t, ns, volName, n2)

	// The pod moves to n1: a local replica there, then the remote one goes.
	movePod(t, pod, ns, "app-2", n1, pvc.Name)
	replicaNodes(t, ns, volName, n1)

	// The pod moves to n3, whose 10Gi disk cannot take the 20Gi replica:
	// Longhorn's precheck finds no disk, so no local replica is created and
	// the pod runs on the replica on n1.
	pod2 := &corev1.Pod{}
	pod2.Namespace, pod2.Name = ns, "app-2"
	movePod(t, pod2, ns, "app-3", n3, pvc.Name)
	testenv.Eventually(t, t.Context(), 10*time.Second, "attached to n3", func(ctx context.Context) (bool, string, error) {
		v, err := getVolume(ctx, ns, volName)
		if err != nil {
			return false, err.Error(), nil
		}
		return v.Status.CurrentNodeID == n3 && v.Status.State == lhv1.VolumeStateAttached, fmt.Sprintf("%+v", v.Status), nil
	})
	// The volume controller reports that Longhorn's precheck found no disk.
	testenv.Eventually(t, t.Context(), 20*time.Second, "local replica skipped", func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err.Error(), nil
		}
		for _, e := range list.Items {
			if e.Regarding.Name == volName && e.Reason == simlonghorn.EventReasonLocalReplicaSkipped && strings.Contains(e.Note, n3) {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events, none for the skipped local replica", len(list.Items)), nil
	})
	rs, err := replicasOf(ctx, ns, volName)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Spec.NodeID != n1 {
		t.Errorf("replicas on a node without room = %v, want only the one on %s", rs, n1)
	}
	v, err := getVolume(ctx, ns, volName)
	if err != nil {
		t.Fatal(err)
	}
	if !condTrue(v.Status.Conditions, lhv1.VolumeConditionTypeScheduled) {
		t.Errorf("volume not scheduled: %+v", v.Status.Conditions)
	}
}

// movePod deletes pod and creates a new one on node using the claim, then
// waits until it runs.
func movePod(t *testing.T, pod *corev1.Pod, ns, name, node, claim string) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), pod); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	podRunning(t, createPod(t, ns, name, node, claim))
}

// replicaNodes waits until the volume has exactly one replica, running on
// node, and is attached there.
func replicaNodes(t *testing.T, ns, volume, node string) {
	t.Helper()
	testenv.Eventually(t, t.Context(), 30*time.Second, "only replica running on "+node, func(ctx context.Context) (bool, string, error) {
		rs, err := replicasOf(ctx, ns, volume)
		if err != nil {
			return false, err.Error(), nil
		}
		var where []string
		for _, r := range rs {
			where = append(where, fmt.Sprintf("%s on %q (%s)", r.Name, r.Spec.NodeID, r.Status.CurrentState))
		}
		ok := len(rs) == 1 && rs[0].Spec.NodeID == node && rs[0].Status.CurrentState == lhv1.InstanceStateRunning
		return ok, fmt.Sprintf("%v", where), nil
	})
}

// TestStrictLocal checks a strict-local volume: its replica waits for the
// attachment, then is pinned to the attached node and placed there.
func TestStrictLocal(t *testing.T) {
	ns := env.NewNamespace(t)
	n1, n2 := nodeName(ns, "n1"), nodeName(ns, "n2")
	startSim(t, simlonghorn.Options{Namespace: ns, PlaceReplicas: true, Nodes: []simlonghorn.NodeSpec{
		{Name: n1, Disks: []simlonghorn.DiskSpec{disk("disk-1", 200)}},
		{Name: n2, Disks: []simlonghorn.DiskSpec{disk("disk-1", 100)}},
	}})
	nodesReady(t, ns, n1, n2)
	class := createClass(t, ns, map[string]string{
		simlonghorn.ParamNumberOfReplicas: "1", simlonghorn.ParamDataLocality: string(lhv1.DataLocalityStrictLocal),
	})
	pvc, volName := createClaim(t, ns, "data", class, 20)
	podRunning(t, createPod(t, ns, "app", n2, pvc.Name))
	replicaNodes(t, ns, volName, n2)
	rs, err := replicasOf(context.Background(), ns, volName)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Spec.HardNodeAffinity != n2 {
		t.Errorf("strict-local replica's hardNodeAffinity = %q, want %s", rs[0].Spec.HardNodeAffinity, n2)
	}
}
