package ledger

import (
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Persisted is what Longhorn has persisted on one disk, as the ledger counts
// it: what Longhorn's node controller adds to the disk's storageScheduled
// (DESIGN §4). The mirror keeps a ledger's entries equal to it (rules 7 and
// 10), and a settled ledger's storageScheduled is its Total.
type Persisted struct {
	// Replicas maps each Replica whose spec.diskID is the disk to its own
	// spec.volumeSize. A data directory that several replicas of one volume
	// share (SharedData) is counted once, under one of them.
	Replicas map[string]int64
	// BackingImages maps each BackingImage whose spec.diskFileSpecMap lists
	// the disk to its status.realSize: the copy's size as Longhorn counts
	// it, 0 while Longhorn has not reported it.
	BackingImages map[string]int64
	// Shared maps each replica on the disk that is not counted, as it
	// shares its data directory with one that is, to that one.
	Shared map[string]string
}

// Of returns the persisted sizes of kind k, by entry name.
func (p Persisted) Of(k Kind) map[string]int64 {
	if k == BackingImage {
		return p.BackingImages
	}
	return p.Replicas
}

// Total returns the bytes persisted on the disk, replicas and copies: what
// the ledger of a disk whose requests are all decided and backed has
// scheduled.
func (p Persisted) Total() int64 {
	var total int64
	for _, k := range Kinds() {
		for _, size := range p.Of(k) {
			total = AddSat(total, size)
		}
	}
	return total
}

// PersistedByDisk returns, by disk UUID, what Longhorn has persisted on each
// disk (Persisted), from its Replicas and BackingImages: a replica on the
// disk its spec.diskID names, at its spec.volumeSize; a backing image's
// copy on each disk its spec.diskFileSpecMap lists, at its
// status.realSize. It is the one rule of what is persisted, for the mirror
// and for every check that a ledger equals it.
//
// Of the replicas that share a data directory, the one counted is the
// first by name that hasEntry reports (its ledger entry counts the
// directory), or the first by name when it reports none; a nil hasEntry
// reports none. A disk nothing is persisted on is not in the map.
func PersistedByDisk(replicas []lhv1.Replica, images []lhv1.BackingImage, hasEntry func(*lhv1.Replica) bool) map[string]Persisted {
	if hasEntry == nil {
		hasEntry = func(*lhv1.Replica) bool { return false }
	}
	shared := SharedData(replicas, hasEntry)
	out := map[string]Persisted{}
	on := func(disk string) Persisted {
		p, ok := out[disk]
		if !ok {
			p = Persisted{Replicas: map[string]int64{}, BackingImages: map[string]int64{}}
			out[disk] = p
		}
		return p
	}
	for i := range replicas {
		r := &replicas[i]
		if r.Spec.DiskID == "" {
			continue
		}
		p := on(r.Spec.DiskID)
		counted, isShared := shared[r.Name]
		switch {
		case !isShared:
			p.Replicas[r.Name] = max(r.Spec.VolumeSize, 0)
		case p.Shared == nil:
			p.Shared = map[string]string{r.Name: counted}
			out[r.Spec.DiskID] = p
		default:
			p.Shared[r.Name] = counted
		}
	}
	for i := range images {
		bi := &images[i]
		for disk := range bi.Spec.DiskFileSpecMap {
			if disk != "" {
				on(disk).BackingImages[bi.Name] = max(bi.Status.RealSize, 0)
			}
		}
	}
	return out
}
