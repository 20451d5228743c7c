package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/longhorn/diskschedule/test/framework/scenario"
)

// fillSettle is how long the fill watches the volumes once every write
// ended, for Longhorn's controllers to act on the replicas that failed.
const fillSettle = 20

// fillGated runs the fill in the sandbox with the gate, and keeps the
// result for the run without it.
func (d *demo) fillGated(ctx context.Context, cl *cluster) error {
	res, err := d.fill(ctx, cl, "fill-with-gate")
	if err != nil {
		return err
	}
	d.fillWithGate = &res
	return nil
}

// fillUngated runs the fill in the sandbox without the gate and reports
// both runs side by side.
func (d *demo) fillUngated(ctx context.Context, cl *cluster) error {
	res, err := d.fill(ctx, cl, "fill-without-gate")
	if err != nil {
		return err
	}
	if d.fillWithGate == nil {
		return fmt.Errorf("disks that fill: the run with the gate did not complete, nothing to compare with")
	}
	d.reportFill(*d.fillWithGate, res)
	return nil
}

// fill places the claims beyond capacity and has a pod write each volume
// full (scenario.Fill), then cleans up.
func (d *demo) fill(ctx context.Context, cl *cluster, namespace string) (scenario.FillResult, error) {
	o := d.common(namespace)
	res, err := scenario.Fill(ctx, cl.c, scenario.FillOptions{
		ConcurrentPVCsOptions: scenario.ConcurrentPVCsOptions{Common: o, Claims: claimsBeyondCapacity, Size: "100Gi", HoldPlacement: true},
		DiskBytes:             cl.sb.DiskBytes,
		Settle:                fillSettle * time.Second,
	})
	if err != nil {
		return res, err
	}
	for _, v := range res.Claims.Violations {
		d.broken = append(d.broken, namespace+": "+v)
	}
	return res, d.finalCleanup(ctx, cl, o)
}

// reportFill prints the fill with and without the gate side by side.
func (d *demo) reportFill(with, without scenario.FillResult) {
	d.section(fmt.Sprintf("7. Disks that fill: %d claims of 100Gi placed at once, then each pod writes its volume full", with.Pods),
		"The claims beyond capacity of section 3 once more, in sandboxes of their own, and then",
		"a pod per claim that writes its volume full (sandbox.diskschedule.longhorn.io/write:",
		"100Gi). The simulated data plane counts the bytes each replica holds against its disk's",
		"size; a write past a full disk fails with ENOSPC in that replica, the engine reports it",
		"in ERR, and Longhorn's own controllers mark it failed and fault or rebuild the volume as",
		"they do. With the gate no disk was granted more than it holds, so every write lands;",
		"without it, the disks Longhorn's racing workers overfilled run out of bytes. Each disk's",
		"bytes against its size once every write ended:")
	fillGrid(with, without).write(d.out)
	fmt.Fprintln(d.out)
	d.facts("with the gate", "without the gate", fillFacts(with, without)...)
	d.summaries = append(d.summaries, fmt.Sprintf("Disks that fill: with the gate %d of %d pods wrote their volumes full, %d failed for space, %d replicas failed; "+
		"without it %d wrote them full, %d failed for space, %d replicas failed, %d volumes faulted.",
		with.Written, with.Running, with.WriteFailed, with.ReplicasFailed,
		without.Written, without.WriteFailed, without.ReplicasFailed, without.EverFaulted))
}

// fillGrid is, per disk, the bytes written there against its size, with
// and without the gate.
func fillGrid(with, without scenario.FillResult) *grid {
	g := &grid{
		leftAligned: 2,
		groups:      []span{{"with the gate", 2, 4}, {"without the gate", 4, 6}},
		header:      []string{"node", "disk", "written/size", "full", "written/size", "full"},
	}
	w, wo := fillByDisk(with.Disks), fillByDisk(without.Disks)
	var keys [][2]string
	seen := map[[2]string]bool{}
	for _, disks := range [][]scenario.DiskFill{with.Disks, without.Disks} {
		for _, f := range disks {
			if k := [2]string{f.Node, f.Disk}; !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	for _, k := range keys {
		g.add(k[0], k[1], writtenOfSize(w[k]), fullText(w[k]), writtenOfSize(wo[k]), fullText(wo[k]))
	}
	return g
}

func fillByDisk(disks []scenario.DiskFill) map[[2]string]scenario.DiskFill {
	out := map[[2]string]scenario.DiskFill{}
	for _, f := range disks {
		out[[2]string{f.Node, f.Disk}] = f
	}
	return out
}

// writtenOfSize formats a disk's bytes against its size, "400Gi/400Gi".
func writtenOfSize(f scenario.DiskFill) string {
	if f.Size == 0 {
		return "–"
	}
	return binary(f.Held) + "/" + binary(f.Size)
}

func fullText(f scenario.DiskFill) string {
	if f.Size > 0 && f.Full() {
		return "full"
	}
	return ""
}

// binary formats bytes as a binary quantity (100Gi).
func binary(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }

// fillFacts are the fill's outcomes with and without the gate.
func fillFacts(with, without scenario.FillResult) [][3]string {
	ran := func(r scenario.FillResult) string { return fmt.Sprintf("%d of %d", r.Running, r.Pods) }
	vols := func(r scenario.FillResult) string {
		return fmt.Sprintf("%d / %d / %d", r.Healthy, r.Degraded, r.Faulted)
	}
	full := func(r scenario.FillResult) string {
		n := 0
		for _, f := range r.Disks {
			if f.Full() {
				n++
			}
		}
		return fmt.Sprintf("%d of %d", n, len(r.Disks))
	}
	return [][3]string{
		{"volumes placed", placedOf(with.Claims), placedOf(without.Claims)},
		{"pods running (their volumes attached)", ran(with), ran(without)},
		{"pods that wrote their volume full", fmt.Sprint(with.Written), fmt.Sprint(without.Written)},
		{"pods whose writes failed (ENOSPC)", fmt.Sprint(with.WriteFailed), fmt.Sprint(without.WriteFailed)},
		{"replicas Longhorn marked failed", fmt.Sprint(with.ReplicasFailed), fmt.Sprint(without.ReplicasFailed)},
		{"volumes ever degraded / faulted", fmt.Sprintf("%d / %d", with.EverDegraded, with.EverFaulted), fmt.Sprintf("%d / %d", without.EverDegraded, without.EverFaulted)},
		{fmt.Sprintf("volumes healthy / degraded / faulted after %d s", fillSettle), vols(with), vols(without)},
		{"disks full", full(with), full(without)},
		{"time until every write ended", seconds(with.TimeToWritten), seconds(without.TimeToWritten)},
		{"last change of a volume's health", seconds(with.LastChange), seconds(without.LastChange)},
	}
}
