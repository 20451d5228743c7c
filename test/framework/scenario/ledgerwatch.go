package scenario

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LedgerWatch is the scenarios' ledger monitor for tests that drive a
// cluster themselves: it watches every DiskSchedule of a namespace and
// checks the ledger's invariant (storageScheduled within storageLimit
// unless adopted over it, and the sum of its entries) in every version.
type LedgerWatch struct{ m *ledgerMonitor }

// WatchLedgers starts watching the DiskSchedules of namespace until Stop.
func WatchLedgers(ctx context.Context, c client.WithWatch, namespace string) (*LedgerWatch, error) {
	m, err := startLedgerMonitor(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	return &LedgerWatch{m: m}, nil
}

// Stop ends the watch and returns every disk's row, the number of ledger
// versions seen, and the versions that broke the invariant.
func (w *LedgerWatch) Stop(ctx context.Context) ([]LedgerRow, int, []string, error) {
	return w.m.stop(ctx)
}
