package schedulerplugin

import (
	"testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// TestLedgerResource holds the resource kube-scheduler follows for the
// plugin's requeueing to the DiskSchedule API: a name it cannot resolve
// would requeue no pod on a ledger's change.
func TestLedgerResource(t *testing.T) {
	want := "diskschedules." + dsv1.GroupVersion.Version + "." + dsv1.GroupVersion.Group
	if string(ledgerResource) != want {
		t.Errorf("ledgerResource %q, want %q", ledgerResource, want)
	}
}
