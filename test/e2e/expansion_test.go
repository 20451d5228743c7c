package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/sandbox"
	"github.com/longhorn/diskschedule/internal/simlonghorn"
	"github.com/longhorn/diskschedule/internal/testenv"
)

// quietWindow is how long the refused expansion must stay untried once the
// claim is marked infeasible. The simulated resizer used to retry a refused
// expansion with controller-runtime's default per-item backoff, 5 ms
// doubling with every failure: it was at its 9th retry 2.56 s after the
// first refusal and at its 10th 5.12 s after it, its gap by then 2.56 s.
// The claim is marked infeasible right at the first refusal, so two of
// those periods at the 10th retry (2 × 5.12 s) cover, with room for a slow
// machine, at least two more retries the former resizer would have made
// (ten in all from the first refusal); the real external resizer, whose
// backoff starts at 1 s and doubles, would have retried three times.
const quietWindow = 2 * 5120 * time.Millisecond

// TestExpansion expands a claim beyond what its replica's disk can take,
// through the PVC with the real gate: the gate refuses the volume's growth
// in the words Longhorn's CSI driver maps to OutOfRange, so the claim
// reports its resize infeasible (ControllerResizeInfeasible, the
// ControllerResizeError condition and a Warning Event VolumeResizeFailed,
// with the ledger's numbers), the resizer stops asking, and lowering the
// request to a size that fits, as Kubernetes allows once an expansion
// failed, expands the claim to it.
func TestExpansion(t *testing.T) {
	var metricsAddr string
	cl := startSandbox(t, "topology.yaml", func(o *sandbox.Options) {
		o.Managers = []sandbox.ManagerHook{func(opts *manager.Options, _ *rest.Config) {
			metricsAddr = opts.MetricsBindAddress
		}}
	})
	defer cl.dumpLedgers(t)
	ctx := context.Background()
	c := cl.c
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "expansion"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}

	// A 10Gi claim of one replica without data locality, which Longhorn
	// places on a 400Gi disk at once, attached or not.
	class := sandbox.StorageClass()
	class.Name, class.Annotations = "expansion", nil
	class.Parameters[simlonghorn.ParamDataLocality] = string(lhv1.DataLocalityDisabled)
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class.Name),
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
		if err := c.List(ctx, reps, client.InNamespace(sandbox.Namespace), client.MatchingLabels{simlonghorn.LabelVolume: pvc.Spec.VolumeName}); err != nil {
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
		return st.State == dsv1.RequestStateScheduled && st.ScheduledSize == 10<<30, fmt.Sprintf("ledger entry %+v", st), nil
	}, testenv.Every(200*time.Millisecond), testenv.RetryErrors())
	volKey := client.ObjectKey{Namespace: sandbox.Namespace, Name: pvc.Spec.VolumeName}
	t.Logf("replica %s on disk %s", rep.Name, rep.Spec.DiskID)

	// Beyond capacity: 2Ti on a 400Gi disk.
	huge := resource.MustParse("2Ti")
	testenv.SetClaimRequest(t, c, pvc, huge)
	var infeasibleAt time.Time
	testenv.Eventually(t, ctx, time.Minute, "the claim reports its resize infeasible", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		infeasibleAt = time.Now()
		return pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible,
			fmt.Sprintf("allocatedResourceStatuses %v, conditions %+v", pvc.Status.AllocatedResourceStatuses, pvc.Status.Conditions), nil
	}, testenv.Every(200*time.Millisecond), testenv.RetryErrors())
	ds := &dsv1.DiskSchedule{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: rep.Spec.DiskID}, ds); err != nil {
		t.Fatal(err)
	}
	// The ledger's numbers: the bytes short and the disk, as Longhorn says
	// it, then the replica's ask and the disk's limit.
	limit := ptr.Deref(ds.Status.Limit, resource.Quantity{})
	numbers := []string{
		fmt.Sprintf("failed to schedule %d more bytes to disk %s", huge.Value()-10<<30, rep.Spec.DiskID),
		fmt.Sprintf("replica %s needs 2Ti on disk %s of node %s", rep.Name, ds.Spec.Name, ds.Spec.NodeID),
		"free of limit " + limit.String(),
	}
	if allocated := pvc.Status.AllocatedResources[corev1.ResourceStorage]; allocated.Cmp(huge) != 0 {
		t.Errorf("allocatedResources %s, want 2Ti", allocated.String())
	}
	cond := claimCondition(pvc, corev1.PersistentVolumeClaimControllerResizeError)
	if cond == nil || cond.Status != corev1.ConditionTrue || !strings.Contains(cond.Message, "code = OutOfRange") {
		t.Errorf("ControllerResizeError condition %+v, want True with OutOfRange", cond)
	} else {
		for _, n := range numbers {
			if !strings.Contains(cond.Message, n) {
				t.Errorf("the ControllerResizeError condition %q does not say %q", cond.Message, n)
			}
		}
	}
	var note string
	testenv.Eventually(t, ctx, 30*time.Second, "a Warning Event VolumeResizeFailed on the claim", func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := c.List(ctx, list, client.InNamespace(ns.Name)); err != nil {
			return false, "", err
		}
		for _, e := range list.Items {
			if e.Regarding.UID == pvc.UID && e.Reason == simlonghorn.EventReasonVolumeResizeFailed && e.Type == corev1.EventTypeWarning {
				note = e.Note
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items)), nil
	}, testenv.Every(200*time.Millisecond), testenv.RetryErrors())
	t.Logf("the claim's Event: %s", note)
	for _, n := range numbers {
		if !strings.Contains(note, n) {
			t.Errorf("the Event %q does not say %q", note, n)
		}
	}

	// The resizer stops: the gate refuses no further growth of the volume
	// for two of the former resizer's backoff periods (quietWindow).
	denied, err := gateDenials(ctx, metricsAddr, "volume")
	if err != nil {
		t.Fatal(err)
	}
	if denied < 1 {
		t.Errorf("the gate counts %v refused volume writes, want at least the one", denied)
	}
	// A bounded observation: nothing may happen until quietWindow after
	// the claim was marked infeasible, so the test watches the count over
	// that whole window and fails at the first refusal more.
	testenv.Consistently(t, ctx, time.Until(infeasibleAt.Add(quietWindow)), "the resizer asks no more", func(ctx context.Context) (bool, string, error) {
		after, err := gateDenials(ctx, metricsAddr, "volume")
		if err != nil {
			return false, "", err
		}
		return after == denied, fmt.Sprintf("%v refused volume writes, %v when the claim was marked infeasible", after, denied), nil
	}, testenv.Every(500*time.Millisecond))
	t.Logf("refused volume writes: %v when the claim was infeasible, and no more within %s", denied, quietWindow)
	vol := &lhv1.Volume{}
	if err := c.Get(ctx, volKey, vol); err != nil || vol.Spec.Size != 10<<30 {
		t.Errorf("volume size %d (%v), want 10Gi", vol.Spec.Size, err)
	}

	// Recovery, as Kubernetes allows it: the request may go down again,
	// but not to the capacity itself...
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return err
		}
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("10Gi")
		return c.Update(ctx, pvc)
	})
	if !apierrors.IsInvalid(err) {
		t.Errorf("lowering the request back to the capacity: %v, want Invalid (not less than status.capacity)", err)
	}
	// ...only above it: 20Gi fits, and the claim is expanded to it.
	fits := resource.MustParse("20Gi")
	testenv.SetClaimRequest(t, c, pvc, fits)
	testenv.Eventually(t, ctx, time.Minute, "the claim is expanded to 20Gi", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		if err := c.Get(ctx, volKey, vol); err != nil {
			return false, "", err
		}
		capacity := pvc.Status.Capacity[corev1.ResourceStorage]
		return capacity.Cmp(fits) == 0 && vol.Spec.Size == fits.Value() && len(pvc.Status.AllocatedResourceStatuses) == 0,
			fmt.Sprintf("claim capacity %s, volume %d, allocatedResourceStatuses %v", capacity.String(), vol.Spec.Size, pvc.Status.AllocatedResourceStatuses), nil
	}, testenv.Every(200*time.Millisecond), testenv.RetryErrors())
	if c := claimCondition(pvc, corev1.PersistentVolumeClaimControllerResizeError); c != nil {
		t.Errorf("the expanded claim keeps %+v", c)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: rep.Spec.DiskID}, ds); err != nil {
		t.Fatal(err)
	}
	if st := ds.Status.Replicas[rep.Name]; st.State != dsv1.RequestStateScheduled || st.ScheduledSize != fits.Value() {
		t.Errorf("ledger entry of %s: %+v, want 20Gi scheduled", rep.Name, st)
	}
}

// claimCondition returns the claim's condition typ, or nil.
func claimCondition(pvc *corev1.PersistentVolumeClaim, typ corev1.PersistentVolumeClaimConditionType) *corev1.PersistentVolumeClaimCondition {
	for i := range pvc.Status.Conditions {
		if pvc.Status.Conditions[i].Type == typ {
			return &pvc.Status.Conditions[i]
		}
	}
	return nil
}

// gateDenials reads how many writes of kind the gate denied from the
// manager's metrics at addr.
func gateDenials(ctx context.Context, addr, kind string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the metrics: %w", err)
	}
	defer resp.Body.Close()
	sample := fmt.Sprintf(`longhorn_diskschedule_gate_decisions_total{kind=%q,result="denied"} `, kind)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, sc.Err()
}
