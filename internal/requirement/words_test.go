package requirement

import (
	"testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// A refusal is the request's own words completed with the ledger's place
// and message; a growth's is worded for Longhorn's CSI driver, final only
// when the disk cannot hold it whatever else ends.
func TestRefusal(t *testing.T) {
	const name = "pvc-a-r-1"
	// The ledger of disk-1 of node-1 (limit 100Gi) refused name's growth
	// from 10Gi to 20Gi; another replica holds 85Gi there.
	refused := &dsv1.DiskSchedule{Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1",
		Replicas: map[string]dsv1.RequestedBytes{name: dsv1.RequestedBytes(20 * gi), "other-r-1": dsv1.RequestedBytes(85 * gi)}},
		Status: dsv1.DiskScheduleStatus{StorageLimit: 100 * gi, Replicas: map[string]dsv1.RequestStatus{
			name:        {State: dsv1.RequestStateRejected, RequestedSize: 20 * gi, ScheduledSize: 10 * gi, Message: "no room"},
			"other-r-1": {State: dsv1.RequestStateScheduled, RequestedSize: 85 * gi, ScheduledSize: 85 * gi},
		}}}
	withdrawn := refused.DeepCopy()
	delete(withdrawn.Spec.Replicas, name)
	r := Request{Disk: "uuid-1", Kind: ledger.Replica, Name: name, Size: 20 * gi, Words: Words{Needs: "replica pvc-a-r-1 needs 20Gi"}}
	growth := r
	growth.Words.Growth = "volume pvc-a grows from 10Gi to 20Gi"
	persisted := func(owners ledger.Owners) Request { g := growth; g.Words.Persisted = owners; return g }
	for _, tc := range []struct {
		name string
		r    Request
		ds   *dsv1.DiskSchedule
		want string
	}{
		{"the ledger's message", r, refused, "replica pvc-a-r-1 needs 20Gi on disk disk-1 of node node-1: no room"},
		{"a request withdrawn without words for it", r, withdrawn, "replica pvc-a-r-1 needs 20Gi on disk disk-1 of node node-1: "},
		{"a request withdrawn", func() Request { w := r; w.Words.Withdrawn = "gone"; return w }(), withdrawn,
			"replica pvc-a-r-1 needs 20Gi on disk disk-1 of node node-1: gone"},
		{"a growth the disk can never hold: 85Gi persisted beside it", persisted(ledger.Owners{Replicas: map[string]bool{"other-r-1": true}}), refused,
			"failed to schedule 10737418240 more bytes to disk uuid-1: volume pvc-a grows from 10Gi to 20Gi, but replica pvc-a-r-1 needs 20Gi on disk disk-1 of node node-1: no room"},
		{"a growth the disk can hold once a grant Longhorn has not persisted ends", persisted(ledger.Owners{}), refused,
			"volume pvc-a grows from 10Gi to 20Gi, but replica pvc-a-r-1 needs 20Gi on disk disk-1 of node node-1: no room; " +
				"disk uuid-1 can hold it once space held beyond what Longhorn persisted there is released: retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Refusal(tc.r, 10*gi, tc.ds); got != tc.want {
				t.Errorf("Refusal:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
