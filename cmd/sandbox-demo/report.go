package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/longhorn/diskschedule/test/framework/scenario"
)

// progress prints a progress line, with the time since the start.
func (d *demo) progress(format string, args ...any) {
	fmt.Fprintf(d.out, "  [%6s] %s\n", seconds(time.Since(d.start)), fmt.Sprintf(format, args...))
}

// section prints a scenario's title and what it does.
func (d *demo) section(title string, what ...string) {
	fmt.Fprintf(d.out, "\n== %s ==\n\n", title)
	for _, line := range what {
		fmt.Fprintln(d.out, line)
	}
	fmt.Fprintln(d.out)
}

func (d *demo) intro() {
	fmt.Fprint(d.out, `diskschedule demo: the Longhorn scheduler extender's test plan

Every sandbox runs longhorn-manager v1.12.0's own controllers, unmodified, on
a simulated data plane. Each pod scenario runs twice in the same sandbox: once with pods
that ask for the longhorn.io/scheduler-extender resource, so kube-scheduler
asks the extender which nodes can hold their volumes, and once without it, so
kube-scheduler decides alone. The claims beyond capacity (scenario 3) run
twice too: with the admission gate, which makes each of Longhorn's replica
placements ask the disk's ledger first, and in a second sandbox without it,
as Longhorn runs today. Volumes are 100Gi, one replica, best-effort
data locality: the replica goes to the pod's node when that node's disk has
room, else to another node, and the pod then reads its data over the network.
Every disk has a ledger (a DiskSchedule) that grants its space; "scheduled/
limit" is what the ledger granted of what the disk may hold, "granted/
rejected" counts the replica requests it granted and refused during the run
(a refused request lost a race for the space and is placed again elsewhere),
and "reserved" counts the reservations the extender made for pods it placed.
Longhorn places a best-effort volume's replica only once the volume is
attached, after its pod is bound, so the extender's reservation usually
comes first and Longhorn's placement takes it over; either way the space is
counted once.

`)
}

// ledgerCells formats a ledger row: scheduled/limit, granted/rejected, reserved.
func ledgerCells(row scenario.LedgerRow) []string {
	return []string{scheduledOfLimit(row), fmt.Sprintf("%d/%d", row.Granted, row.Rejected), fmt.Sprint(row.Reserved)}
}

// scheduledOfLimit formats what a ledger granted of its limit, "400Gi/400Gi".
func scheduledOfLimit(row scenario.LedgerRow) string {
	return scenario.Bytes(row.Scheduled) + "/" + scenario.Bytes(row.Limit)
}

// rowsByDisk indexes ledger rows by node and disk.
func rowsByDisk(rows []scenario.LedgerRow) map[[2]string]scenario.LedgerRow {
	out := map[[2]string]scenario.LedgerRow{}
	for _, r := range rows {
		out[[2]string{r.Node, r.Disk}] = r
	}
	return out
}

// disks returns every (node, disk) of the rows, in order.
func disks(rows ...[]scenario.LedgerRow) [][2]string {
	seen := map[[2]string]bool{}
	var out [][2]string
	for _, rs := range rows {
		for _, r := range rs {
			k := [2]string{r.Node, r.Disk}
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0] != out[j][0] {
			return out[i][0] < out[j][0]
		}
		return out[i][1] < out[j][1]
	})
	return out
}

// sideBySide prints, per disk, the pods on its node and its ledger, with
// and without the extender; pods shows on a node's first disk only.
func (d *demo) sideBySide(with, without scenario.Result, pods func(res scenario.Result, node string) string) {
	g := &grid{
		leftAligned: 2,
		groups:      []span{{"with the extender", 2, 6}, {"without the extender", 6, 10}},
		header: []string{"node", "disk", "pods", "scheduled/limit", "granted/rejected", "reserved",
			"pods", "scheduled/limit", "granted/rejected", "reserved"},
	}
	w, wo := rowsByDisk(with.Ledgers), rowsByDisk(without.Ledgers)
	last := ""
	for _, k := range disks(with.Ledgers, without.Ledgers) {
		podsWith, podsWithout := "", ""
		if k[0] != last {
			podsWith, podsWithout = pods(with, k[0]), pods(without, k[0])
			last = k[0]
		}
		g.add(append(append([]string{k[0], k[1], podsWith}, ledgerCells(w[k])...), append([]string{podsWithout}, ledgerCells(wo[k])...)...)...)
	}
	g.write(d.out)
}

// podCount is the pods column: how many pods are on the node.
func podCount(res scenario.Result, node string) string { return fmt.Sprint(res.PodsPerNode[node]) }

// facts prints labelled values under two titles: with and without the
// extender, or the gate.
func (d *demo) facts(with, without string, rows ...[3]string) {
	g := &grid{leftAligned: 1, header: []string{"", with, without}}
	for _, r := range rows {
		g.add(r[0], r[1], r[2])
	}
	g.write(d.out)
}

// extenderFacts prints labelled values with and without the extender.
func (d *demo) extenderFacts(rows ...[3]string) {
	d.facts("with the extender", "without the extender", rows...)
}

func (d *demo) reportRace(with, without scenario.Result) {
	d.section("1. The race: a StatefulSet of 16 pods created at once, 4 nodes with one 400Gi disk each",
		wrap(raceText(with), 86)...)
	d.sideBySide(with, without, podCount)
	fmt.Fprintln(d.out)
	d.extenderFacts(
		[3]string{"pods per node", with.Distribution(), without.Distribution()},
		[3]string{"time until every pod has a node", seconds(with.TimeToAllScheduled), seconds(without.TimeToAllScheduled)},
		[3]string{"time until every pod runs", seconds(with.TimeToAllRunning), seconds(without.TimeToAllRunning)},
		[3]string{"time until the StatefulSet is ready", seconds(with.TimeToReady), seconds(without.TimeToReady)},
		[3]string{"pods whose data is on another node", fmt.Sprint(len(with.RemoteData)), fmt.Sprint(len(without.RemoteData))},
		[3]string{"ledger versions watched; over the limit", ledgerWatch(with), ledgerWatch(without)},
	)
	line := fmt.Sprintf("Race: with the extender the pods per node were %s (%s); without it %s (%s). "+
		"Every pod had a node after %s with, %s without (%s), and ran after %s with, %s without (%s); the StatefulSet was ready after %s with, %s without.",
		with.Distribution(), evenness(with), without.Distribution(), evenness(without),
		seconds(with.TimeToAllScheduled), seconds(without.TimeToAllScheduled), ratio(with.TimeToAllScheduled, without.TimeToAllScheduled),
		seconds(with.TimeToAllRunning), seconds(without.TimeToAllRunning), ratio(with.TimeToAllRunning, without.TimeToAllRunning),
		seconds(with.TimeToReady), seconds(without.TimeToReady))
	d.summaries = append(d.summaries, line)
}

// raceText says what the race does, how its nodes were made uneven and
// what kube-scheduler sees of the disks either way.
func raceText(res scenario.Result) string {
	uneven := "The nodes run no other work, so kube-scheduler's scores do not tell them apart."
	if len(res.OtherWork) > 0 {
		var busy, idle []string
		for _, n := range res.Nodes {
			if _, ok := res.OtherWork[n]; ok {
				busy = append(busy, n)
			} else {
				idle = append(idle, n)
			}
		}
		uneven = fmt.Sprintf("The nodes are not alike, as in a real cluster: before the race, pods of another app "+
			"(placed on their nodes directly, no volume) request %s, so kube-scheduler's default scoring "+
			"(least allocated, balanced allocation) prefers %s to %s, against its default spreading of the "+
			"StatefulSet's pods over nodes and zones.",
			scenario.DescribeRequests(res.OtherWork), strings.Join(idle, " and "), strings.Join(busy, " and "))
	}
	return "A StatefulSet of sixteen replicas with parallel pod management, each with its own 100Gi claim " +
		"of a WaitForFirstConsumer class: kube-controller-manager creates every pod and claim at the same moment, " +
		"kube-scheduler chooses each pod's node and the provisioner then creates the volume. The disks hold exactly " +
		"sixteen such volumes, four per node, so a node that gets a fifth pod cannot hold its data. " + uneven +
		" Without the extender kube-scheduler checks each claim against the CSIStorageCapacity objects Longhorn's " +
		"CSI driver publishes (csi-storage-capacity-tracking on): refreshed once a minute and after each volume is " +
		"provisioned, and counting a volume only once Longhorn has placed its replica, they still show every disk " +
		"empty while the sixteen pods are placed. With the extender, kube-scheduler asks it which nodes' disks can " +
		"hold each pod's volume, which it answers from the disks' ledgers and the pods it let through whose space " +
		"is not reserved yet, so no two pods are given the same bytes."
}

// wrap breaks text into lines of at most width characters, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// evenness says how the pods spread and where their data ended up.
func evenness(res scenario.Result) string {
	most := res.MaxPodsPerNode()
	least := most
	for _, n := range res.Nodes {
		least = min(least, res.PodsPerNode[n])
	}
	spread := fmt.Sprintf("every node exactly %d", most)
	if least != most {
		spread = fmt.Sprintf("from %d to %d per node", least, most)
	}
	switch n := len(res.RemoteData); n {
	case 0:
		return spread + ", every pod's data on its node"
	case 1:
		return spread + ", 1 pod's data on another node"
	default:
		return fmt.Sprintf("%s, %d pods' data on other nodes", spread, n)
	}
}

func (d *demo) reportRestart(with, without scenario.RestartResult) {
	d.section("2. Restart: the race's StatefulSet deleted and created again",
		"The StatefulSet of the race is created; its volumes are set to be retained, then it",
		"is deleted with its pods and, once they are gone, created again: its controller",
		"re-creates the pods with the same names on the claims it kept. Each pod should come",
		"back to the node that holds its data. Pods per node before and after, and each",
		"disk's ledger after the restart:")
	d.beforeAfter(with.Before, with.After, without.Before, without.After)
	fmt.Fprintln(d.out)
	d.extenderFacts(
		[3]string{"pods that came back on another node", fmt.Sprintf("%d of %d", len(with.Moved), len(with.After.PodNodes)),
			fmt.Sprintf("%d of %d", len(without.Moved), len(without.After.PodNodes))},
		[3]string{"pods whose data is on another node after", fmt.Sprint(len(with.After.RemoteData)), fmt.Sprint(len(without.After.RemoteData))},
		[3]string{"time until every restarted pod has a node", seconds(with.After.TimeToAllScheduled), seconds(without.After.TimeToAllScheduled)},
		[3]string{"time until the re-created StatefulSet is ready", seconds(with.After.TimeToReady), seconds(without.After.TimeToReady)},
		[3]string{"ledger versions watched; over the limit", ledgerWatch(both(with.Before, with.After)), ledgerWatch(both(without.Before, without.After))},
	)
	if len(without.Moved) > 0 {
		fmt.Fprintf(d.out, "\nWithout the extender: %s\n", strings.Join(without.Moved, ", "))
	}
	d.summaries = append(d.summaries, fmt.Sprintf("Restart: with the extender %d of %d pods came back on another node; without it %d of %d, and %d pods' data is then on another node.",
		len(with.Moved), len(with.After.PodNodes), len(without.Moved), len(without.After.PodNodes), len(without.After.RemoteData)))
}

// beforeAfter prints, per disk, the pods on its node before and after, and
// its ledger after, with and without the extender.
func (d *demo) beforeAfter(withBefore, withAfter, withoutBefore, withoutAfter scenario.Result) {
	g := &grid{
		leftAligned: 2,
		groups:      []span{{"with the extender", 2, 5}, {"without the extender", 5, 8}},
		header:      []string{"node", "disk", "before", "after", "scheduled/limit", "before", "after", "scheduled/limit"},
	}
	w, wo := rowsByDisk(withAfter.Ledgers), rowsByDisk(withoutAfter.Ledgers)
	last := ""
	for _, k := range disks(withAfter.Ledgers, withoutAfter.Ledgers) {
		pods := [4]string{}
		if k[0] != last {
			pods = [4]string{fmt.Sprint(withBefore.PodsPerNode[k[0]]), fmt.Sprint(withAfter.PodsPerNode[k[0]]),
				fmt.Sprint(withoutBefore.PodsPerNode[k[0]]), fmt.Sprint(withoutAfter.PodsPerNode[k[0]])}
			last = k[0]
		}
		g.add(k[0], k[1], pods[0], pods[1], scheduledOfLimit(w[k]), pods[2], pods[3], scheduledOfLimit(wo[k]))
	}
	g.write(d.out)
}

func (d *demo) reportClaims(with, without claimsRun) {
	d.section(fmt.Sprintf("3. More claims than space, all at once: %d claims of 100Gi, with and without the gate", with.res.Claims),
		fmt.Sprintf("%d claims of 100Gi of the class %s (data locality disabled, so each volume is", with.res.Claims, scenario.DisabledLocalityClass),
		"placed as soon as it can be) are created on four 400Gi disks, which hold sixteen, while",
		"every node is cordoned: Longhorn places nothing on a cordoned node. Then every node is",
		"uncordoned at once, and Longhorn's volume controller places all the volumes at the same",
		"moment, each worker from its own cache, with no lock, as when claims arrive faster than",
		"it places them. Here that controller is longhorn-manager v1.12.0's own, unmodified, one",
		"per node, each with its own cache. No pod, so the extender plays no part. With the gate each",
		"placement asks the disk's ledger first; without it (a second sandbox, Longhorn as it is",
		"today) nothing stops two placements from taking the same bytes. What Longhorn persisted",
		"on each disk (its replicas' volume sizes) against the disk's limit, once every volume",
		"was decided:")
	claimsGrid(with, without).write(d.out)
	fmt.Fprintln(d.out)
	d.facts("with the gate", "without the gate", claimsFacts(with, without)...)
	fmt.Fprintln(d.out, `
With the gate, a refused placement leaves the replica unscheduled, and Longhorn places it
again after a backoff until its own view shows every disk full. Without it, the ledgers can
only adopt what Longhorn persisted, and mark the disks over their limit Overcommitted.`)
	if msg := with.res.UnschedulableMessage; msg != "" {
		fmt.Fprintf(d.out, "\nWith the gate, a volume that did not fit says: %s\n", msg)
	}
	d.summaries = append(d.summaries, claimsSummary(with, without))
}

// claimsGrid is, per disk, what Longhorn persisted there against the
// disk's limit, with and without the gate.
func claimsGrid(with, without claimsRun) *grid {
	g := &grid{
		leftAligned: 2,
		groups:      []span{{"with the gate", 2, 4}, {"without the gate", 4, 6}},
		header:      []string{"node", "disk", "persisted/limit", "of limit", "persisted/limit", "of limit"},
	}
	w, wo := usageByDisk(with.res.Disks), usageByDisk(without.res.Disks)
	for _, k := range usageDisks(with.res.Disks, without.res.Disks) {
		g.add(k[0], k[1], persistedOfLimit(w[k]), percent(w[k]), persistedOfLimit(wo[k]), percent(wo[k]))
	}
	return g
}

// claimsFacts are the claims' outcomes with and without the gate.
func claimsFacts(with, without claimsRun) [][3]string {
	return [][3]string{
		{"volumes placed", placedOf(with.res), placedOf(without.res)},
		{"replica writes refused by the gate", fmt.Sprint(with.refused), fmt.Sprint(without.refused)},
		{"fullest disk, in % of its limit", fullest(with.res.Disks), fullest(without.res.Disks)},
		{"disks over their limit", overOf(with.res.Disks), overOf(without.res.Disks)},
		{"time until every volume was decided", seconds(with.res.TimeToSettled), seconds(without.res.TimeToSettled)},
		{"ledger versions watched; rules broken", ledgerRules(with.res), ledgerRules(without.res)},
	}
}

// claimsSummary is the claims' line of the summary.
func claimsSummary(with, without claimsRun) string {
	return fmt.Sprintf("Claims beyond capacity: with the gate %s volumes placed, fullest disk %s, %s disks over their limit, %d writes refused; "+
		"without it (Longhorn as it is today) %s placed, fullest disk %s, %s disks over their limit.",
		placedOf(with.res), fullest(with.res.Disks), overOf(with.res.Disks), with.refused,
		placedOf(without.res), fullest(without.res.Disks), overOf(without.res.Disks))
}

// placedOf formats the volumes placed of the claims, "16 of 20".
func placedOf(res scenario.ConcurrentPVCsResult) string {
	return fmt.Sprintf("%d of %d", res.Scheduled, res.Claims)
}

// fullest formats the fullest disk, "175% (node-3/disk-1)".
func fullest(disks []scenario.DiskUsage) string {
	u, ok := scenario.Fullest(disks)
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%s (%s/%s)", percent(u), u.Node, u.Disk)
}

// overOf formats the disks over their limit, "3 of 4".
func overOf(disks []scenario.DiskUsage) string {
	return fmt.Sprintf("%d of %d", scenario.OverLimit(disks), len(disks))
}

// percent formats a disk's usage in percent of its limit, "125%".
func percent(u scenario.DiskUsage) string { return fmt.Sprintf("%.0f%%", u.Percent()) }

// persistedOfLimit formats what is persisted on a disk of its limit, "500Gi/400Gi".
func persistedOfLimit(u scenario.DiskUsage) string {
	return scenario.Bytes(u.Persisted) + "/" + scenario.Bytes(u.Limit)
}

// ledgerRules formats how many ledger versions were watched and how many
// broke the ledger's rules.
func ledgerRules(res scenario.ConcurrentPVCsResult) string {
	if len(res.Violations) == 0 {
		return fmt.Sprintf("%d; never", res.LedgerVersions)
	}
	return fmt.Sprintf("%d; %d times", res.LedgerVersions, len(res.Violations))
}

// usageByDisk indexes disk usages by node and disk.
func usageByDisk(disks []scenario.DiskUsage) map[[2]string]scenario.DiskUsage {
	out := map[[2]string]scenario.DiskUsage{}
	for _, u := range disks {
		out[[2]string{u.Node, u.Disk}] = u
	}
	return out
}

// usageDisks returns every (node, disk) of the usages, in order.
func usageDisks(usages ...[]scenario.DiskUsage) [][2]string {
	var rows [][]scenario.LedgerRow
	for _, us := range usages {
		rs := make([]scenario.LedgerRow, 0, len(us))
		for _, u := range us {
			rs = append(rs, scenario.LedgerRow{Node: u.Node, Disk: u.Disk})
		}
		rows = append(rows, rs)
	}
	// disks orders ledger rows by node and disk; only those are set.
	return disks(rows...)
}

func (d *demo) reportMultiPVC(with, without scenario.MultiPVCResult) {
	d.section("4. One pod, four claims: nodes with 1, 2, 3 and 4 disks of 100Gi",
		"A pod with four 100Gi claims fits only on node-4, the one node with four disks: each",
		"disk holds one volume. kube-scheduler alone checks each claim by itself and sees a",
		"node as one pool; the extender packs the pod's volumes onto each node's disks together.")
	d.sideBySide(with.Result, without.Result, func(res scenario.Result, node string) string {
		if res.PodsPerNode[node] > 0 {
			return "web-0"
		}
		return "-"
	})
	fmt.Fprintln(d.out)
	d.extenderFacts(
		[3]string{"the pod's node", with.Node, without.Node},
		[3]string{"its volumes with the replica on another node", fmt.Sprintf("%d of 4", with.RemoteVolumes), fmt.Sprintf("%d of 4", without.RemoteVolumes)},
		[3]string{"time until the pod runs", seconds(with.TimeToAllRunning), seconds(without.TimeToAllRunning)},
		[3]string{"ledger versions watched; over the limit", ledgerWatch(with.Result), ledgerWatch(without.Result)},
	)
	d.summaries = append(d.summaries, fmt.Sprintf("Multi-PVC: with the extender the pod went to %s with %d of its 4 volumes elsewhere; without it to %s with %d of 4 elsewhere.",
		with.Node, with.RemoteVolumes, without.Node, without.RemoteVolumes))
}

func (d *demo) reportDrain(with, without scenario.DrainResult) {
	d.section("5. Drain: 4 pods on node-1, two nodes with 400Gi, two with 99Gi",
		"A StatefulSet of four pods with a 100Gi volume each starts on node-1 (the other nodes",
		"cordoned). Every node is uncordoned, then node-1 is drained as kubectl drain does it:",
		"cordoned, its pods evicted through the eviction API, and the StatefulSet controller",
		"re-creates them. Their volumes can follow them only to node-2, the other 400Gi node;",
		"on a 99Gi node a pod runs, but its data stays behind on node-1, and Longhorn then",
		"keeps node-1's instance manager, through its PodDisruptionBudget, so the drain does",
		"not end while node-1 holds a volume's last replica. Pods per node before and after",
		"the drain, and each disk's ledger after it:")
	d.beforeAfter(with.Before, with.After, without.Before, without.After)
	fmt.Fprintln(d.out)
	d.extenderFacts(
		[3]string{"pods whose data stayed on another node", fmt.Sprint(len(with.After.RemoteData)), fmt.Sprint(len(without.After.RemoteData))},
		[3]string{"time until every moved pod runs", seconds(with.After.TimeToAllRunning), seconds(without.After.TimeToAllRunning)},
		[3]string{"time until the StatefulSet is ready again", seconds(with.After.TimeToReady), seconds(without.After.TimeToReady)},
		[3]string{"time until the drain ended", drainEnded(with), drainEnded(without)},
		[3]string{"ledger versions watched; over the limit", ledgerWatch(both(with.Before, with.After)), ledgerWatch(both(without.Before, without.After))},
	)
	for _, r := range []struct {
		what string
		res  scenario.DrainResult
	}{{"with the extender", with}, {"without the extender", without}} {
		for _, b := range r.res.Blocked {
			fmt.Fprintf(d.out, "\nThe drain %s left %s\n", r.what, b)
		}
	}
	d.summaries = append(d.summaries, fmt.Sprintf("Drain: with the extender the pods went %s, %d with data left behind, the drain %s; without it %s, %d with data left behind, the drain %s.",
		placement(with.After), len(with.After.RemoteData), drainSummary(with), placement(without.After), len(without.After.RemoteData), drainSummary(without)))
}

// drainEnded is how long the drain took, or that it did not end.
func drainEnded(res scenario.DrainResult) string {
	if len(res.Blocked) > 0 {
		return "did not end"
	}
	return seconds(res.Drained)
}

// drainSummary says whether the drain ended, and when.
func drainSummary(res scenario.DrainResult) string {
	switch len(res.Blocked) {
	case 0:
		return "ended after " + seconds(res.Drained)
	case 1:
		return "held by one pod"
	}
	return fmt.Sprintf("held by %d pods", len(res.Blocked))
}

// placement lists the nodes that got pods: "4 to node-2" or "2 to node-2, 1 to node-3".
func placement(res scenario.Result) string {
	var parts []string
	for _, n := range res.Nodes {
		if c := res.PodsPerNode[n]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", c, n))
		}
	}
	return strings.Join(parts, ", ")
}

func (d *demo) summary() {
	fmt.Fprintf(d.out, "\n== Summary (%s in all) ==\n\n", seconds(time.Since(d.start)))
	for _, s := range d.summaries {
		fmt.Fprintln(d.out, "- "+s)
	}
	if calls, err := gateCalls(); err != nil {
		d.broken = append(d.broken, err.Error())
	} else {
		fmt.Fprintln(d.out, "\nLonghorn's writes the admission gate answered in all the sandboxes with the gate, by kind, and how many\n"+
			"needed a ledger round trip (a request written into a DiskSchedule and the leader's decision awaited):")
		writeGateCalls(d.out, calls)
	}
	switch {
	case len(d.broken) > 0:
	case d.ungated:
		fmt.Fprintln(d.out, "\nEvery scenario ran to the end and no ledger ever broke its rules: none granted more than its limit,\n"+
			"except what Longhorn placed without the gate, which the ledgers adopted and marked Overcommitted.")
	default:
		fmt.Fprintln(d.out, "\nEvery scenario ran to the end and no ledger ever granted more than its limit.")
	}
}

// both adds up the ledger monitor's findings of two runs.
func both(a, b scenario.Result) scenario.Result {
	return scenario.Result{LedgerVersions: a.LedgerVersions + b.LedgerVersions, Violations: append(append([]string(nil), a.Violations...), b.Violations...)}
}

// ledgerWatch formats how many ledger versions were watched and whether any
// was over its limit.
func ledgerWatch(res scenario.Result) string {
	if len(res.Violations) == 0 {
		return fmt.Sprintf("%d; never", res.LedgerVersions)
	}
	return fmt.Sprintf("%d; %d times", res.LedgerVersions, len(res.Violations))
}

// seconds formats a duration in seconds, "2.56s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// ratio says how many times longer a is than b.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "no ratio"
	}
	return fmt.Sprintf("%.1f×", a.Seconds()/b.Seconds())
}
