package main

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/longhorn/diskschedule/test/framework/scenario"
)

const gi = int64(1) << 30

// usage is four 400Gi disks holding the given numbers of 100Gi volumes.
func usage(volumes ...int64) []scenario.DiskUsage {
	var out []scenario.DiskUsage
	for i, n := range volumes {
		out = append(out, scenario.DiskUsage{Node: "node-" + string(rune('1'+i)), Disk: "disk-1", Persisted: n * 100 * gi, Limit: 400 * gi})
	}
	return out
}

func claimsRuns() (claimsRun, claimsRun) {
	with := claimsRun{refused: 12, res: scenario.ConcurrentPVCsResult{
		Claims: 20, Scheduled: 16, Unschedulable: 4, TimeToSettled: 1230 * time.Millisecond,
		Disks: usage(4, 4, 4, 4), LedgerVersions: 120,
	}}
	without := claimsRun{res: scenario.ConcurrentPVCsResult{
		Claims: 20, Scheduled: 19, Unschedulable: 1, TimeToSettled: 610 * time.Millisecond,
		Disks: usage(5, 7, 3, 4), LedgerVersions: 88,
	}}
	return with, without
}

func TestClaimsGrid(t *testing.T) {
	with, without := claimsRuns()
	var b strings.Builder
	claimsGrid(with, without).write(&b)
	want := `                ----- with the gate -----  --- without the gate ----
node    disk    persisted/limit  of limit  persisted/limit  of limit
node-1  disk-1      400Gi/400Gi      100%      500Gi/400Gi      125%
node-2  disk-1      400Gi/400Gi      100%      700Gi/400Gi      175%
node-3  disk-1      400Gi/400Gi      100%      300Gi/400Gi       75%
node-4  disk-1      400Gi/400Gi      100%      400Gi/400Gi      100%
`
	if b.String() != want {
		t.Errorf("claims grid:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestClaimsFacts(t *testing.T) {
	with, without := claimsRuns()
	d := &demo{}
	var b strings.Builder
	d.out = &b
	d.facts("with the gate", "without the gate", claimsFacts(with, without)...)
	want := `                                              with the gate      without the gate
volumes placed                                     16 of 20              19 of 20
replica writes refused by the gate                       12                     0
fullest disk, in % of its limit        100% (node-1/disk-1)  175% (node-2/disk-1)
disks over their limit                               0 of 4                2 of 4
time until every volume was decided                   1.23s                 0.61s
ledger versions watched; rules broken            120; never             88; never
`
	if b.String() != want {
		t.Errorf("claims facts:\n%s\nwant:\n%s", b.String(), want)
	}
	summary := claimsSummary(with, without)
	for _, part := range []string{"with the gate 16 of 20 volumes placed, fullest disk 100% (node-1/disk-1), 0 of 4 disks over their limit, 12 writes refused",
		"without it (Longhorn as it is today) 19 of 20 placed, fullest disk 175% (node-2/disk-1), 2 of 4 disks over their limit"} {
		if !strings.Contains(summary, part) {
			t.Errorf("summary %q lacks %q", summary, part)
		}
	}
}

func TestParseScenarios(t *testing.T) {
	all, err := parseScenarios("all")
	if err != nil || len(all) != len(scenarioNames()) {
		t.Errorf("parseScenarios(all) = %v, %v; want every scenario", all, err)
	}
	some, err := parseScenarios("claims, drain")
	if err != nil || len(some) != 2 || !some["claims"] || !some["drain"] {
		t.Errorf("parseScenarios(claims, drain) = %v, %v", some, err)
	}
	if _, err := parseScenarios("claims,nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("parseScenarios(claims,nope) = %v, want an error naming nope", err)
	}
}

func TestPlanSelects(t *testing.T) {
	d := &demo{}
	chosen, err := parseScenarios("claims")
	if err != nil {
		t.Fatal(err)
	}
	var sandboxes []string
	for _, s := range d.plan() {
		if runs := s.selected(chosen); len(runs) > 0 {
			sandboxes = append(sandboxes, s.topology+map[bool]string{true: " without the gate", false: ""}[s.noGate])
		}
	}
	want := "topology.yaml, topology.yaml without the gate"
	if got := strings.Join(sandboxes, ", "); got != want {
		t.Errorf("sandboxes for the claims: %s, want %s", got, want)
	}
}

func TestWrap(t *testing.T) {
	got := wrap("the quick brown fox jumps over the lazy dog", 15)
	want := []string{"the quick brown", "fox jumps over", "the lazy dog"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("wrap = %q, want %q", got, want)
	}
}

func TestRaceTextSaysHowTheNodesDiffer(t *testing.T) {
	res := scenario.Result{
		Nodes: []string{"node-1", "node-2", "node-3", "node-4"},
		OtherWork: map[string]corev1.ResourceList{
			"node-1": {corev1.ResourceCPU: resource.MustParse("48"), corev1.ResourceMemory: resource.MustParse("192Gi")},
			"node-3": {corev1.ResourceCPU: resource.MustParse("48"), corev1.ResourceMemory: resource.MustParse("192Gi")},
		},
	}
	text := raceText(res)
	for _, want := range []string{"request 48 CPUs and 192Gi of memory on node-1 and 48 CPUs and 192Gi of memory on node-3", "prefers node-2 and node-4 to node-1 and node-3"} {
		if !strings.Contains(text, want) {
			t.Errorf("the race's text does not say %q:\n%s", want, text)
		}
	}
	if text := raceText(scenario.Result{Nodes: res.Nodes}); !strings.Contains(text, "run no other work") {
		t.Errorf("the race's text on even nodes:\n%s", text)
	}
}

// The gate's calls are listed for every kind the gate answers, with a
// total, and what was answered at once is the rest of each kind's calls.
func TestWriteGateCalls(t *testing.T) {
	var b strings.Builder
	writeGateCalls(&b, map[string]gateCall{"replica": {calls: 120, roundTrips: 90}, "volume": {calls: 3, roundTrips: 3}})
	got := b.String()
	for _, want := range []string{
		"  replica            120                     90                 30\n",
		"  volume               3                      3                  0\n",
		"  backingimage         0                      0                  0\n",
		"  all                123                     93                 30\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table\n%s\ndoes not hold the line %q", got, want)
		}
	}
}
