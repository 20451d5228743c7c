package backingimage

import (
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Persisted is the backing images' part of the mirror (rules 7 and 10):
// the copies Longhorn has placed on disk, by image name, each at the
// image's status.realSize, what Longhorn's node controller adds to the
// disk's storageScheduled; 0 while the real size is not known (the
// mirror then keeps an entry as it is and adds none). An image whose
// spec.diskFileSpecMap no longer lists the disk backs nothing there.
func Persisted(disk string, images []lhv1.BackingImage) map[string]int64 {
	sizes := map[string]int64{}
	for i := range images {
		bi := &images[i]
		if _, listed := bi.Spec.DiskFileSpecMap[disk]; listed {
			sizes[bi.Name] = max(bi.Status.RealSize, 0)
		}
	}
	return sizes
}
