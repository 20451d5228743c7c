package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// claimWithGrantedReplica creates a 10Gi ReadWriteOnce claim of class and
// waits until it is bound, its volume's one replica is placed on a disk
// and granted there by the disk's ledger at 10Gi, and Longhorn reports the
// volume detached; it returns the claim and the replica. A new volume goes
// from creating through detaching to detached (longhorn-manager v1.12.0
// controller/volume_controller.go, reconcileAttachDetachStateMachine, lines
// 2049-2064), and Longhorn's CSI driver expands only a volume detached or
// attached (csi/controller_server.go, ControllerExpandVolume, line 1375).
func claimWithGrantedReplica(t *testing.T, ctx context.Context, c client.Client, namespace, name, class string) (*corev1.PersistentVolumeClaim, lhv1.Replica) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	var rep lhv1.Replica
	testenv.Eventually(t, ctx, time.Minute, "the claim is bound and its replica granted on a disk", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return false, "claim " + string(pvc.Status.Phase), nil
		}
		reps := &lhv1.ReplicaList{}
		if err := c.List(ctx, reps, client.InNamespace(sandbox.Namespace), client.MatchingLabels{simcluster.LabelVolume: pvc.Spec.VolumeName}); err != nil {
			return false, "", err
		}
		if len(reps.Items) != 1 || reps.Items[0].Spec.DiskID == "" {
			return false, fmt.Sprintf("%d replicas", len(reps.Items)), nil
		}
		rep = reps.Items[0]
		ds := &dsv1.DiskSchedule{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: rep.Spec.DiskID}, ds); err != nil {
			return false, "", err
		}
		st := ds.Status.Replicas[rep.Name]
		if st.State != dsv1.RequestStateScheduled || st.ScheduledSize != 10<<30 {
			return false, fmt.Sprintf("ledger entry %+v", st), nil
		}
		vol := &lhv1.Volume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: pvc.Spec.VolumeName}, vol); err != nil {
			return false, "", err
		}
		return vol.Status.State == lhv1.VolumeStateDetached, fmt.Sprintf("volume %q", vol.Status.State), nil
	}, testenv.Every(200*time.Millisecond), testenv.RetryErrors())
	return pvc, rep
}
