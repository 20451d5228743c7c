package volume

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/requirement"
	"github.com/longhorn/diskschedule/internal/simcluster"
)

// The simulated CSI driver classifies the gate's refusal of a growth as
// Longhorn's ControllerExpandVolume does: the gate's real denial, as the
// API server returns it to Longhorn's volume update, is OutOfRange (which
// the external resizer takes as infeasible); a refusal that is not about
// room is Internal (retried).
func TestExpansionRefusalCode(t *testing.T) {
	r, ds := refusedGrowth(2048*gi, "expansion from 10Gi to 2Ti needs 2038Gi more, 270Gi free of limit 280Gi")
	denial := requirement.Deny(refusal(r, "volume pvc-a grows from 10Gi to 2Ti", longhornPersisted, ds)).Response()
	apiServer := func(msg string) error {
		return fmt.Errorf("expanding volume pvc-a to %d bytes: admission webhook %q denied the request: %s",
			2048*gi, "volumes.gate.diskschedule.longhorn.io", msg)
	}

	got := simcluster.ControllerExpandError(apiServer(denial.Result.Message))
	if status.Code(got) != codes.OutOfRange {
		t.Errorf("the gate's refusal of a growth is answered %s, want OutOfRange: %v", status.Code(got), got)
	}
	if msg := status.Convert(got).Message(); msg != apiServer(denial.Result.Message).Error() {
		t.Errorf("the answer's message %q is not the volume update's error", msg)
	}

	// A growth the disk can hold once a grant Longhorn has not persisted
	// (a racing placement) is released.
	retriable := func() string {
		r, ds := refusedGrowth(20*gi, "expansion from 10Gi to 20Gi needs 10Gi more, 4Gi free of limit 100Gi")
		return requirement.Deny(refusal(r, "volume pvc-a grows from 10Gi to 20Gi", nil, ds)).Response().Result.Message
	}
	for _, other := range []error{
		apiServer(requirement.Deny(words("volume pvc-a grows from 10Gi to 2Ti", r, ledger.Owners{}).NoLedger).Response().Result.Message),
		apiServer(requirement.Undecided("volume pvc-a grows from 10Gi to 2Ti", requirement.ErrNoLedger).Message),
		apiServer(requirement.Failed(errors.New("listing the replicas of volume pvc-a: timeout")).Message),
		apiServer(retriable()),
		errors.New("expanding volume pvc-a to 2199023255552 bytes: Operation cannot be fulfilled on volumes.longhorn.io \"pvc-a\": the object has been modified"),
	} {
		if got := simcluster.ControllerExpandError(other); status.Code(got) != codes.Internal {
			t.Errorf("%q is answered %s, want Internal", other, status.Code(got))
		}
	}
}
