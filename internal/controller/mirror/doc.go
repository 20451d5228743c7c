// Package mirror keeps each DiskSchedule's spec equal to what Longhorn has
// persisted on its disk (DESIGN §4, ledger rules 7 and 10). It reads the
// cache, plans (Plan, pure) and writes; what counts as persisted is the
// ledger's one rule, ledger.PersistedByDisk, and which entries no write
// will back is the replicas' rule, replica.Lost.
//
// For one ledger the persisted state is what Longhorn's node controller
// counts in the disk's storageScheduled: every Replica whose spec.diskID is
// the disk, requesting its own spec.volumeSize (a growth the gate did not
// see is requested like any growth), and every BackingImage whose
// spec.diskFileSpecMap lists the disk, requesting its status.realSize once
// known. One data directory on one disk is counted once: a replica that
// shares its disk and data directory with another replica of its volume (a
// clone of a v1 live migration or a live engine upgrade) has no entry of
// its own, the directory is counted under the replica that has one
// (ledger.SharedData), and the clone takes it over when the original goes.
// The mirror:
//
//   - adopts: a persisted replica or copy without an entry gets one, which
//     the DiskSchedule controller grants even over the limit (rule 7);
//   - raises an entry below its persisted size;
//   - releases (rule 10) an entry nothing backs any more: at once when the
//     mirror saw it backed and then saw its object deleted or moved to
//     another disk, when its Replica is persisted on another disk (Longhorn
//     does not move a placed replica), when the write the gate admitted for
//     it lost (the Replica's resourceVersion moved past the one in
//     spec.replicaVersions without this disk), and when it is a clone's
//     besides the entry that counts its data directory; otherwise once it
//     has stayed unbacked for the grace period. The gate writes a request
//     before Longhorn's write lands, so an entry not backed yet is given the
//     grace period to be; likewise an entry above its persisted size (a
//     growth not landed) is lowered after the grace period.
//
// A release or lowering that rests on the grace period alone is confirmed
// with the API server before it is written: an informer can lag behind
// for longer than the grace period under load, and a replica the API
// server shows on the disk at the entry's size keeps its entry (the ledger
// is looked at again a second later). Without that check the space of a
// placed replica would be freed, granted to another and the disk overfilled.
//
// "Seen backed" and "first seen unbacked" are kept in memory; after a
// restart every unbacked entry gets the full grace period. Each change is
// one merge patch of the spec carrying the resourceVersion read, so a
// concurrent writer makes it fail and it is computed again. The mirror
// never writes status nor any Longhorn object.
package mirror
