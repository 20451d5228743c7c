package backingimage

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

// maxListed bounds how many refused disks a condition message names.
const maxListed = 16

// choiceInput is everything the choice of disks for new copies depends on.
type choiceInput struct {
	// Image is the backing image's name, its key in every ledger.
	Image string
	// Size is the image's size: the bytes each copy requests.
	Size int64
	// NodeSelector and DiskSelector are the image's selectors.
	NodeSelector, DiskSelector []string
	// Settings are the scheduling settings (allow-empty selectors, cordon).
	Settings settings.Scheduling
	// Nodes are the Longhorn nodes.
	Nodes []longhornv1.Node
	// Ledgers are the DiskSchedules by name (disk UUID).
	Ledgers map[string]*longhornv1.DiskSchedule
	// Holding names the disks that hold, or are about to give up, a copy of
	// the image; none of them takes a new one.
	Holding map[string]bool
}

// candidate is a disk that can take a copy of the image.
type candidate struct {
	// UUID names the disk and its ledger.
	UUID string
	// Free is what the disk's ledger can still grant (ledger.Free).
	Free int64
}

// refusal says why a node or one of its disks cannot take a copy.
type refusal struct {
	// Where is "node <name>" or "<node>/<disk> (<uuid>)".
	Where string
	// Why is the reason, with the numbers.
	Why string
}

func (r refusal) String() string { return r.Where + ": " + r.Why }

// selection is the outcome of choose.
type selection struct {
	// Chosen are the disks picked for new copies, best first.
	Chosen []candidate
	// Holding counts the disks skipped because they hold a copy already.
	Holding int
	// Refused lists, by node then disk name, why the other disks cannot.
	Refused []refusal
}

// choose picks up to n disks for new copies of the image: eligible disks
// whose ledger can still grant the image's size, most free first, ties by
// UUID, at most one copy per disk. It is deterministic.
func choose(in choiceInput, n int) selection {
	var sel selection
	var cands []candidate
	nodes := slices.Clone(in.Nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for i := range nodes {
		node := &nodes[i]
		if why := nodeRefusal(node, in); why != "" {
			sel.Refused = append(sel.Refused, refusal{Where: "node " + node.Name, Why: why})
			continue
		}
		names := make([]string, 0, len(node.Spec.Disks))
		for name := range node.Spec.Disks {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			c, r, ok := diskCandidate(node, name, in)
			switch {
			case ok:
				cands = append(cands, c)
			case r != nil:
				sel.Refused = append(sel.Refused, *r)
			default:
				sel.Holding++
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].Free != cands[j].Free {
			return cands[i].Free > cands[j].Free
		}
		return cands[i].UUID < cands[j].UUID
	})
	sel.Chosen = cands[:min(max(n, 0), len(cands))]
	return sel
}

// nodeRefusal returns why no disk of node can take a copy, or "".
func nodeRefusal(node *longhornv1.Node, in choiceInput) string {
	switch {
	case !meta.IsStatusConditionTrue(node.Status.Conditions, longhornv1.NodeConditionReady):
		return "not ready"
	case !meta.IsStatusConditionTrue(node.Status.Conditions, longhornv1.NodeConditionSchedulable):
		return "not schedulable"
	case !node.Spec.AllowScheduling:
		return "scheduling is disabled"
	case node.Spec.EvictionRequested:
		return "eviction is requested"
	case !placement.TagsMatch(node.Spec.Tags, in.NodeSelector, in.Settings.AllowEmptyNodeSelectorVolume):
		return tagsRefusal(node.Spec.Tags, in.NodeSelector, longhornv1.SettingAllowEmptyNodeSelectorVolume)
	}
	return ""
}

// diskCandidate returns the named disk of node as a candidate, or why it is
// not one; a disk that already holds the image is neither.
func diskCandidate(node *longhornv1.Node, name string, in choiceInput) (candidate, *refusal, bool) {
	spec := node.Spec.Disks[name]
	status := node.Status.DiskStatus[name]
	if status == nil || status.DiskUUID == "" {
		return candidate{}, &refusal{Where: node.Name + "/" + name, Why: "no disk UUID yet"}, false
	}
	uuid := status.DiskUUID
	if in.Holding[uuid] {
		return candidate{}, nil, false
	}
	refuse := func(format string, args ...any) (candidate, *refusal, bool) {
		return candidate{}, &refusal{Where: fmt.Sprintf("%s/%s (%s)", node.Name, name, uuid), Why: fmt.Sprintf(format, args...)}, false
	}
	ds := in.Ledgers[uuid]
	switch {
	case !spec.AllowScheduling:
		return refuse("scheduling is disabled")
	case spec.EvictionRequested:
		return refuse("eviction is requested")
	case !meta.IsStatusConditionTrue(status.Conditions, longhornv1.DiskConditionSchedulable):
		return refuse("not schedulable")
	case !placement.TagsMatch(spec.Tags, in.DiskSelector, in.Settings.AllowEmptyDiskSelectorVolume):
		return refuse("%s", tagsRefusal(spec.Tags, in.DiskSelector, longhornv1.SettingAllowEmptyDiskSelectorVolume))
	case ds == nil || ds.Spec.NodeID != node.Name:
		return refuse("no DiskSchedule")
	case lingers(ds, in.Image):
		// The ledger still shows the request this image gave up here; a new
		// request now could meet that stale decision.
		return refuse("its ledger still holds an earlier decision on this image")
	}
	free := ledger.Free(ds)
	if free < in.Size {
		return refuse("%s free of limit %s, needs %s", bytes(free), bytes(ds.Status.StorageLimit), bytes(in.Size))
	}
	return candidate{UUID: uuid, Free: free}, nil, true
}

// lingers reports whether ds still holds a request of image or a decision on one.
func lingers(ds *longhornv1.DiskSchedule, image string) bool {
	if _, ok := ds.Spec.BackingImages[image]; ok {
		return true
	}
	_, ok := ds.Status.BackingImages[image]
	return ok
}

func tagsRefusal(tags, selector []string, allowEmptySetting string) string {
	if len(selector) == 0 {
		return fmt.Sprintf("tags %v do not match the empty selector (%s is false)", sortedCopy(tags), allowEmptySetting)
	}
	return fmt.Sprintf("tags %v do not match selector %v", sortedCopy(tags), sortedCopy(selector))
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// decision is a copy's ledger entry as this controller sees it.
type decision int

const (
	// decisionUnrequested: the ledger holds no request of the image's size.
	decisionUnrequested decision = iota
	// decisionPending: the request is written and not decided yet.
	decisionPending
	// decisionGranted: the ledger granted the image's size.
	decisionGranted
	// decisionRejected: the ledger rejected the request.
	decisionRejected
)

// decisionOf returns ds's decision on the image's request of size bytes,
// and the ledger's message when it rejected it.
func decisionOf(ds *longhornv1.DiskSchedule, image string, size int64) (decision, string) {
	requested, ok := ds.Spec.BackingImages[image]
	if !ok || int64(requested) != size {
		return decisionUnrequested, ""
	}
	st, decided := ds.Status.BackingImages[image]
	if !decided || st.RequestedSize != size {
		return decisionPending, ""
	}
	if st.State == longhornv1.RequestStateScheduled && st.ScheduledSize == size {
		return decisionGranted, ""
	}
	return decisionRejected, st.Message
}

// insufficientMessage says why fewer than want copies could be placed: how
// many are granted and pending, and why each other disk cannot take one.
func insufficientMessage(want, granted, pending int, size int64, sel selection) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d copies of %s wanted, %d granted, %d pending; no other disk can take one (%d disks hold a copy)",
		want, bytes(size), granted, pending, sel.Holding)
	if len(sel.Refused) == 0 {
		return b.String()
	}
	b.WriteString(": ")
	listed := sel.Refused[:min(len(sel.Refused), maxListed)]
	for i, r := range listed {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.String())
	}
	if more := len(sel.Refused) - len(listed); more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	return b.String()
}

// bytes formats a byte count for messages, in binary units ("4Gi").
func bytes(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }
