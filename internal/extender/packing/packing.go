package packing

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/longhorn/diskschedule/internal/ledger"
)

// DefaultBudget is the number of search steps a caller should allow Pack for
// one node. It decides real pods (a handful of volumes on a handful of disks)
// exactly in well under a millisecond and bounds pathological inputs to a few
// milliseconds.
const DefaultBudget = 100000

// Item is one volume that needs a new replica on the node.
type Item struct {
	// Name identifies the volume; it is the key of Result.Assignment and must
	// be unique among the items passed to Pack.
	Name string
	// Size is the number of bytes the replica needs. A negative size counts
	// as zero.
	Size int64
	// Selector lists the disk tags the volume requires: a disk is compatible
	// when its tags include every selector tag. An empty selector matches
	// every disk.
	Selector []string
	// Disks, when not nil, are the names of the only bins the volume may
	// use, as the caller's eligibility rule decided; Selector still applies.
	// An empty, non-nil list allows no bin.
	Disks []string
}

// Bin is one disk of the node.
type Bin struct {
	// Name identifies the disk; it is the value in Result.Assignment and must
	// be unique among the bins passed to Pack.
	Name string
	// Free is the number of bytes the disk can still take: its ledger limit
	// minus scheduled space minus pending growth, as computed by the caller.
	// A negative value counts as zero.
	Free int64
	// Tags are the disk's tags, matched against the items' selectors.
	Tags []string
}

// Result is the outcome of Pack.
type Result struct {
	// Assignment maps every item name to the name of the bin that takes its
	// replica. It is nil when the items do not fit and empty when there were
	// no items.
	Assignment map[string]string
	// Fits is true when every item has a compatible bin and no bin holds more
	// than its free space.
	Fits bool
	// Steps is the number of placements the backtracking search tried. It
	// never exceeds the budget.
	Steps int
	// Exact is false when the search ran out of budget and the greedy
	// first-fit-decreasing fallback decided. Such a "does not fit" may be
	// wrong (the items might fit in a way the greedy did not find); such a
	// "fits" is always right.
	Exact bool
	// Reason explains, in numbers, why the items do not fit. It is empty when
	// they fit.
	Reason string
}

// Pack decides whether all items fit together onto the bins and returns one
// assignment if they do. budget bounds the number of search steps; a budget
// of zero or less means DefaultBudget.
//
// Items are placed largest first (ties broken by compatible bins, then by
// name); each item tries its compatible bins best fit first (least free
// space that still fits, ties by name). The search prunes a branch when any
// remaining item's largest compatible bin is too small, when the remaining
// items of a group of selectors need more than the free space of the bins
// that group can use, when a bin is equivalent to one already tried for the
// same item (same free space, same compatibility with every item), and when
// an item identical to its predecessor would go to an earlier bin than the
// predecessor did. The result depends only on the contents of items and
// bins, not on their order.
func Pack(items []Item, bins []Bin, budget int) Result {
	if budget <= 0 {
		budget = DefaultBudget
	}
	if len(items) == 0 {
		return Result{Assignment: map[string]string{}, Fits: true, Exact: true}
	}
	if len(items) == 1 {
		if bin, ok := bestFit(items[0], bins); ok {
			return Result{Assignment: map[string]string{items[0].Name: bin}, Fits: true, Steps: 1, Exact: true}
		}
	}
	return packBySearch(items, bins, budget)
}

// bestFit returns the bin the search would give a lone item: the
// compatible bin with the least free space that still takes it, ties by
// name; ok is false when none does or two bins share a name (the search
// then says why). It is the common case of one volume per pod, without
// building the search.
func bestFit(it Item, bins []Bin) (name string, ok bool) {
	for i := range bins {
		for j := range i {
			if bins[i].Name == bins[j].Name {
				return "", false
			}
		}
	}
	var best Bin
	size := max(it.Size, 0)
	for _, b := range bins {
		free := max(b.Free, 0)
		if free < size || !compatible(it, b) {
			continue
		}
		if bestFree := max(best.Free, 0); !ok || free < bestFree || (free == bestFree && b.Name < best.Name) {
			best, ok = b, true
		}
	}
	return best.Name, ok
}

// packBySearch is Pack by backtracking search, for any number of items.
func packBySearch(items []Item, bins []Bin, budget int) Result {
	if reason := checkNames(items, bins); reason != "" {
		return Result{Exact: true, Reason: reason}
	}
	p := newProblem(items, bins)
	if reason := p.precheck(); reason != "" {
		return Result{Exact: true, Reason: reason}
	}

	s := newSearch(p, budget)
	if s.place(0) {
		return Result{Assignment: p.assignment(s.assign), Fits: true, Steps: s.steps, Exact: true}
	}
	if !s.aborted {
		return Result{Steps: s.steps, Exact: true, Reason: p.noPlacementReason()}
	}

	assign, reason := p.firstFitDecreasing()
	if reason != "" {
		return Result{
			Steps:  s.steps,
			Reason: fmt.Sprintf("search gave up after %d steps and %s", s.steps, reason),
		}
	}
	return Result{Assignment: p.assignment(assign), Fits: true, Steps: s.steps}
}

// checkNames rejects duplicate item or bin names, which an assignment keyed
// by name cannot represent.
func checkNames(items []Item, bins []Bin) string {
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		if seen[it.Name] {
			return fmt.Sprintf("volume name %q appears more than once", it.Name)
		}
		seen[it.Name] = true
	}
	clear(seen)
	for _, b := range bins {
		if seen[b.Name] {
			return fmt.Sprintf("disk name %q appears more than once", b.Name)
		}
		seen[b.Name] = true
	}
	return ""
}

// problem is the normalised input: items and bins in canonical order,
// negative numbers clamped, and the compatibility structure precomputed.
type problem struct {
	// items are sorted by size descending, then compatibility key, then name.
	items []Item
	// bins are sorted by name; a bin's index is its rank by name.
	bins []Bin
	// size and free are the clamped item sizes and bin free spaces.
	size []int64
	free []int64
	// itemClass maps an item to its class: items with the same compatible
	// bins share a class.
	itemClass []int
	classes   []class
	// groups are the capacity checks: the bins of one class (or of all
	// classes) against the items that can only use those bins.
	groups []group
	// binType maps a bin to its type: bins compatible with exactly the same
	// items share a type and are interchangeable when their free space is
	// equal.
	binType []int
	// sameAsPrev is true for an item with the same size and class as the one
	// before it.
	sameAsPrev []bool
}

// class is a set of items that are compatible with exactly the same bins.
type class struct {
	// bins are the compatible bin indices, ascending.
	bins []int
	// items are the item indices of the class, ascending (largest first).
	items []int
	// suffix[i] is the saturating sum of the sizes of items[i:].
	suffix []int64
}

// group pairs a set of bins with the classes whose bins all lie inside it:
// the items of those classes can use no other bins.
type group struct {
	bins    []int
	classes []int
	// all is true when the group holds every class.
	all bool
}

// newProblem sorts and indexes the input. Names must be unique.
func newProblem(items []Item, bins []Bin) *problem {
	p := &problem{bins: slices.Clone(bins)}
	slices.SortFunc(p.bins, func(a, b Bin) int { return strings.Compare(a.Name, b.Name) })
	p.free = make([]int64, len(p.bins))
	for b, bin := range p.bins {
		p.free[b] = max(bin.Free, 0)
	}

	// Compatibility of each input item with each sorted bin, as a key.
	type keyed struct {
		item Item
		size int64
		key  string
	}
	ks := make([]keyed, len(items))
	var row []byte
	for i, it := range items {
		row = row[:0]
		for _, bin := range p.bins {
			if compatible(it, bin) {
				row = append(row, '1')
			} else {
				row = append(row, '0')
			}
		}
		ks[i] = keyed{item: it, size: max(it.Size, 0), key: string(row)}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(
			cmp.Compare(b.size, a.size),
			strings.Compare(a.key, b.key),
			strings.Compare(a.item.Name, b.item.Name),
		)
	})

	n := len(ks)
	p.items = make([]Item, n)
	p.size = make([]int64, n)
	p.itemClass = make([]int, n)
	p.sameAsPrev = make([]bool, n)
	classOf := map[string]int{}
	for k, kd := range ks {
		p.items[k] = kd.item
		p.size[k] = kd.size
		c, ok := classOf[kd.key]
		if !ok {
			c = len(p.classes)
			classOf[kd.key] = c
			var cb []int
			for b := range p.bins {
				if kd.key[b] == '1' {
					cb = append(cb, b)
				}
			}
			p.classes = append(p.classes, class{bins: cb})
		}
		p.itemClass[k] = c
		p.classes[c].items = append(p.classes[c].items, k)
		p.sameAsPrev[k] = k > 0 && p.itemClass[k-1] == c && p.size[k-1] == kd.size
	}
	for c := range p.classes {
		cl := &p.classes[c]
		cl.suffix = make([]int64, len(cl.items)+1)
		for i := len(cl.items) - 1; i >= 0; i-- {
			cl.suffix[i] = ledger.AddSat(cl.suffix[i+1], p.size[cl.items[i]])
		}
	}

	// Bin types: the compatibility column of each bin over the sorted items.
	p.binType = make([]int, len(p.bins))
	typeOf := map[string]int{}
	col := make([]byte, n)
	for b := range p.bins {
		for k, kd := range ks {
			col[k] = kd.key[b]
		}
		t, ok := typeOf[string(col)]
		if !ok {
			t = len(typeOf)
			typeOf[string(col)] = t
		}
		p.binType[b] = t
	}

	p.groups = p.buildGroups()
	return p
}

// buildGroups returns the capacity checks: first the group of all classes
// (over the union of their bins), then one group per remaining class.
func (p *problem) buildGroups() []group {
	var union []int
	for b := range p.bins {
		for _, cl := range p.classes {
			if slices.Contains(cl.bins, b) {
				union = append(union, b)
				break
			}
		}
	}
	allClasses := make([]int, len(p.classes))
	for c := range allClasses {
		allClasses[c] = c
	}
	groups := []group{{bins: union, classes: allClasses, all: true}}
	for _, cl := range p.classes {
		if slices.Equal(cl.bins, union) {
			continue // the first group already checks these bins
		}
		g := group{bins: cl.bins}
		for d, other := range p.classes {
			if subset(other.bins, cl.bins) {
				g.classes = append(g.classes, d)
			}
		}
		if len(g.classes) == len(p.classes) {
			g.all = true
		}
		groups = append(groups, g)
	}
	return groups
}

// precheck fails fast, before any search, when an item has no compatible bin
// large enough or when a group of items needs more than its bins hold.
func (p *problem) precheck() string {
	for k, it := range p.items {
		cl := p.classes[p.itemClass[k]]
		if len(cl.bins) == 0 {
			switch {
			case len(p.bins) == 0:
				return fmt.Sprintf("volume %s needs %s, no disk is available", it.Name, formatSize(p.size[k]))
			case it.Disks != nil:
				return fmt.Sprintf("volume %s can use none of %d disks", it.Name, len(p.bins))
			default:
				return fmt.Sprintf("volume %s needs a disk with tags %s, none of %d disks has them",
					it.Name, formatTags(it.Selector), len(p.bins))
			}
		}
		best := cl.bins[0]
		for _, b := range cl.bins {
			if p.free[b] > p.free[best] {
				best = b
			}
		}
		if p.free[best] < p.size[k] {
			where := "largest free disk"
			switch {
			case len(cl.bins) == len(p.bins):
			case it.Disks != nil:
				where = "largest free usable disk"
			default:
				where = "largest free disk with tags " + formatTags(it.Selector)
			}
			return fmt.Sprintf("volume %s needs %s, %s %s has %s",
				it.Name, formatSize(p.size[k]), where, p.bins[best].Name, formatSize(p.free[best]))
		}
	}
	for _, g := range p.groups {
		var need, hold int64
		for _, c := range g.classes {
			need = ledger.AddSat(need, p.classes[c].suffix[0])
		}
		for _, b := range g.bins {
			hold = ledger.AddSat(hold, p.free[b])
		}
		if need <= hold {
			continue
		}
		switch {
		case g.all && len(g.bins) == len(p.bins):
			return fmt.Sprintf("volumes need %s together, disks hold %s free in all",
				formatSize(need), formatSize(hold))
		case g.all:
			return fmt.Sprintf("volumes need %s together, the %d disks they can use hold %s free in all",
				formatSize(need), len(g.bins), formatSize(hold))
		default:
			return fmt.Sprintf("volumes %s need %s together, the disks they can use (%s) hold %s free in all",
				p.itemNames(g.classes), formatSize(need), p.binNames(g.bins), formatSize(hold))
		}
	}
	return ""
}

// noPlacementReason explains an exhausted search in numbers.
func (p *problem) noPlacementReason() string {
	var need, hold, largestFree int64
	for _, s := range p.size {
		need = ledger.AddSat(need, s)
	}
	union := p.groups[0].bins
	for _, b := range union {
		hold = ledger.AddSat(hold, p.free[b])
		largestFree = max(largestFree, p.free[b])
	}
	return fmt.Sprintf("no placement fits %d volumes (%s in all, largest %s) onto the %d disks they can use (%s free in all, largest %s)",
		len(p.items), formatSize(need), formatSize(p.size[0]), len(union), formatSize(hold), formatSize(largestFree))
}

// firstFitDecreasing places the items, largest first, each on the first
// compatible bin by name with room left. It returns the assignment, or a
// reason naming the first item that found no room.
func (p *problem) firstFitDecreasing() ([]int, string) {
	free := slices.Clone(p.free)
	assign := make([]int, len(p.items))
	for k := range p.items {
		placed := false
		for _, b := range p.classes[p.itemClass[k]].bins {
			if free[b] >= p.size[k] {
				free[b] -= p.size[k]
				assign[k] = b
				placed = true
				break
			}
		}
		if !placed {
			var largest int64
			for _, b := range p.classes[p.itemClass[k]].bins {
				largest = max(largest, free[b])
			}
			return nil, fmt.Sprintf("first-fit-decreasing placement left no room for volume %s, which needs %s (largest free compatible disk then had %s)",
				p.items[k].Name, formatSize(p.size[k]), formatSize(largest))
		}
	}
	return assign, ""
}

// assignment turns bin indices per sorted item into names.
func (p *problem) assignment(assign []int) map[string]string {
	m := make(map[string]string, len(p.items))
	for k, it := range p.items {
		m[it.Name] = p.bins[assign[k]].Name
	}
	return m
}

// itemNames lists the names of the items of the given classes, in canonical
// item order.
func (p *problem) itemNames(classes []int) string {
	var names []string
	for k, it := range p.items {
		if slices.Contains(classes, p.itemClass[k]) {
			names = append(names, it.Name)
		}
	}
	return strings.Join(names, ", ")
}

// binNames lists the names of the given bins.
func (p *problem) binNames(bins []int) string {
	names := make([]string, len(bins))
	for i, b := range bins {
		names[i] = p.bins[b].Name
	}
	return strings.Join(names, ", ")
}

// compatible reports whether item may go to bin: the bin's tags include
// every selector tag and, when the item lists its disks, the bin is one.
func compatible(it Item, bin Bin) bool {
	return matches(it.Selector, bin.Tags) && (it.Disks == nil || slices.Contains(it.Disks, bin.Name))
}

// matches reports whether tags include every selector tag.
func matches(selector, tags []string) bool {
	for _, s := range selector {
		if !slices.Contains(tags, s) {
			return false
		}
	}
	return true
}

// subset reports whether every element of a is in b; both are ascending.
func subset(a, b []int) bool {
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
	}
	return true
}

// formatSize renders bytes in binary units, such as "100Gi".
func formatSize(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// formatTags renders a selector as a sorted, bracketed list.
func formatTags(tags []string) string {
	sorted := slices.Clone(tags)
	slices.Sort(sorted)
	return "[" + strings.Join(slices.Compact(sorted), " ") + "]"
}
