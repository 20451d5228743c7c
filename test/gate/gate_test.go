package gate_test

import (
	"fmt"
	"testing"
)

// TestGateUnderAttack: Longhorn's own scheduler and datastore code places
// 32 × 100Gi replicas on 4 × 400Gi disks at once: the volume controllers of
// three longhorn-manager pods, each pod with its own datastore (its own
// informers, so the pods' views are independently stale), each volume
// placed by its owner with ScheduleReplica and written with UpdateReplica,
// refused writes retried as longhorn-manager retries them. Some writes
// lose on resourceVersion while the gate holds them (their requests are
// released at once), and a manager is restarted (one manager)
// or stopped (two managers serving the gate) mid-run. No disk may ever hold
// more than its limit, every slot that fits must be used (16), and the
// ledgers must settle on what is persisted. Several seeds.
func TestGateUnderAttack(t *testing.T) {
	for _, tc := range []struct {
		managers int
		seed     int64
	}{{1, 1}, {1, 2}, {2, 3}, {2, 4}} {
		t.Run(fmt.Sprintf("%d managers, seed %d", tc.managers, tc.seed), func(t *testing.T) {
			sb := startSandbox(t, topology(), tc.managers, true)
			restart := func() {
				// Stop the first manager mid-run: with one, start a new one
				// as the Deployment would; with two, the other serves on.
				if err := sb.StopManager(0); err != nil {
					t.Errorf("stopping manager 0: %v", err)
				}
				if tc.managers == 1 {
					if _, err := sb.StartManager(withGrace); err != nil {
						t.Errorf("restarting the manager: %v", err)
					}
				}
			}
			r := attack(t, sb, tc.seed, restart)
			pct, disk := r.fullest()
			t.Logf("with the gate: %d placed, %d denied, %d writes lost while the gate held them, %d replica events watched; fullest disk %s at %.0f%% of its limit",
				r.placed, r.denied, r.lost, r.events, disk, pct)
			if over := r.over(); len(over) > 0 {
				t.Errorf("with the gate, persisted bytes went over a disk's limit: %v", over)
				dumpLedgersAndReplicas(t, sb.Client())
			}
			if r.placed != 16 {
				t.Errorf("%d replicas placed, want 16: 4 disks of 400Gi hold 4 × 100Gi each", r.placed)
			}
			if r.lost == 0 {
				t.Errorf("no write lost while the gate held it: the workload did not exercise the mirror's release")
			}
			settle(t, sb.Client())
		})
	}
}

// TestWithoutGate runs the same workload, Longhorn's own scheduler and
// datastore code from three longhorn-manager pods, with the gate not
// registered, as Longhorn runs today: the disks overfill.
func TestWithoutGate(t *testing.T) {
	sb := startSandbox(t, topology(), 1, false)
	r := attack(t, sb, 1, nil)
	pct, disk := r.fullest()
	t.Logf("without the gate: %d placed, %d denied; fullest disk %s at %.0f%% of its limit; over: %v", r.placed, r.denied, disk, pct, r.over())
	if len(r.over()) == 0 {
		t.Errorf("without the gate no disk went over its limit: the workload does not race")
	}
	if r.denied != 0 {
		t.Errorf("%d writes denied without the gate", r.denied)
	}
	// The mirror adopts what Longhorn persisted (rule 7).
	settle(t, sb.Client())
}
