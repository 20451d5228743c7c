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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/conditions"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// expansionGrace is the manager's --gate-grace in TestExpansion: how long
// the ledger holds a grant that no write of Longhorn's backs (rule 10)
// before the mirror releases it. The racing placement the test writes is
// such a grant, so it ends by itself this long after it was decided.
const expansionGrace = 10 * time.Second

// TestExpansion expands a claim through its PVC with the sandbox's CSI
// external resizer, which calls Longhorn's own CSI ControllerExpandVolume,
// which grows the volume through Longhorn's API (Longhorn's expansion
// check, then the volume's update, where the real gate decides):
//
//   - A refusal that ends by itself: a racing placement holds a grant on
//     the replica's disk that no Longhorn write backs yet (a request of
//     another longhorn-manager, decided, its Replica not written). Longhorn's
//     own check passes (its view of the disk does not count the grant), the
//     gate refuses the growth in words CSI answers Internal, the claim is
//     never marked infeasible, and once the mirror releases the grant the
//     resizer's own retries expand the claim.
//   - An expansion beyond the disk: Longhorn's own claim validator refuses
//     the claim's update, in its words ("disk … does not have sufficient
//     physical space for expansion") with its numbers, before the resizer
//     or the gate sees it; the claim keeps its size and is not marked
//     infeasible, and the gate receives no call for it.
func TestExpansion(t *testing.T) {
	t.Parallel()
	var metricsAddr string
	cl := startSandbox(t, "topology.yaml", func(o *sandbox.Options) {
		o.Managers = []sandbox.ManagerHook{func(opts *manager.Options, _ *rest.Config) {
			metricsAddr = opts.MetricsBindAddress
			opts.GateGrace = expansionGrace
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
	class.Parameters[simcluster.ParamDataLocality] = string(lhv1.DataLocalityDisabled)
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	pvc, rep := claimWithGrantedReplica(t, ctx, c, ns.Name, "data", class.Name)
	volKey := client.ObjectKey{Namespace: sandbox.Namespace, Name: pvc.Spec.VolumeName}
	dsKey := client.ObjectKey{Namespace: sandbox.Namespace, Name: rep.Spec.DiskID}
	t.Logf("replica %s on disk %s", rep.Name, rep.Spec.DiskID)

	// A racing placement: another longhorn-manager's request for a 385Gi
	// replica on the same disk, granted (10Gi + 385Gi of the 400Gi limit, 5Gi left),
	// its Replica not written. Longhorn's view of the disk does not count
	// it; the ledger holds it until the mirror releases it, expansionGrace
	// after its grant.
	const racer = "pvc-racing-placement-r-0f1e2d3c"
	ds := &dsv1.DiskSchedule{}
	if err := c.Get(ctx, dsKey, ds); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, ds, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":{%q:%d}}}`, racer, int64(385)<<30)))); err != nil {
		t.Fatal(err)
	}
	var grantedAt time.Time
	testenv.Eventually(t, ctx, 30*time.Second, "the racing placement is granted", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, dsKey, ds); err != nil {
			return false, "", err
		}
		grantedAt = time.Now()
		st := ds.Status.Replicas[racer]
		return st.State == dsv1.RequestStateScheduled, fmt.Sprintf("%+v", st), nil
	}, testenv.Every(100*time.Millisecond), testenv.RetryErrors())

	// The claim asks for 20Gi: Longhorn's own check passes, the gate
	// refuses, and CSI answers Internal, which the resizer retries.
	grown := resource.MustParse("20Gi")
	testenv.SetClaimRequest(t, c, pvc, grown)
	notInfeasible := func() error {
		if pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible {
			return fmt.Errorf("the claim was marked ControllerResizeInfeasible: %+v", pvc.Status.Conditions)
		}
		return nil
	}
	var refusal string
	testenv.Eventually(t, ctx, 30*time.Second, "the gate refuses the growth as one to retry", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		if err := notInfeasible(); err != nil {
			return false, "", err
		}
		cond := conditions.Claim(pvc, corev1.PersistentVolumeClaimControllerResizeError)
		if cond == nil {
			return false, fmt.Sprintf("conditions %+v", pvc.Status.Conditions), nil
		}
		refusal = cond.Message
		return true, "", nil
	}, testenv.Every(100*time.Millisecond), testenv.RetryErrors())
	refusedAt := time.Now()
	t.Logf("refused %s after the racing grant: %s", refusedAt.Sub(grantedAt).Round(time.Millisecond), refusal)
	for _, want := range []string{
		"code = Internal",
		fmt.Sprintf("volume %s grows from 10Gi to 20Gi", pvc.Spec.VolumeName),
		fmt.Sprintf("disk %s can hold it once space held beyond what Longhorn persisted there is released: retry", rep.Spec.DiskID),
	} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the ControllerResizeError condition %q does not say %q", refusal, want)
		}
	}
	if strings.Contains(refusal, "failed to schedule") {
		t.Errorf("a refusal that ends by itself is worded as one CSI answers OutOfRange: %q", refusal)
	}

	// The grant ends by itself (the mirror releases it), and the resizer's
	// own retries expand the claim; it is never marked infeasible.
	vol := &lhv1.Volume{}
	testenv.Eventually(t, ctx, expansionGrace+time.Minute, "the claim is expanded to 20Gi once the racing grant ends", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		if err := notInfeasible(); err != nil {
			return false, "", err
		}
		if err := c.Get(ctx, volKey, vol); err != nil {
			return false, "", err
		}
		capacity := pvc.Status.Capacity[corev1.ResourceStorage]
		return capacity.Cmp(grown) == 0 && vol.Spec.Size == grown.Value() && len(pvc.Status.AllocatedResourceStatuses) == 0,
			fmt.Sprintf("claim capacity %s, volume %d, allocatedResourceStatuses %v", capacity.String(), vol.Spec.Size, pvc.Status.AllocatedResourceStatuses), nil
	}, testenv.Every(200*time.Millisecond), testenv.RetryErrors())
	t.Logf("expanded %s after the refusal, %s after the racing grant", time.Since(refusedAt).Round(time.Millisecond), time.Since(grantedAt).Round(time.Millisecond))
	if c := conditions.Claim(pvc, corev1.PersistentVolumeClaimControllerResizeError); c != nil {
		t.Errorf("the expanded claim keeps %+v", c)
	}
	if err := c.Get(ctx, dsKey, ds); err != nil {
		t.Fatal(err)
	}
	if _, held := ds.Spec.Replicas[racer]; held {
		t.Errorf("the racing grant is still held: %+v", ds.Status.Replicas[racer])
	}
	if st := ds.Status.Replicas[rep.Name]; st.State != dsv1.RequestStateScheduled || st.ScheduledSize != grown.Value() {
		t.Errorf("ledger entry of %s: %+v, want 20Gi scheduled", rep.Name, st)
	}

	// Beyond the disk: 2Ti on a 400Gi disk. Longhorn's own claim validator
	// refuses the claim's update itself, before the resizer or any
	// Longhorn object sees it, in Longhorn's words with its numbers
	// (longhorn-manager v1.12.0 webhook/resources/persistentvolumeclaim/
	// validator.go, lines 42-97: CheckReplicasSizeExpansion, answered
	// Forbidden): its physical space check refuses first ("disk … does
	// not have sufficient physical space for expansion: … left=… <
	// minimal=…"), before its scheduling space check ("cannot schedule …
	// more bytes to disk …"). The gate receives no call for it.
	gateCalls, err := gateVolumeCalls(ctx, metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	longhornWords := fmt.Sprintf("error while CheckReplicasSizeExpansion for volume %s: disk %s does not have sufficient physical space for expansion: physical free space would drop below minimal",
		pvc.Spec.VolumeName, rep.Spec.DiskID)
	_, err = sandboxtest.SetClaimRequest(ctx, c, pvc, "2Ti")
	if err == nil || !strings.Contains(err.Error(), longhornWords) {
		t.Fatalf("expanding the claim to 2Ti on a 400Gi disk: got %v, want Longhorn's claim validator's refusal %q", err, longhornWords)
	}
	t.Logf("Longhorn's refusal: %v", err)
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	if request := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; request.Cmp(grown) != 0 {
		t.Errorf("the claim requests %s after the refused update, want 20Gi", request.String())
	}
	if err := notInfeasible(); err != nil {
		t.Error(err)
	}
	if after, err := gateVolumeCalls(ctx, metricsAddr); err != nil || after != gateCalls {
		t.Errorf("the gate answered %v volume writes, %v before the expansion beyond the disk (%v): Longhorn's check refuses first", after, gateCalls, err)
	}
	if err := c.Get(ctx, volKey, vol); err != nil || vol.Spec.Size != grown.Value() {
		t.Errorf("volume size %d (%v), want 20Gi", vol.Spec.Size, err)
	}
}

// gateVolumeCalls reads how many Volume writes the gate answered, whatever
// the answer, from the manager's metrics at addr.
func gateVolumeCalls(ctx context.Context, addr string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the metrics: %w", err)
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), "{")
		if !ok || name != "longhorn_diskschedule_gate_decisions_total" || !strings.Contains(rest, `kind="volume"`) {
			continue
		}
		_, v, _ := strings.Cut(rest, "} ")
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("reading %q: %w", sc.Text(), err)
		}
		n += f
	}
	return n, sc.Err()
}
