package scenario

import (
	"context"
	"fmt"
	"sort"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// DiskUsage is what Longhorn persisted on one disk, against the disk's limit.
type DiskUsage struct {
	// Node and Disk name the disk (the Longhorn node and its disk name).
	Node, Disk string
	// Persisted is what Longhorn persisted on the disk as the ledger counts
	// it (ledger.PersistedByDisk: replicas and backing-image copies), whatever
	// the ledger says.
	Persisted int64
	// Limit is the disk's storageLimit, from its ledger's status.
	Limit int64
}

// Percent is Persisted in percent of Limit; 0 when the disk has no limit.
func (u DiskUsage) Percent() float64 {
	if u.Limit <= 0 {
		return 0
	}
	return 100 * float64(u.Persisted) / float64(u.Limit)
}

// Over reports whether the disk holds more than its limit.
func (u DiskUsage) Over() bool { return u.Persisted > u.Limit }

// Fullest returns the disk with the highest Percent (the first in order on
// a tie), and false when there is none.
func Fullest(disks []DiskUsage) (DiskUsage, bool) {
	if len(disks) == 0 {
		return DiskUsage{}, false
	}
	best := disks[0]
	for _, u := range disks[1:] {
		if u.Percent() > best.Percent() {
			best = u
		}
	}
	return best, true
}

// OverLimit counts the disks that hold more than their limit.
func OverLimit(disks []DiskUsage) int {
	n := 0
	for _, u := range disks {
		if u.Over() {
			n++
		}
	}
	return n
}

// diskUsage reads every disk's ledger and every replica in namespace, and
// returns what is persisted on each disk against its limit, by node and
// disk.
func diskUsage(ctx context.Context, c client.Client, namespace string) ([]DiskUsage, error) {
	ledgers := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, ledgers, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the DiskSchedules: %w", err)
	}
	replicas := &lhv1.ReplicaList{}
	if err := c.List(ctx, replicas, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the replicas: %w", err)
	}
	images := &lhv1.BackingImageList{}
	if err := c.List(ctx, images, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the backing images: %w", err)
	}
	persisted := ledger.PersistedByDisk(replicas.Items, images.Items, nil)
	out := make([]DiskUsage, 0, len(ledgers.Items))
	for _, ds := range ledgers.Items {
		out = append(out, DiskUsage{Node: ds.Spec.NodeID, Disk: ds.Spec.Name, Persisted: persisted[ds.Name].Total(), Limit: ds.Status.StorageLimit})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Disk < out[j].Disk
	})
	return out, nil
}
