package mirror

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// Persisted is what Longhorn has persisted on one disk, by object name: the
// bytes each replica and backing-image copy needs there
// (ledger.PersistedByDisk). A size of 0 means the object is on the disk but
// its size is not known yet (a backing image still without
// status.realSize): its entry is kept as it is and none is added.
type Persisted struct {
	ledger.Persisted
	// Lost maps a replica name to why no write of Longhorn's will back an
	// entry of it on this disk: its entry, if any, is released at once
	// instead of after the grace period (rule 10).
	Lost map[string]string
}

// lost returns why entries of kind k will never be backed: only replicas'
// are known to be lost.
func (p Persisted) lost(k ledger.Kind) map[string]string {
	if k == ledger.Replica {
		return p.Lost
	}
	return nil
}

// Action is what the mirror does to one entry.
type Action string

// The mirror's actions on ledger entries.
const (
	// Adopted: an entry was added for an object persisted on the disk.
	Adopted Action = "adopted"
	// Raised: an entry was raised to its object's persisted size.
	Raised Action = "raised"
	// Lowered: an entry above its object's persisted size for the grace
	// period was lowered to it.
	Lowered Action = "lowered"
	// Released: an entry nothing backs was removed.
	Released Action = "released"
)

// Change is one change of the spec.
type Change struct {
	// Action is what was done.
	Action Action
	// Kind is the entry's kind.
	Kind ledger.Kind
	// Name is the entry's name.
	Name string
	// From and To are the requested bytes before and after (0: no entry).
	From, To int64
	// Why says why an entry was released before its grace period ended.
	Why string
}

// String describes the change for events and logs.
func (c Change) String() string {
	switch {
	case c.Action == Adopted:
		return fmt.Sprintf("%s %s (%d bytes)", c.Kind, c.Name, c.To)
	case c.Action == Released && c.Why != "":
		return fmt.Sprintf("%s %s (%d bytes: %s)", c.Kind, c.Name, c.From, c.Why)
	case c.Action == Released:
		return fmt.Sprintf("%s %s (%d bytes)", c.Kind, c.Name, c.From)
	}
	return fmt.Sprintf("%s %s (%d to %d bytes)", c.Kind, c.Name, c.From, c.To)
}

// Memory is what the mirror remembers of one ledger's entries between
// reconciles. The zero value is empty and ready to use.
type Memory struct {
	// backed names entries the mirror has seen backed by a persisted object.
	backed map[entryKey]bool
	// waiting holds, per entry not backed at its size, the size and when
	// the mirror first saw it so.
	waiting map[entryKey]since
}

type entryKey struct {
	kind ledger.Kind
	name string
}

type since struct {
	size int64
	at   time.Time
}

// Plan returns the spec the mirror wants for ledger spec given what is
// persisted, the changes from spec to it, and when to look again for an
// entry still in its grace period (0: none). It updates mem.
func Plan(spec dsv1.DiskScheduleSpec, persisted Persisted, mem *Memory, now time.Time, grace time.Duration) (
	next dsv1.DiskScheduleSpec, changes []Change, recheck time.Duration) {
	if mem.backed == nil {
		mem.backed = map[entryKey]bool{}
	}
	if mem.waiting == nil {
		mem.waiting = map[entryKey]since{}
	}
	p := planner{mem: mem, now: now, grace: grace}
	next = *spec.DeepCopy()
	for _, k := range ledger.Kinds() {
		*ledger.Requests(&next, k) = p.entries(k, *ledger.Requests(&spec, k), persisted.Of(k), persisted.lost(k))
	}
	// A replica's admitted version goes with its request.
	for name := range next.ReplicaVersions {
		if _, ok := next.Replicas[name]; !ok {
			delete(next.ReplicaVersions, name)
		}
	}
	if len(next.ReplicaVersions) == 0 {
		next.ReplicaVersions = nil
	}
	return next, p.changes, p.recheck
}

type planner struct {
	mem     *Memory
	now     time.Time
	grace   time.Duration
	changes []Change
	recheck time.Duration
}

// entries plans one map of the spec; lost says why entries nothing will
// back are.
func (p *planner) entries(kind ledger.Kind, spec map[string]dsv1.RequestedBytes, persisted map[string]int64, lost map[string]string) map[string]dsv1.RequestedBytes {
	out := make(map[string]dsv1.RequestedBytes, len(spec)+len(persisted))
	names := map[string]bool{}
	for name := range spec {
		names[name] = true
	}
	for name := range persisted {
		names[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		key := entryKey{kind, name}
		requested, inSpec := spec[name]
		size, backed := persisted[name]
		cur := int64(requested)
		switch {
		case backed:
			p.mem.backed[key] = true
			switch {
			case size <= 0 && inSpec: // size not known yet: keep what is asked
				out[name] = requested
				delete(p.mem.waiting, key)
			case size <= 0: // nor add one
			case !inSpec:
				out[name] = dsv1.RequestedBytes(size)
				p.change(Adopted, kind, name, 0, size)
				delete(p.mem.waiting, key)
			case cur < size:
				out[name] = dsv1.RequestedBytes(size)
				p.change(Raised, kind, name, cur, size)
				delete(p.mem.waiting, key)
			case cur == size:
				out[name] = requested
				delete(p.mem.waiting, key)
			default: // above what is persisted: a growth that has not landed
				if p.graceOver(key, cur) {
					out[name] = dsv1.RequestedBytes(size)
					p.change(Lowered, kind, name, cur, size)
				} else {
					out[name] = requested
				}
			}
		case p.mem.backed[key]:
			// Seen backed, now deleted or moved to another disk: nothing
			// will come back for it. The memory stays until the release
			// is written, so a write that fails releases at once again.
			p.change(Released, kind, name, cur, 0)
		case lost[name] != "":
			p.changes = append(p.changes, Change{Action: Released, Kind: kind, Name: name, From: cur, Why: lost[name]})
			delete(p.mem.waiting, key)
		case p.graceOver(key, cur):
			p.change(Released, kind, name, cur, 0)
		default:
			out[name] = requested
		}
	}
	// Entries neither asked for nor persisted any more are forgotten, so a
	// name asked again is a new request with a grace period of its own.
	for key := range p.mem.backed {
		if key.kind == kind && !names[key.name] {
			p.forget(key)
		}
	}
	for key := range p.mem.waiting {
		if key.kind == kind && !names[key.name] {
			p.forget(key)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// graceOver reports whether the entry has waited at size for the grace
// period, recording when it started to and when to look again.
func (p *planner) graceOver(key entryKey, size int64) bool {
	w, ok := p.mem.waiting[key]
	if !ok || w.size != size {
		w = since{size: size, at: p.now}
		p.mem.waiting[key] = w
	}
	left := w.at.Add(p.grace).Sub(p.now)
	if left <= 0 {
		return true // kept until the entry is released or backed
	}
	if p.recheck == 0 || left < p.recheck {
		p.recheck = left
	}
	return false
}

func (p *planner) forget(key entryKey) {
	delete(p.mem.backed, key)
	delete(p.mem.waiting, key)
}

func (p *planner) change(a Action, kind ledger.Kind, name string, from, to int64) {
	p.changes = append(p.changes, Change{Action: a, Kind: kind, Name: name, From: from, To: to})
}

// describe lists the changes of one action, for an event message.
func describe(changes []Change, a Action) string {
	var parts []string
	for _, c := range changes {
		if c.Action == a {
			parts = append(parts, c.String())
		}
	}
	return strings.Join(parts, ", ")
}
