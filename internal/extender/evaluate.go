package extender

import (
	"slices"

	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

// snapshot is what one evaluation reads: the view of nodes and ledgers and
// what the pods in flight claim on each disk, as the in-flight state held
// them at one instant (flight.snapshot). Nothing changes it once taken, so
// evaluations read it without a lock, and filters of different pods
// evaluate at once.
type snapshot struct {
	view *view
	// claimed is the bytes the pods in flight claim on each disk UUID.
	claimed map[string]int64
	// inFlight is how many pods were in flight.
	inFlight int
	// added is the overlay's count of entries added when taken: a pod let
	// through on the snapshot is recorded in flight only if what pods in
	// flight claim did not grow since on the disks it was packed onto
	// (flight.track).
	added uint64
	// changed is closed when the overlay next changes.
	changed <-chan struct{}
}

// What an evaluation counts besides the ledgers and the pod's local volumes.
const (
	// withOverlay takes off what the pods in flight claim.
	withOverlay = 1 << iota
	// withRoomElsewhere fails a node where the pod's volumes fit when
	// Longhorn would find no room for their other replicas (roomElsewhere).
	withRoomElsewhere
)

// question is what one evaluation asks of a snapshot.
type question struct {
	// pod is the pod as reservations name it ("namespace/name"): it gets
	// back the space its own reservations hold.
	pod string
	// vols are the pod's volumes that need local space (needsLocalSpace).
	vols []podVolume
	// candidates are the nodes to judge.
	candidates []string
	sched      settings.Scheduling
	// how says what is counted: withOverlay, withRoomElsewhere.
	how int
	// budget bounds the packing search per node.
	budget int
}

// evaluate is the extender's decision: whether q's pod's volumes fit on
// each candidate node of s, packed onto its disks (evaluateReading), and,
// as q.how says, with what the pods in flight claim taken off and room for
// the volumes' other replicas elsewhere (roomElsewhere). It reads s and q
// alone and changes neither: the verdicts, with the packing search's steps,
// are for the caller to record.
func evaluate(s *snapshot, q question) map[string]fit {
	var claimed func(string) int64
	if q.how&withOverlay != 0 && len(s.claimed) > 0 {
		claimed = func(uuid string) int64 { return s.claimed[uuid] }
	}
	elsewhere := q.how&withRoomElsewhere != 0 && slices.ContainsFunc(q.vols, mayNeedRoomElsewhere)
	var cluster []placement.Node // every Longhorn node, read once when needed
	var seen placements
	var sc scratch
	fits := make(map[string]fit, len(q.candidates))
	for _, name := range q.candidates {
		ft := sc.evaluate(q.vols, s.view.reading(name), claimed, q.sched, q.pod, q.budget)
		if ft.OK && elsewhere {
			if cluster == nil {
				cluster = s.view.placementNodes()
				seen = newPlacements(cluster)
			}
			if why := roomElsewhere(q.vols, name, cluster, q.sched, seen); why != "" {
				ft = fit{Reason: why, Steps: ft.Steps, Exact: ft.Exact}
			}
		}
		fits[name] = ft
	}
	return fits
}
