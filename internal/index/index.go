// Package index registers the cache field indexes the controllers look
// objects up by, each under one name shared by every user.
package index

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

const (
	// ReplicaByDisk indexes Replicas by spec.diskID.
	ReplicaByDisk = "spec.diskID"
	// ReplicaByVolume indexes Replicas by spec.volumeName.
	ReplicaByVolume = "spec.volumeName"
	// DiskScheduleByNode indexes DiskSchedules by spec.nodeID.
	DiskScheduleByNode = "spec.nodeID"
)

// Register adds every index to indexer.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	indexes := []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&longhornv1.Replica{}, ReplicaByDisk, func(o client.Object) []string { return nonEmpty(o.(*longhornv1.Replica).Spec.DiskID) }},
		{&longhornv1.Replica{}, ReplicaByVolume, func(o client.Object) []string { return nonEmpty(o.(*longhornv1.Replica).Spec.VolumeName) }},
		{&longhornv1.DiskSchedule{}, DiskScheduleByNode, func(o client.Object) []string { return nonEmpty(o.(*longhornv1.DiskSchedule).Spec.NodeID) }},
	}
	for _, ix := range indexes {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
