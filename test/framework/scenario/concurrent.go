package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"

	"github.com/longhorn/diskschedule/internal/conditions"
)

// DisabledLocalityClass is the StorageClass ConcurrentPVCs uses: one
// replica, data locality disabled, so a volume is placed as soon as it
// exists, without waiting for a pod to attach it.
const DisabledLocalityClass = "longhorn-disabled"

// csiDriver is Longhorn's CSI driver, the provisioner of its classes.
const csiDriver = "driver.longhorn.io"

// ConcurrentPVCsOptions configures ConcurrentPVCs. Common.StorageClass is
// ignored: the claims use DisabledLocalityClass.
type ConcurrentPVCsOptions struct {
	Common
	// Claims is how many claims are created at once; zero is 20.
	Claims int
	// Size is each claim's size; "" is 100Gi.
	Size string
	// HoldPlacement creates the claims while every node is cordoned, so
	// that Longhorn places none of their volumes (it schedules nothing on a
	// cordoned node while disable-scheduling-on-cordoned-node is true, its
	// default), and once every volume exists unscheduled, uncordons every
	// node at once: Longhorn's volume controller then places all of them at
	// the same moment, each worker from its own cache, as when claims arrive
	// faster than it places them. Without it the volumes are placed as the
	// provisioner creates them, one after the other.
	HoldPlacement bool
}

// ConcurrentPVCsResult is how the ledgers shared out the space.
type ConcurrentPVCsResult struct {
	// Claims is how many claims were created.
	Claims int
	// Scheduled counts the volumes placed and granted, Unschedulable those
	// the volume controller reports Scheduled=False (no disk has room).
	Scheduled, Unschedulable int
	// UnschedulableMessage is one unschedulable volume's reason, for people.
	UnschedulableMessage string
	// TimeToSettled is the time from the first claim's creation (with
	// HoldPlacement, from the uncordon) until every volume was decided one
	// way or the other.
	TimeToSettled time.Duration
	// Disks are, per disk, the bytes Longhorn persisted there once every
	// volume was decided, against the disk's limit.
	Disks []DiskUsage
	// Ledgers, LedgerVersions and Violations are as in Result.
	Ledgers        []LedgerRow
	LedgerVersions int
	Violations     []string
}

// ConcurrentPVCs creates Claims claims of Size at the same moment, with no
// pods, more than the cluster holds (twenty 100Gi volumes on four 400Gi
// disks): every volume controller worker places a replica at once (with
// HoldPlacement, all of them after an uncordon). With the
// admission gate only the ledgers stand between them and an overfilled
// disk; without it nothing does, and Disks shows how full each disk got.
// The extender is not involved (no pods). The claims are left for Cleanup.
func ConcurrentPVCs(ctx context.Context, c client.WithWatch, opts ConcurrentPVCsOptions) (ConcurrentPVCsResult, error) {
	var out ConcurrentPVCsResult
	opts.StorageClass = DisabledLocalityClass
	o, err := opts.Common.withDefaults()
	if err != nil {
		return out, err
	}
	if opts.Claims == 0 {
		opts.Claims = 20
	}
	if opts.Size == "" {
		opts.Size = "100Gi"
	}
	if err := ensureDisabledLocalityClass(ctx, c); err != nil {
		return out, err
	}
	w, err := newWorkload(c, o, opts.Claims, 1, opts.Size, false)
	if err != nil {
		return out, err
	}
	if err := ensureNamespace(ctx, c, o.Namespace); err != nil {
		return out, err
	}
	mon, err := startLedgerMonitor(ctx, c, o.SystemNamespace)
	if err != nil {
		return out, err
	}
	out.Claims = opts.Claims
	settleErr := w.createAndSettle(ctx, &out, opts.HoldPlacement)
	rows, versions, violations, err := mon.stop(ctx)
	out.Ledgers, out.LedgerVersions, out.Violations = rows, versions, violations
	if settleErr != nil || err != nil {
		return out, fmt.Errorf("concurrent claims: %w", errors.Join(settleErr, err))
	}
	if out.Disks, err = diskUsage(ctx, c, o.SystemNamespace); err != nil {
		return out, fmt.Errorf("concurrent claims: %w", err)
	}
	return out, nil
}

// createAndSettle creates the claims at once and waits until every volume
// is decided; with hold, it creates them while every node is cordoned and
// uncordons every node once every volume is decided unschedulable.
func (w *workload) createAndSettle(ctx context.Context, out *ConcurrentPVCsResult, hold bool) error {
	var claims []client.Object
	for _, pod := range w.names {
		claims = append(claims, w.claim(w.pods[pod][0]))
	}
	var nodes []string
	if hold {
		var err error
		if nodes, err = longhornNodes(ctx, w.c, w.o.SystemNamespace); err != nil {
			return err
		}
		if err := setCordoned(ctx, w.c, w.o, nodes, nodes...); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := createAll(ctx, w.c, claims); err != nil {
		return err
	}
	w.o.Logf("created %d claims of %s at once; waiting until every volume is decided", len(claims), w.size.String())
	var held map[string]string
	if hold {
		var err error
		if held, err = w.waitDecided(ctx, claims, start, nil, out); err != nil {
			return err
		}
		w.o.Logf("every volume exists, none placed: %d unschedulable while every node is cordoned; uncordoning every node at once", out.Unschedulable)
		start = time.Now()
		if err := setCordoned(ctx, w.c, w.o, nodes); err != nil {
			return err
		}
	}
	if _, err := w.waitDecided(ctx, claims, start, held, out); err != nil {
		return err
	}
	w.o.Logf("every volume is decided after %s: %d scheduled, %d unschedulable", round(out.TimeToSettled), out.Scheduled, out.Unschedulable)
	return nil
}

// waitDecided waits until every claim is bound, every volume decided and
// every ledger has decided its requests, and records the outcome in out,
// with the time since start. A volume still unschedulable with the message
// held names for it was not decided again since: it is not decided yet. It
// returns each unschedulable volume's message.
func (w *workload) waitDecided(ctx context.Context, claims []client.Object, start time.Time, held map[string]string, out *ConcurrentPVCsResult) (map[string]string, error) {
	var messages map[string]string
	err := waitAll(ctx, w.o.Timeout, w.c, []watched{
		{&corev1.PersistentVolumeClaimList{}, w.o.Namespace},
		{&lhv1.VolumeList{}, w.o.SystemNamespace},
		{&dsv1.DiskScheduleList{}, w.o.SystemNamespace},
	}, func(objs []objects) (bool, string) {
		out.Scheduled, out.Unschedulable, out.UnschedulableMessage = 0, 0, ""
		messages = map[string]string{}
		for _, claim := range claims {
			pvc, ok := objs[0][key(claim)].(*corev1.PersistentVolumeClaim)
			if !ok || pvc.Spec.VolumeName == "" {
				return false, "claim " + claim.GetName() + " is not bound"
			}
			vol, ok := objs[1][w.o.SystemNamespace+"/"+pvc.Spec.VolumeName].(*lhv1.Volume)
			if !ok {
				return false, "volume " + pvc.Spec.VolumeName + " not found"
			}
			sched, _ := conditions.Longhorn(vol.Status.Conditions, lhv1.VolumeConditionTypeScheduled)
			msg := sched.Message
			switch scheduled, ok := decided(vol); {
			case ok && scheduled:
				out.Scheduled++
			case ok && msg != held[vol.Name]:
				out.Unschedulable++
				out.UnschedulableMessage, messages[vol.Name] = msg, msg
			default:
				return false, "volume " + vol.Name + " is not decided"
			}
		}
		for _, obj := range objs[2] {
			ds := obj.(*dsv1.DiskSchedule)
			if ds.Status.ObservedGeneration != ds.Generation {
				return false, "DiskSchedule " + ds.Name + " has undecided requests"
			}
		}
		out.TimeToSettled = time.Since(start)
		return true, ""
	})
	if err != nil {
		return nil, fmt.Errorf("waiting until every volume is decided: %w", err)
	}
	return messages, nil
}

// decided reports whether a volume is decided (second result) and, if so,
// whether it is scheduled: Longhorn's Scheduled condition True with every
// replica placed, or False because its placement found no disk with room.
// A replica write the API server refused, or one that lost a race, is tried
// again shortly: such a volume is not decided yet.
func decided(v *lhv1.Volume) (scheduled, isDecided bool) {
	s, _ := conditions.Longhorn(v.Status.Conditions, lhv1.VolumeConditionTypeScheduled)
	switch {
	case s.Status == lhv1.ConditionStatusTrue:
		return true, true
	case s.Status == lhv1.ConditionStatusFalse && s.Reason != "" && !retriedSoon(s.Message):
		return false, true
	}
	return false, false
}

// retriedSoon reports whether a Scheduled=False message of the simulated
// Longhorn's volume controller is one it tries again within seconds rather
// than a placement that found no disk: a replica write the API server
// refused ("... was refused: ...", the admission gate's denial for one), or
// a replica left unscheduled without a placement failure ("failed to
// schedule volume ...: 0 of 1 replicas scheduled", a write that lost a race).
func retriedSoon(message string) bool {
	return strings.Contains(message, " was refused: ") || strings.HasPrefix(message, "failed to schedule volume ")
}

// ensureDisabledLocalityClass creates DisabledLocalityClass unless it exists.
func ensureDisabledLocalityClass(ctx context.Context, c client.Client) error {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: DisabledLocalityClass},
		Provisioner:       csiDriver,
		Parameters:        map[string]string{"numberOfReplicas": "1", "dataLocality": string(lhv1.DataLocalityDisabled)},
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if err := c.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating StorageClass %s: %w", sc.Name, err)
	}
	return nil
}
