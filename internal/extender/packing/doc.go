// Package packing decides whether all of a pod's new volumes fit together
// onto one node's disks. Each volume needs one replica of its size on one
// disk whose tags include the volume's disk selector and, when the caller
// lists the disks the volume may use, on one of those; several volumes may
// share a disk while their sizes fit in its free space.
//
// Pack runs an exact backtracking search with pruning, bounded by a number of
// search steps; when the bound is reached it falls back to a greedy
// first-fit-decreasing placement and says so in the result. The package has
// no client and no state: the caller computes each disk's free space (ledger
// limit minus scheduled minus pending growth) and decides which disks each
// volume may use (the extender asks internal/placement, the one eligibility
// rule), so every rule here is tested with plain table and property tests.
package packing
