package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// TestExpansionOnADiskThatTakesNoNewReplicas grows, through their claims
// and with the real gate, a volume whose replica is on a cordoned node and
// one whose replica is on a node with allowScheduling=false: the disks take
// no new replicas (their ledgers are not Ready), but growth of what is
// placed there is judged on space alone, as Longhorn judges an expansion
// (rule 8), so both claims are expanded.
func TestExpansionOnADiskThatTakesNoNewReplicas(t *testing.T) {
	t.Parallel()
	cl := startSandbox(t, "topology.yaml")
	defer cl.dumpLedgers(t)
	ctx := context.Background()
	c := cl.c
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "closed-disk"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	class := sandbox.StorageClass()
	class.Name, class.Annotations = "closed-disk", nil
	class.Parameters[simcluster.ParamDataLocality] = string(lhv1.DataLocalityDisabled)
	class.Parameters[simcluster.ParamNumberOfReplicas] = "1"
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		close  func(node string) error
		reason string
	}{
		{name: "cordoned", reason: dsv1.DiskScheduleReasonNodeUnschedulable, close: func(node string) error {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
			return c.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`)))
		}},
		{name: "scheduling-disabled", reason: dsv1.DiskScheduleReasonNodeSchedulingDisabled, close: func(node string) error {
			// The operator turns scheduling off on Longhorn's node.
			n := &lhv1.Node{ObjectMeta: metav1.ObjectMeta{Namespace: sandbox.Namespace, Name: node}}
			return c.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"allowScheduling":false}}`)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc, rep := claimWithGrantedReplica(t, ctx, c, ns.Name, tc.name, class.Name)

			if err := tc.close(rep.Spec.NodeID); err != nil {
				t.Fatalf("closing node %s: %v", rep.Spec.NodeID, err)
			}
			testenv.WaitLedger(t, ctx, c, sandbox.Namespace, rep.Spec.DiskID, time.Minute, "the disk takes no new replicas", func(ds *dsv1.DiskSchedule) bool {
				cond := meta.FindStatusCondition(ds.Status.Conditions, dsv1.DiskScheduleConditionReady)
				return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == tc.reason
			}, testenv.Every(200*time.Millisecond))

			grown := resource.MustParse("20Gi")
			testenv.SetClaimRequest(t, c, pvc, grown)
			vol := &lhv1.Volume{}
			testenv.Eventually(t, ctx, time.Minute, "the claim is expanded to 20Gi", func(ctx context.Context) (bool, string, error) {
				if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
					return false, "", err
				}
				if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: pvc.Spec.VolumeName}, vol); err != nil {
					return false, "", err
				}
				capacity := pvc.Status.Capacity[corev1.ResourceStorage]
				return capacity.Cmp(grown) == 0 && vol.Spec.Size == grown.Value(),
					fmt.Sprintf("claim capacity %s, volume %d, conditions %+v", capacity.String(), vol.Spec.Size, pvc.Status.Conditions), nil
			}, testenv.Every(200*time.Millisecond), testenv.RetryErrors())
			testenv.WaitLedger(t, ctx, c, sandbox.Namespace, rep.Spec.DiskID, time.Minute, "the replica granted at 20Gi", func(ds *dsv1.DiskSchedule) bool {
				st := ds.Status.Replicas[rep.Name]
				return st.State == dsv1.RequestStateScheduled && st.ScheduledSize == grown.Value()
			}, testenv.Every(200*time.Millisecond))
		})
	}
}
