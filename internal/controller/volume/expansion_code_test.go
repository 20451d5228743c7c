package volume

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/requirement"
)

// controllerExpandCode is the code Longhorn's ControllerExpandVolume
// answers a failed expansion with (longhornOutOfRange).
func controllerExpandCode(err error) codes.Code {
	if longhornOutOfRange.MatchString(err.Error()) {
		return codes.OutOfRange
	}
	return codes.Internal
}

// The gate words its refusals so that Longhorn's CSI driver answers them
// as meant: the gate's real denial of a growth, as the API server returns
// it to Longhorn's volume update, is OutOfRange (infeasible); a refusal
// that is not about room is Internal (retried). The sandbox's e2e
// TestExpansion checks it through Longhorn's own CSI controller server.
func TestExpansionRefusalCode(t *testing.T) {
	r, ds := refusedGrowth(2048*gi, "expansion from 10Gi to 2Ti needs 2038Gi more, 270Gi free of limit 280Gi")
	denial := requirement.Deny(refusal(r, "volume pvc-a grows from 10Gi to 2Ti", longhornPersisted, ds)).Response()
	apiServer := func(msg string) error {
		return fmt.Errorf("expanding volume pvc-a to %d bytes: admission webhook %q denied the request: %s",
			2048*gi, "volumes.gate.diskschedule.longhorn.io", msg)
	}

	if got := controllerExpandCode(apiServer(denial.Result.Message)); got != codes.OutOfRange {
		t.Errorf("the gate's refusal of a growth is answered %s, want OutOfRange: %v", got, apiServer(denial.Result.Message))
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
		if got := controllerExpandCode(other); got != codes.Internal {
			t.Errorf("%q is answered %s, want Internal", other, got)
		}
	}
}
