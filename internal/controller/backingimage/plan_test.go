package backingimage

import (
	"reflect"
	"strings"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/requirement"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const gi = int64(1) << 30

// What a BackingImage write of Longhorn's asks of the ledgers: a copy on
// each disk it adds to spec.diskFileSpecMap, at status.realSize, the size
// Longhorn's node controller counts.
func TestPlan(t *testing.T) {
	const ns = "longhorn-system"
	// A qcow2 image of 10Gi whose file takes 3Gi, with a copy on uuid-0.
	image := func(realSize int64, disks ...string) *lhv1.BackingImage {
		bi := testenv.BackingImage(ns, "default-image-x7k2p", 10*gi, disks...)
		bi.Status.RealSize = realSize
		return bi
	}
	for _, tc := range []struct {
		name    string
		old, bi *lhv1.BackingImage
		disks   []string
		size    int64
		reason  string
	}{
		{name: "a disk added asks a copy of the image's realSize, not its size",
			old: image(3*gi, "uuid-0"), bi: image(3*gi, "uuid-0", "uuid-1"), disks: []string{"uuid-1"}, size: 3 * gi},
		{name: "an image created with copies asks each",
			bi: image(3*gi, "uuid-1", "uuid-0"), disks: []string{"uuid-0", "uuid-1"}, size: 3 * gi},
		{name: "a real size not known yet asks nothing: the mirror adopts the copies later",
			old: image(0, "uuid-0"), bi: image(0, "uuid-0", "uuid-1"), reason: "real size is not known yet"},
		{name: "no disk added asks nothing",
			old: image(3*gi, "uuid-0", "uuid-1"), bi: image(3*gi, "uuid-1"), reason: "gains no disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := Plan(tc.old, tc.bi)
			var disks []string
			var size int64
			reason := ""
			if plan.Answer != nil {
				if !plan.Answer.Allowed {
					t.Errorf("a write that asks nothing is answered %+v", *plan.Answer)
				}
				reason = plan.Answer.Message
			}
			for _, r := range plan.Requests {
				if r.Kind != ledger.BackingImage || r.Name != tc.bi.Name || (size != 0 && r.Size != size) {
					t.Errorf("request %+v is not a copy of %s of one size", r, tc.bi.Name)
				}
				disks, size = append(disks, r.Disk), r.Size
			}
			if !reflect.DeepEqual(disks, tc.disks) || size != tc.size {
				t.Errorf("copies on %v of %d (%q), want on %v of %d", disks, size, reason, tc.disks, tc.size)
			}
			if !strings.Contains(reason, tc.reason) || (tc.reason == "") != (reason == "") {
				t.Errorf("reason %q, want %q", reason, tc.reason)
			}
			if plan.Answer == nil && (plan.KeepUndecided || !plan.DryRun.Allowed || plan.DryRun.Warning == "") {
				t.Errorf("copies put back when undecided %v, dry run answered %+v", !plan.KeepUndecided, plan.DryRun)
			}
		})
	}
}

// A copy refused or not decided says so in the ledger's numbers.
func TestWords(t *testing.T) {
	bi := testenv.BackingImage("longhorn-system", "default-image-x7k2p", 10*gi, "uuid-0")
	bi.Status.RealSize = 3 * gi
	plan := Plan(nil, bi)
	r := plan.Requests[0]
	ds := &dsv1.DiskSchedule{Spec: dsv1.DiskScheduleSpec{Name: "disk-0", NodeID: "node-0",
		BackingImages: map[string]dsv1.RequestedBytes{bi.Name: dsv1.RequestedBytes(3 * gi)}},
		Status: dsv1.DiskScheduleStatus{BackingImages: map[string]dsv1.RequestStatus{bi.Name: {
			State: dsv1.RequestStateRejected, RequestedSize: 3 * gi, Message: "requested 3Gi, 1Gi free of limit 100Gi"}}}}
	for got, want := range map[string]string{
		requirement.Refusal(r, 0, ds): "backing image default-image-x7k2p needs a copy of 3Gi on disk disk-0 of node node-0: requested 3Gi, 1Gi free of limit 100Gi",
		r.Words.NoLedger:              "backing image default-image-x7k2p needs a copy of 3Gi on disk uuid-0, which has no DiskSchedule yet",
		r.Words.Gone:                  "backing image default-image-x7k2p needs a copy of 3Gi on disk uuid-0, which has no DiskSchedule any more",
		r.Words.Undecided:             "backing image default-image-x7k2p needs a copy of 3Gi on disk uuid-0",
		plan.Admitted:                 "copies of 3Gi granted on 1 disks",
	} {
		if got != want {
			t.Errorf("said %q, want %q", got, want)
		}
	}
}
