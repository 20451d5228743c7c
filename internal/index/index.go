// Package index registers the cache field indexes the controllers look
// objects up by, each under one name shared by every user.
package index

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

const (
	// ReplicaByDisk indexes Longhorn Replicas by spec.diskID (the disk's UUID).
	ReplicaByDisk = "spec.diskID"
	// ReplicaByVolume indexes Longhorn Replicas by spec.volumeName.
	ReplicaByVolume = "spec.volumeName"
	// BackingImageByDisk indexes Longhorn BackingImages by every disk UUID
	// of spec.diskFileSpecMap.
	BackingImageByDisk = "spec.diskFileSpecMap"
	// DiskScheduleByNode indexes DiskSchedules by spec.nodeID.
	DiskScheduleByNode = "spec.nodeID"
	// DiskScheduleByReplica indexes DiskSchedules by every replica name of
	// spec.replicas.
	DiskScheduleByReplica = "spec.replicas"
	// DiskScheduleByReservation indexes DiskSchedules by every volume name
	// of spec.reservations.
	DiskScheduleByReservation = "spec.reservations"
	// DiskScheduleByReservationPod indexes DiskSchedules by the pod
	// ("namespace/name") of every reservation in spec.reservations.
	DiskScheduleByReservationPod = "spec.reservations.pod"
)

// Register adds every index to indexer.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	return register(ctx, indexer, nil)
}

// RegisterFor adds to indexer the indexes of the given kinds only: a cache
// informs on every kind it indexes, so a cache with the rights to read
// some kinds alone (the second scheduler's plugin) indexes those alone.
func RegisterFor(ctx context.Context, indexer client.FieldIndexer, kinds ...client.Object) error {
	return register(ctx, indexer, kinds)
}

// register adds the indexes of kinds to indexer, of every kind when kinds
// is nil.
func register(ctx context.Context, indexer client.FieldIndexer, kinds []client.Object) error {
	indexes := []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&lhv1.Replica{}, ReplicaByDisk, func(o client.Object) []string { return nonEmpty(o.(*lhv1.Replica).Spec.DiskID) }},
		{&lhv1.Replica{}, ReplicaByVolume, func(o client.Object) []string { return nonEmpty(o.(*lhv1.Replica).Spec.VolumeName) }},
		{&lhv1.BackingImage{}, BackingImageByDisk, backingImageDisks},
		{&dsv1.DiskSchedule{}, DiskScheduleByNode, func(o client.Object) []string { return nonEmpty(o.(*dsv1.DiskSchedule).Spec.NodeID) }},
		{&dsv1.DiskSchedule{}, DiskScheduleByReplica, func(o client.Object) []string { return slices.Collect(maps.Keys(o.(*dsv1.DiskSchedule).Spec.Replicas)) }},
		{&dsv1.DiskSchedule{}, DiskScheduleByReservation, func(o client.Object) []string {
			return slices.Collect(maps.Keys(o.(*dsv1.DiskSchedule).Spec.Reservations))
		}},
		{&dsv1.DiskSchedule{}, DiskScheduleByReservationPod, reservationPods},
	}
	for _, ix := range indexes {
		if kinds != nil && !slices.ContainsFunc(kinds, func(k client.Object) bool { return reflect.TypeOf(k) == reflect.TypeOf(ix.obj) }) {
			continue
		}
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

// backingImageDisks returns the disk UUIDs a BackingImage has a copy on (or
// is placing one on).
func backingImageDisks(o client.Object) []string {
	bi := o.(*lhv1.BackingImage)
	out := make([]string, 0, len(bi.Spec.DiskFileSpecMap))
	for uuid := range bi.Spec.DiskFileSpecMap {
		if uuid != "" {
			out = append(out, uuid)
		}
	}
	return out
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// reservationPods returns the pods a DiskSchedule's reservations were made
// for, each once.
func reservationPods(o client.Object) []string {
	ds := o.(*dsv1.DiskSchedule)
	var out []string
	for _, res := range ds.Spec.Reservations {
		if res.Pod != "" && !slices.Contains(out, res.Pod) {
			out = append(out, res.Pod)
		}
	}
	return out
}
