// Package backingimage is the requirement writer of Longhorn's
// BackingImages (DESIGN §4): the gate's verdict on a BackingImage write and
// its webhook handler. What the mirror counts of the copies on a disk is
// the ledger's rule (ledger.PersistedByDisk): each at the image's
// status.realSize.
//
//   - Plan: a disk that spec.diskFileSpecMap gains asks a copy at
//     status.realSize, the size Longhorn's node controller adds to the
//     disk's storageScheduled; an image whose real size is not known yet is
//     admitted, and the mirror adopts its copies once it is. TakesSpace is
//     the Go side of the webhook's matchCondition.
//   - Handler decodes the write; internal/requirement carries the plan out.
package backingimage
