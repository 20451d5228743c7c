package volume

import (
	"regexp"
	"strings"
	"testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/requirement"
)

// A refused growth reaches Longhorn's CSI driver as OutOfRange: its
// ControllerExpandVolume maps the error of its volume update to OutOfRange
// when it matches this expression (csi/controller_server.go, longhorn-manager
// v1.12.0), and to Internal, retried for ever, otherwise.
var longhornOutOfRange = regexp.MustCompile("failed to schedule .* more bytes to disk")

// refusedGrowth is the request of replica pvc-a-r-1, granted 10Gi on disk
// uuid-1 (disk-1 of node-1), whose limit is 100Gi and where replica
// other-r-1 holds 86Gi, to grow to size, and its ledger's rejection saying
// msg.
func refusedGrowth(size int64, msg string) (requirement.Request, *dsv1.DiskSchedule) {
	r := requirement.Request{Disk: "uuid-1", Kind: ledger.Replica, Name: "pvc-a-r-1", Size: size}
	ds := &dsv1.DiskSchedule{Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1",
		Replicas: map[string]dsv1.RequestedBytes{r.Name: dsv1.RequestedBytes(size), "other-r-1": dsv1.RequestedBytes(86 * gi)}},
		Status: dsv1.DiskScheduleStatus{StorageLimit: 100 * gi, StorageScheduled: 96 * gi, Replicas: map[string]dsv1.RequestStatus{
			r.Name:      {State: dsv1.RequestStateRejected, RequestedSize: size, ScheduledSize: 10 * gi, Message: msg},
			"other-r-1": {State: dsv1.RequestStateScheduled, RequestedSize: 86 * gi, ScheduledSize: 86 * gi},
		}}}
	return r, ds
}

// longhornPersisted says Longhorn persisted both replicas on uuid-1.
var longhornPersisted = map[string]ledger.Owners{"uuid-1": {Replicas: map[string]bool{"pvc-a-r-1": true, "other-r-1": true}}}

// refusal is the gate's denial of r, the request of a replica of pvc-a for
// its volume's growth (growth) as Plan words it given what Longhorn
// persisted on r's disk, which the ledger ds refused; the entry held 10Gi.
func refusal(r requirement.Request, growth string, persisted map[string]ledger.Owners, ds *dsv1.DiskSchedule) string {
	r.Words = words(growth, r, persisted[r.Disk])
	return requirement.Refusal(r, 10*gi, ds)
}

func TestExpansionRefusal(t *testing.T) {
	r, ds := refusedGrowth(20*gi, "expansion from 10Gi to 20Gi needs 10Gi more, 4Gi free of limit 100Gi")
	msg := refusal(r, "volume pvc-a grows from 10Gi to 20Gi", longhornPersisted, ds)
	// What Longhorn's API returns to its CSI driver: the API server's
	// denial around the gate's answer, wrapped by Longhorn's manager.
	resp := requirement.Deny(msg).Response()
	longhornError := "unable to expand volume pvc-a: admission webhook \"volumes.gate.diskschedule.longhorn.io\" denied the request: " + resp.Result.Message
	if !longhornOutOfRange.MatchString(longhornError) {
		t.Errorf("Longhorn's CSI driver does not map %q to OutOfRange", longhornError)
	}
	for _, part := range []string{
		"failed to schedule 10737418240 more bytes to disk uuid-1",
		"volume pvc-a grows from 10Gi to 20Gi",
		"replica pvc-a-r-1 needs 20Gi on disk disk-1 of node node-1",
		"10Gi more, 4Gi free of limit 100Gi",
	} {
		if !strings.Contains(msg, part) {
			t.Errorf("refusal %q does not say %q", msg, part)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("refusal %q spans lines; Longhorn's expression matches within one", msg)
	}
	// Other refusals are not capacity refusals: they stay Internal, retried.
	if other := requirement.Undecided("volume pvc-a grows from 10Gi to 20Gi", requirement.ErrNoLedger).Message; longhornOutOfRange.MatchString(other) {
		t.Errorf("%q would be reported infeasible", other)
	}
}

// TestExpansionRefusalRetriable: a growth the disk can hold once what the
// ledger holds beyond Longhorn's persisted replicas ends (here a grant
// Longhorn has not persisted: a racing placement) is refused in words
// Longhorn's CSI driver answers Internal, which the external resizer
// retries; the same refusal with that replica persisted is OutOfRange.
func TestExpansionRefusalRetriable(t *testing.T) {
	r, ds := refusedGrowth(20*gi, "expansion from 10Gi to 20Gi needs 10Gi more, 4Gi free of limit 100Gi")
	msg := requirement.Deny(refusal(r, "volume pvc-a grows from 10Gi to 20Gi",
		map[string]ledger.Owners{"uuid-1": {Replicas: map[string]bool{"pvc-a-r-1": true}}}, ds)).Response().Result.Message
	longhornError := "unable to expand volume pvc-a: admission webhook \"volumes.gate.diskschedule.longhorn.io\" denied the request: " + msg
	if longhornOutOfRange.MatchString(longhornError) {
		t.Errorf("a refusal that ends by itself would be reported infeasible: %q", longhornError)
	}
	for _, part := range []string{"volume pvc-a grows from 10Gi to 20Gi", "10Gi more, 4Gi free of limit 100Gi", "retry"} {
		if !strings.Contains(msg, part) {
			t.Errorf("refusal %q does not say %q", msg, part)
		}
	}
	// The boundary: the disk holds the growth exactly when the persisted
	// others leave room for its new size.
	for _, tc := range []struct {
		other int64
		want  bool
	}{{80 * gi, true}, {80*gi + 1, false}} {
		d := ds.DeepCopy()
		st := d.Status.Replicas["other-r-1"]
		st.ScheduledSize, st.RequestedSize = tc.other, tc.other
		d.Status.Replicas["other-r-1"] = st
		if got := ledger.CanEverHold(d, longhornPersisted["uuid-1"], r.Name, r.Size); got != tc.want {
			t.Errorf("with %s persisted beside it, CanEverHold(20Gi of limit 100Gi) = %v, want %v", ledger.Bytes(tc.other), got, tc.want)
		}
	}
}
