package dataplane

import (
	"context"

	immeta "github.com/longhorn/longhorn-instance-manager/pkg/meta"
	"github.com/longhorn/types/pkg/generated/imrpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// diskService is the instance manager's disk service. longhorn-manager
// reads a v1 (filesystem) disk with statfs itself and asks this service
// only about v2 (block) disks, which the sandbox does not have; it answers
// its version and health.
type diskService struct {
	imrpc.UnimplementedDiskServiceServer
}

// VersionGet answers longhorn-instance-manager v1.12.0's disk service API
// versions.
func (diskService) VersionGet(context.Context, *emptypb.Empty) (*imrpc.DiskVersionResponse, error) {
	return &imrpc.DiskVersionResponse{
		Version:                                 Version,
		InstanceManagerDiskServiceAPIVersion:    int64(immeta.InstanceManagerDiskServiceAPIVersion),
		InstanceManagerDiskServiceAPIMinVersion: int64(immeta.InstanceManagerDiskServiceAPIMinVersion),
	}, nil
}
