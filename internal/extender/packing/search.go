package packing

import (
	"math"

	"github.com/longhorn/diskschedule/internal/ledger"
)

// search is the state of one backtracking search over a problem.
type search struct {
	p      *problem
	budget int
	// steps counts the placements tried; aborted is set once steps reached
	// the budget with the search undecided.
	steps   int
	aborted bool
	// free is the free space left in each bin.
	free []int64
	// assign is the bin of each placed item.
	assign []int
	// placed counts the placed items of each class. Items are placed in
	// order, so the unplaced items of class c are classes[c].items[placed[c]:].
	placed []int
	// cand is per-level scratch space for candidate bins.
	cand [][]int
}

// newSearch prepares a search of p bounded by budget steps.
func newSearch(p *problem, budget int) *search {
	s := &search{
		p:      p,
		budget: budget,
		free:   append([]int64(nil), p.free...),
		assign: make([]int, len(p.items)),
		placed: make([]int, len(p.classes)),
		cand:   make([][]int, len(p.items)),
	}
	for k := range p.items {
		s.cand[k] = make([]int, 0, len(p.classes[p.itemClass[k]].bins))
	}
	return s
}

// place places items k and later, returning true with s.assign filled in
// when they all fit. It returns false when they cannot, or when the budget
// ran out (s.aborted).
func (s *search) place(k int) bool {
	p := s.p
	if k == len(p.items) {
		return true
	}
	if !s.feasible() {
		return false
	}
	c := p.itemClass[k]
	size := p.size[k]

	// Identical consecutive items go to bins in non-decreasing order: any
	// placement can be permuted among them to satisfy this.
	first := 0
	if p.sameAsPrev[k] {
		first = s.assign[k-1]
	}
	cand := s.cand[k][:0]
	for _, b := range p.classes[c].bins {
		if b >= first && s.free[b] >= size {
			cand = append(cand, b)
		}
	}
	s.sortBestFit(cand)

	for i, b := range cand {
		if s.triedEquivalent(cand[:i], b) {
			continue
		}
		if s.steps >= s.budget {
			s.aborted = true
			return false
		}
		s.steps++
		s.free[b] -= size
		s.assign[k] = b
		s.placed[c]++
		if s.place(k + 1) {
			return true
		}
		s.placed[c]--
		s.free[b] += size
		if s.aborted {
			return false
		}
	}
	return false
}

// sortBestFit orders candidate bins by free space ascending, then by index
// (name). Candidate lists are short, so an insertion sort is fastest.
func (s *search) sortBestFit(cand []int) {
	for i := 1; i < len(cand); i++ {
		for j := i; j > 0 && s.less(cand[j], cand[j-1]); j-- {
			cand[j], cand[j-1] = cand[j-1], cand[j]
		}
	}
}

// less orders bins best fit first.
func (s *search) less(a, b int) bool {
	if s.free[a] != s.free[b] {
		return s.free[a] < s.free[b]
	}
	return a < b
}

// triedEquivalent reports whether a bin equivalent to b (same type, same
// free space) is among the candidates tried before it. Those are sorted by
// free space, so equal free spaces sit right before b.
func (s *search) triedEquivalent(tried []int, b int) bool {
	for j := len(tried) - 1; j >= 0 && s.free[tried[j]] == s.free[b]; j-- {
		if s.p.binType[tried[j]] == s.p.binType[b] {
			return true
		}
	}
	return false
}

// feasible checks necessary conditions for the unplaced items to fit:
// the largest unplaced item of every class fits in its largest compatible
// bin, and in every group the unplaced items need no more than the bins of
// the group have free, counting only bins with room for at least the
// smallest of those items.
func (s *search) feasible() bool {
	p := s.p
	for c, cl := range p.classes {
		if s.placed[c] == len(cl.items) {
			continue
		}
		largest := p.size[cl.items[s.placed[c]]]
		fits := false
		for _, b := range cl.bins {
			if s.free[b] >= largest {
				fits = true
				break
			}
		}
		if !fits {
			return false
		}
	}
	for _, g := range p.groups {
		var need int64
		smallest := int64(math.MaxInt64)
		for _, c := range g.classes {
			cl := &p.classes[c]
			if s.placed[c] == len(cl.items) {
				continue
			}
			need = ledger.AddSat(need, cl.suffix[s.placed[c]])
			smallest = min(smallest, p.size[cl.items[len(cl.items)-1]])
		}
		if need == 0 {
			continue
		}
		var hold int64
		for _, b := range g.bins {
			if s.free[b] >= smallest {
				hold = ledger.AddSat(hold, s.free[b])
			}
		}
		if need > hold {
			return false
		}
	}
	return true
}
