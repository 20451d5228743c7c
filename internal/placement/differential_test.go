package placement_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/longhorn/longhorn-manager/scheduler"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

const (
	// differentialStates is how many seeded cluster states
	// TestPlacementAgainstLonghorn checks.
	differentialStates = 10000
	// differentialSeed is the first word of every state's PCG seed; the
	// state's index is the second.
	differentialSeed = 0x1f2e3d4c5b6a7988
	// maxReportedStates is how many disagreeing states a run describes
	// before it stops.
	maxReportedStates = 3
)

// TestPlacementAgainstLonghorn is the differential test of package
// placement (DESIGN §5): on seeded random cluster states it holds
// placement's one eligibility rule (Eligibility) against Longhorn v1.12.0's
// own scheduler (scheduler.ReplicaScheduler.FindDiskCandidates, imported,
// not copied) and fails on any verdict that differs unless
// deliberateDifferences names the difference.
//
// Longhorn's scheduler runs over Longhorn's own DataStore built on Longhorn's
// fake clientsets, with the informers' indexers filled directly, as
// Longhorn's own scheduler tests do: the scheduler reads only the datastore's
// listers, so this is the code path it runs in longhorn-manager, and a real
// API server per state would make ten thousand states take hours instead of
// seconds.
//
// For each state two kinds of verdict are compared:
//
//   - "node N alone": the new replica pinned to node N with no other replica
//     of the volume, so every disk of N gets a verdict of its own (node and
//     disk rules, tags, disk types, the space checks);
//   - "next replica": the new replica with the volume's existing replicas and
//     pin, so the anti-affinity stages decide which disks are candidates.
//
// The states are as longhorn-manager writes its objects (see
// stateGenerator): node conditions with cordons, disk conditions from
// Longhorn's own disk check, every scheduled replica listed in its disk's
// scheduledReplica, webhook rules kept (eviction only without scheduling,
// sorted tags, a disk type on every disk), a running default instance
// manager and the engine image deployed on every node.
func TestPlacementAgainstLonghorn(t *testing.T) {
	d := newDifferential()
	explained, exercised := map[string]int{}, map[string]int{}
	reported := 0
	start := time.Now()
	for i := range differentialStates {
		r := rand.New(rand.NewPCG(differentialSeed, uint64(i)))
		rep, err := d.check(r)
		if err != nil {
			t.Fatalf("state %d (PCG seed %#x, %d): %v", i, uint64(differentialSeed), i, err)
		}
		for name, n := range rep.explained {
			explained[name] += n
		}
		for name, n := range rep.exercised {
			exercised[name] += n
		}
		if len(rep.unexplained) > 0 {
			t.Errorf("state %d (PCG seed %#x, %d):\n%s", i, uint64(differentialSeed), i, rep)
			if reported++; reported == maxReportedStates {
				t.Fatalf("stopping after %d disagreeing states", reported)
			}
		}
	}
	t.Logf("%d states in %v", differentialStates, time.Since(start).Round(time.Millisecond))
	for _, dd := range d.differences {
		t.Logf("deliberate difference %q seen %d×: %s", dd.name, explained[dd.name], dd.reason)
	}
	for _, name := range sortedKeys(exercised) {
		t.Logf("exercised %6d× %s", exercised[name], name)
	}
}

// FuzzPlacementAgainstLonghorn is TestPlacementAgainstLonghorn with the
// states drawn from the fuzzer's input: choices feed the generator's
// random source first, then a PCG seeded with seed takes over.
func FuzzPlacementAgainstLonghorn(f *testing.F) {
	for i := range 8 {
		f.Add(uint64(i), []byte{})
	}
	f.Add(uint64(1), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	d := newDifferential()
	f.Fuzz(func(t *testing.T, seed uint64, choices []byte) {
		r := rand.New(&bytesSource{data: choices, rest: rand.NewPCG(differentialSeed, seed)})
		rep, err := d.check(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.unexplained) > 0 {
			t.Errorf("seed %d, %d choice bytes:\n%s", seed, len(choices), rep)
		}
	})
}

// bytesSource is a random source that returns the fuzzer's bytes, eight
// at a time, then the numbers of rest.
type bytesSource struct {
	data []byte
	rest rand.Source
}

// Uint64 returns the next eight bytes as a number, or rest's next number.
func (s *bytesSource) Uint64() uint64 {
	if len(s.data) == 0 {
		return s.rest.Uint64()
	}
	var buf [8]byte
	n := copy(buf[:], s.data)
	s.data = s.data[n:]
	var v uint64
	for _, b := range buf {
		v = v<<8 | uint64(b)
	}
	return v
}

// differential checks cluster states against Longhorn's scheduler.
type differential struct {
	longhorn    *longhornScheduler
	differences []deliberateDifference
}

// newDifferential builds Longhorn's scheduler once for every state.
func newDifferential() *differential {
	l := newLonghornScheduler()
	return &differential{longhorn: l, differences: deliberateDifferences(l.rcs)}
}

// verdictCheck is one verdict compared on a state: the new replica of vol
// with the volume's replicas, pinned to pin.
type verdictCheck struct {
	// name says which verdict it is, for people.
	name string
	// vol is the volume as both sides see it.
	vol *lhv1.Volume
	// replicas are the volume's existing replicas.
	replicas []*lhv1.Replica
	// pin is the new replica's hardNodeAffinity for placement;
	// longhornPin for Longhorn, which gets the strict-local node there.
	pin, longhornPin string
	// node is the node the verdict is about, "" for every node.
	node string
}

// disagreement is a verdict on which Longhorn and placement differ.
type disagreement struct {
	check verdictCheck
	// onlyLonghorn and onlyPlacement are the candidate disks ("node/uuid")
	// one side has and the other not.
	onlyLonghorn, onlyPlacement []string
	// longhornErrors are the scheduler's errors.
	longhornErrors string
	// verdict is placement's.
	verdict placement.Verdict
}

// stateReport is the outcome of one state.
type stateReport struct {
	state *clusterState
	// unexplained are the disagreements no deliberate difference names.
	unexplained []disagreement
	// explained counts the other disagreements by deliberate difference.
	explained map[string]int
	// exercised counts the verdicts compared, those with candidates, and
	// placement's reasons for non-candidates by kind, to show what the
	// states exercise.
	exercised map[string]int
}

// check draws a state from r, loads it into Longhorn's datastore and
// compares every verdict.
func (d *differential) check(r *rand.Rand) (*stateReport, error) {
	st := (&stateGenerator{r: r, rcs: d.longhorn.rcs}).generate(time.Now())
	if err := d.longhorn.load(st); err != nil {
		return nil, err
	}
	rep := &stateReport{state: st, explained: map[string]int{}, exercised: map[string]int{}}
	for _, c := range verdictChecks(st) {
		dis, err := d.compare(st, c, rep.exercised)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		if dis == nil {
			continue
		}
		if dd := d.deliberate(st, *dis); dd != "" {
			rep.explained[dd]++
			continue
		}
		rep.unexplained = append(rep.unexplained, *dis)
	}
	return rep, nil
}

// verdictChecks returns the verdicts compared on st: each node alone, and
// the next replica unless Longhorn's volume controller would not schedule
// it (data locality that waits for attachment, volume not attached).
func verdictChecks(st *clusterState) []verdictCheck {
	var out []verdictCheck
	alone := st.volume.DeepCopy()
	alone.Spec.DataLocality = lhv1.DataLocalityDisabled
	for _, n := range st.nodes {
		out = append(out, verdictCheck{name: "node " + n.Name + " alone", vol: alone, pin: n.Name, longhornPin: n.Name, node: n.Name})
	}
	v := st.volume
	waits := v.Spec.DataLocality == lhv1.DataLocalityBestEffort || v.Spec.DataLocality == lhv1.DataLocalityStrictLocal
	if waits && v.Spec.NodeID == "" {
		return out
	}
	next := verdictCheck{name: "next replica", vol: v, replicas: st.replicas, pin: st.pin, longhornPin: st.pin}
	if v.Spec.DataLocality == lhv1.DataLocalityStrictLocal {
		next.pin, next.longhornPin = "", v.Spec.NodeID
	}
	return append(out, next)
}

// compare returns how the two verdicts of c on st differ, or nil, and
// counts in exercised what the verdict exercised.
func (d *differential) compare(st *clusterState, c verdictCheck, exercised map[string]int) (*disagreement, error) {
	lh, errs := d.longhorn.candidates(c.vol, c.replicas, c.longhornPin)
	req, err := placementRequest(st, c)
	if err != nil {
		return nil, err
	}
	verdict := placement.Eligibility(req)
	countExercised(exercised, c, verdict)
	pl := make(map[string]bool, len(verdict.Candidates))
	for _, ch := range verdict.Candidates {
		pl[ch.NodeID+"/"+ch.DiskUUID] = true
	}
	dis := &disagreement{check: c, longhornErrors: errs, verdict: verdict}
	for k := range lh {
		if !pl[k] {
			dis.onlyLonghorn = append(dis.onlyLonghorn, k)
		}
	}
	for k := range pl {
		if !lh[k] {
			dis.onlyPlacement = append(dis.onlyPlacement, k)
		}
	}
	if len(dis.onlyLonghorn) == 0 && len(dis.onlyPlacement) == 0 {
		return nil, nil
	}
	slices.Sort(dis.onlyLonghorn)
	slices.Sort(dis.onlyPlacement)
	return dis, nil
}

// countExercised counts the verdict: compared, with candidates, and each
// kind of reason placement gives (the reason without its numbers and names).
func countExercised(exercised map[string]int, c verdictCheck, v placement.Verdict) {
	kind := "node alone"
	if c.node == "" {
		kind = "next replica"
	}
	exercised["verdicts: "+kind]++
	if len(v.Candidates) > 0 {
		exercised["verdicts with candidates: "+kind]++
	}
	for _, f := range v.Failures {
		for _, r := range f.Reasons {
			exercised["reason: "+reasonKind(r)]++
		}
	}
}

// reasonKind returns reason up to its first number, quote or bracket.
func reasonKind(reason string) string {
	if i := strings.IndexAny(reason, "0123456789\"[]("); i > 0 {
		return strings.TrimSpace(reason[:i])
	}
	return reason
}

// placementRequest returns c as placement's request, read from Longhorn's
// objects the way the project reads them: settings.FromObjects,
// placement.FromLonghorn with Longhorn's own space (LonghornSpace),
// placement.FromLonghornReplica.
func placementRequest(st *clusterState, c verdictCheck) (placement.Request, error) {
	objects := make([]lhv1.Setting, 0, len(st.settings))
	for name, value := range st.settings {
		objects = append(objects, lhv1.Setting{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value})
	}
	s, invalid := settings.FromObjects(objects, nil)
	if len(invalid) > 0 {
		return placement.Request{}, fmt.Errorf("reading the settings: %v", invalid)
	}
	replenishing, err := placement.Replenishing(c.vol, st.replenishWait(), st.now)
	if err != nil {
		return placement.Request{}, fmt.Errorf("reading the volume's robustness: %w", err)
	}
	req := placement.Request{
		Volume: c.vol, ActualSize: c.vol.Status.ActualSize, Count: 1, HardNodeAffinity: c.pin, Settings: s,
	}
	for _, n := range st.nodes {
		req.Nodes = append(req.Nodes, placement.FromLonghorn(n, placement.LonghornSpace(n, s)))
	}
	for _, r := range c.replicas {
		if pr, ok := placement.FromLonghornReplica(r, replenishing); ok {
			req.Existing = append(req.Existing, pr)
		}
	}
	return req, nil
}

// deliberate returns the name of the deliberate difference that explains
// dis, or "".
func (d *differential) deliberate(st *clusterState, dis disagreement) string {
	for _, dd := range d.differences {
		if dd.recognises(st, dis) {
			return dd.name
		}
	}
	return ""
}

// deliberateDifference is a difference between placement and Longhorn's
// scheduler that the project keeps on purpose. docs/placement-differences.md
// lists the same differences for operators.
type deliberateDifference struct {
	// name names the difference.
	name string
	// reason says why placement differs.
	reason string
	// recognises reports whether a disagreement on a state is this
	// difference.
	recognises func(st *clusterState, dis disagreement) bool
}

// deliberateDifferences returns every deliberate difference. rcs is
// Longhorn's scheduler, whose own disk check the predicates call.
func deliberateDifferences(rcs *scheduler.ReplicaScheduler) []deliberateDifference {
	return []deliberateDifference{
		{
			name: "node selector on used nodes",
			reason: "with node and zone anti-affinity both soft, Longhorn's last stage takes the nodes that already hold a " +
				"replica of the volume without the volume's node selector (getDiskCandidates uses getCurrentNodesAndZones' " +
				"usedNodes unfiltered); placement applies the node selector, as Longhorn documents it, on every node",
			recognises: func(st *clusterState, dis disagreement) bool {
				if dis.check.node != "" || len(dis.onlyLonghorn) == 0 {
					return false
				}
				used := usedNodesOutsideSelector(st, dis.check)
				for _, k := range dis.onlyLonghorn {
					if !used[strings.SplitN(k, "/", 2)[0]] {
						return false
					}
				}
				return true
			},
		},
		{
			name: "exact space arithmetic",
			reason: "placement computes storage-minimal-available and the over-provisioning limit exactly in integers " +
				"(the ledger's own formulas); Longhorn computes them in float64, which rounds once " +
				"(maximum - reserved) × percentage passes 2^53, so the two can differ by a few bytes at the boundary",
			recognises: func(st *clusterState, dis disagreement) bool {
				flipped := spaceRoundingDisks(rcs, st, dis.check)
				if len(flipped) == 0 {
					return false
				}
				if dis.check.node == "" {
					return true // a flipped disk changes which anti-affinity stage wins
				}
				for _, k := range slices.Concat(dis.onlyLonghorn, dis.onlyPlacement) {
					if !flipped[k] {
						return false
					}
				}
				return true
			},
		},
	}
}

// spaceRoundingDisks returns the disks ("node/uuid") of the check's node
// (every node when none) that pass every node and disk rule but space, and
// on which Longhorn's space check in float64 and placement's exact one
// disagree for the check's volume.
func spaceRoundingDisks(rcs *scheduler.ReplicaScheduler, st *clusterState, c verdictCheck) map[string]bool {
	req, err := placementRequest(st, c)
	if err != nil {
		return nil
	}
	s := req.Settings
	size, actual := c.vol.Spec.Size, c.vol.Status.ActualSize
	out := map[string]bool{}
	for _, n := range req.Nodes {
		if (c.node != "" && n.Name != c.node) || len(placement.NodeFailures(n, c.vol.Spec.NodeSelector, s)) > 0 {
			continue
		}
		for _, disk := range n.Disks {
			if len(placement.DiskFailuresForVolume(disk, c.vol, s)) > 0 {
				continue
			}
			longhorn, _ := rcs.IsSchedulableToDisk(size, actual, &scheduler.DiskSchedulingInfo{
				DiskUUID: disk.UUID, StorageAvailable: disk.StorageAvailable, StorageMaximum: disk.StorageMaximum,
				StorageReserved: disk.StorageReserved, StorageScheduled: disk.StorageScheduled,
				OverProvisioningPercentage: s.OverProvisioningPercentage, MinimalAvailablePercentage: s.MinimalAvailablePercentage,
			})
			exact := ledger.HasActualSpace(disk.StorageAvailable, actual, disk.StorageMaximum, s.MinimalAvailablePercentage) &&
				ledger.Fits(disk.StorageScheduled, size, disk.StorageLimit)
			if longhorn != exact {
				out[n.Name+"/"+disk.UUID] = true
			}
		}
	}
	return out
}

// usedNodesOutsideSelector returns, when node and zone anti-affinity are
// both soft for the check's volume, the nodes that may take replicas, hold
// one of the volume counted for node anti-affinity, and whose tags do not
// meet the volume's node selector.
func usedNodesOutsideSelector(st *clusterState, c verdictCheck) map[string]bool {
	req, err := placementRequest(st, c)
	if err != nil {
		return nil
	}
	s, spec := req.Settings, c.vol.Spec
	if !placement.SoftAntiAffinity(string(spec.ReplicaSoftAntiAffinity), s.ReplicaSoftAntiAffinity) ||
		!placement.SoftAntiAffinity(string(spec.ReplicaZoneSoftAntiAffinity), s.ReplicaZoneSoftAntiAffinity) {
		return nil
	}
	holds := map[string]bool{}
	for _, r := range req.Existing {
		holds[r.NodeID] = holds[r.NodeID] || !r.DiskOnly
	}
	out := map[string]bool{}
	for _, n := range req.Nodes {
		if n.Ready && n.Schedulable && n.AllowScheduling && holds[n.Name] &&
			!placement.TagsMatch(n.Tags, spec.NodeSelector, s.AllowEmptyNodeSelectorVolume) {
			out[n.Name] = true
		}
	}
	return out
}

// String describes the state and its unexplained disagreements for people.
func (rep *stateReport) String() string {
	var b strings.Builder
	b.WriteString(rep.state.describe())
	for _, dis := range rep.unexplained {
		fmt.Fprintf(&b, "\nverdict %q differs: candidates only Longhorn has [%s], only placement has [%s]",
			dis.check.name, orNone(dis.onlyLonghorn...), orNone(dis.onlyPlacement...))
		fmt.Fprintf(&b, "\n  Longhorn's errors: %s", orNone(dis.longhornErrors))
		fmt.Fprintf(&b, "\n  placement's verdict: %s", describeVerdict(dis.verdict))
	}
	return b.String()
}

// describeVerdict returns placement's verdict for people.
func describeVerdict(v placement.Verdict) string {
	var parts []string
	for _, c := range v.Candidates {
		parts = append(parts, c.NodeID+"/"+c.DiskUUID)
	}
	out := fmt.Sprintf("candidates [%s]", orNone(parts...))
	if v.Message != "" {
		out += "; " + v.Message
	}
	fails := make([]string, 0, len(v.Failures))
	for _, f := range v.Failures {
		fails = append(fails, f.String())
	}
	if len(fails) > 0 {
		out += "\n    failures: " + strings.Join(fails, "\n              ")
	}
	return out
}

// orNone returns the items joined by ", ", or "none" when there are none.
func orNone(items ...string) string {
	if len(items) == 0 || (len(items) == 1 && items[0] == "") {
		return "none"
	}
	return strings.Join(items, ", ")
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// TestDeliberateDifferences shows each deliberate difference on a cluster
// state built by hand: Longhorn and placement disagree there, and the
// difference, and no other, recognises every disagreement. A difference
// without such a state fails the test, so none is listed that cannot
// happen.
func TestDeliberateDifferences(t *testing.T) {
	d := newDifferential()
	// 55746744340825 × 884 / 100 is 492801219972893.14: Longhorn's float64
	// rounds the product down to a limit of 492801219972892.
	const maximum, overProvisioning, exactLimit = 55746744340825, "884", 492801219972893
	cases := map[string]*clusterState{
		"node selector on used nodes": handState(
			map[string]string{string(lhtypes.SettingNameReplicaSoftAntiAffinity): "true"},
			func(s *lhv1.VolumeSpec) { s.NodeSelector = []string{"fast"} },
			[]handReplica{{node: "node-1", disk: "node-1-disk-1-uuid"}},
			handNode("node-1", nil, 100*gib, 0),
		),
		"exact space arithmetic": handState(
			map[string]string{
				string(lhtypes.SettingNameStorageOverProvisioningPercentage): overProvisioning,
				string(lhtypes.SettingNameStorageMinimalAvailablePercentage): "0",
			},
			nil, nil,
			handNode("node-1", nil, maximum, exactLimit-10*gib),
		),
	}
	for _, dd := range d.differences {
		st, ok := cases[dd.name]
		if !ok {
			t.Errorf("deliberate difference %q has no state that shows it", dd.name)
			continue
		}
		t.Run(dd.name, func(t *testing.T) {
			if err := d.longhorn.load(st); err != nil {
				t.Fatal(err)
			}
			var seen int
			for _, c := range verdictChecks(st) {
				dis, err := d.compare(st, c, map[string]int{})
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if dis == nil {
					continue
				}
				seen++
				if got := d.deliberate(st, *dis); got != dd.name {
					t.Errorf("verdict %q: Longhorn only %v, placement only %v: recognised as %q, want %q\n%s",
						c.name, dis.onlyLonghorn, dis.onlyPlacement, got, dd.name, st.describe())
				}
			}
			if seen == 0 {
				t.Errorf("Longhorn and placement agree on every verdict of the state:\n%s", st.describe())
			}
		})
	}
}

// handReplica is a healthy replica of a hand-built state.
type handReplica struct{ node, disk string }

// handState returns a state of nodes with Longhorn's default settings
// changed by settings, a 10Gi data engine v1 volume changed by spec, and
// replicas of it.
func handState(settings map[string]string, spec func(*lhv1.VolumeSpec), replicas []handReplica, nodes ...*lhv1.Node) *clusterState {
	st := &clusterState{
		settings: map[string]string{string(lhtypes.SettingNameDefaultInstanceManagerImage): instanceManagerImage},
		nodes:    nodes,
		cordoned: map[string]bool{},
		now:      time.Now(),
		volume: &lhv1.Volume{
			ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: longhornNamespace},
			Spec: lhv1.VolumeSpec{Size: 10 * gib, NumberOfReplicas: 3, Image: engineImage, DataEngine: lhv1.DataEngineTypeV1,
				DataLocality: lhv1.DataLocalityDisabled, NodeSelector: []string{}, DiskSelector: []string{}},
			Status: lhv1.VolumeStatus{Robustness: lhv1.VolumeRobustnessHealthy},
		},
	}
	maps.Copy(st.settings, settings)
	if spec != nil {
		spec(&st.volume.Spec)
	}
	for i, hr := range replicas {
		r := newReplica(st.volume, fmt.Sprint(i+1))
		r.Spec.NodeID, r.Spec.DiskID, r.Spec.HealthyAt = hr.node, hr.disk, st.now.Add(-time.Hour).Format(time.RFC3339)
		st.replicas = append(st.replicas, r)
		for _, n := range nodes {
			for _, ds := range n.Status.DiskStatus {
				if n.Name == hr.node && ds.DiskUUID == hr.disk {
					ds.ScheduledReplica[r.Name] = r.Spec.VolumeSize
					ds.StorageScheduled += r.Spec.VolumeSize
				}
			}
		}
	}
	return st
}

// handNode returns a Ready, schedulable node with tags and one empty,
// Ready and schedulable filesystem disk "disk-1" of maximum bytes, all
// free, with scheduled bytes of other volumes.
func handNode(name string, tags []string, maximum, scheduled int64) *lhv1.Node {
	ready := lhv1.Condition{Type: lhv1.DiskConditionTypeReady, Status: lhv1.ConditionStatusTrue}
	schedulable := lhv1.Condition{Type: lhv1.DiskConditionTypeSchedulable, Status: lhv1.ConditionStatusTrue}
	return &lhv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: longhornNamespace},
		Spec: lhv1.NodeSpec{Name: name, AllowScheduling: true, Tags: append([]string{}, tags...), Disks: map[string]lhv1.DiskSpec{
			"disk-1": {Type: lhv1.DiskTypeFilesystem, Path: "/var/lib/longhorn/disk-1", DiskDriver: lhv1.DiskDriverNone,
				AllowScheduling: true, Tags: []string{}},
		}},
		Status: lhv1.NodeStatus{
			Conditions: []lhv1.Condition{nodeReadyCondition(true), nodeSchedulableCondition(false)},
			DiskStatus: map[string]*lhv1.DiskStatus{"disk-1": {
				DiskName: "disk-1", DiskPath: "/var/lib/longhorn/disk-1", DiskUUID: name + "-disk-1-uuid",
				Type: lhv1.DiskTypeFilesystem, FSType: "ext4",
				StorageMaximum: maximum, StorageAvailable: maximum, StorageScheduled: scheduled,
				ScheduledReplica: map[string]int64{"other-volume-r-1": scheduled},
				Conditions:       []lhv1.Condition{ready, schedulable},
			}},
		},
	}
}
