package dataplane

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/longhorn/types/pkg/generated/enginerpc"
	"github.com/longhorn/types/pkg/generated/imrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// volumeHead is the name longhorn-engine gives a volume's live head.
const volumeHead = "volume-head"

// proxy is the instance manager's engine proxy: what longhorn-manager asks
// an engine, answered from the engine's state.
type proxy struct {
	imrpc.UnimplementedProxyEngineServiceServer
	im *InstanceManager
}

// withEngine runs fn on the engine req names, the instance manager locked;
// changed tells watchers the engine changed.
func (p *proxy) withEngine(req *imrpc.ProxyEngineRequest, changed bool, fn func(*engine) error) error {
	im := p.im
	im.mu.Lock()
	defer im.mu.Unlock()
	e, err := im.engineOf(req)
	if err != nil {
		return err
	}
	if err := fn(e); err != nil {
		return err
	}
	if changed {
		im.notifyLocked()
	}
	return nil
}

// ServerVersionGet answers longhorn-engine v1.12.0's API versions.
func (p *proxy) ServerVersionGet(_ context.Context, req *imrpc.ProxyEngineRequest) (*imrpc.EngineVersionProxyResponse, error) {
	err := p.withEngine(req, false, func(*engine) error { return nil })
	if err != nil {
		return nil, err
	}
	return &imrpc.EngineVersionProxyResponse{Version: engineVersion()}, nil
}

// VolumeGet answers the engine's volume: its size, replica count and
// frontend.
func (p *proxy) VolumeGet(_ context.Context, req *imrpc.ProxyEngineRequest) (*imrpc.EngineVolumeGetProxyResponse, error) {
	var v *enginerpc.Volume
	err := p.withEngine(req, false, func(e *engine) error {
		v = &enginerpc.Volume{
			Name:                      e.volume,
			Size:                      e.size,
			ReplicaCount:              int32(len(e.replicas)),
			Frontend:                  e.frontend,
			Endpoint:                  e.endpoint(),
			FrontendState:             e.frontendState(),
			UnmapMarkSnapChainRemoved: e.unmapMarkRemoved,
			SnapshotMaxCount:          e.snapshotMaxCount,
			SnapshotMaxSize:           e.snapshotMaxSize,
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &imrpc.EngineVolumeGetProxyResponse{Volume: v}, nil
}

// endpoint is where the engine's frontend exposes the volume: a block
// device named for it, as longhorn-engine's tgt-blockdev frontend makes,
// once the frontend started.
func (e *engine) endpoint() string {
	if e.frontend == "" || !e.started {
		return ""
	}
	if strings.HasSuffix(e.frontend, "blockdev") {
		return "/dev/longhorn/" + e.volume
	}
	return e.frontend + "://" + e.volume
}

// frontendState is "up" once the frontend started, else "down".
func (e *engine) frontendState() string {
	if e.started {
		return "up"
	}
	return "down"
}

// VolumeExpand takes the new size at once.
func (p *proxy) VolumeExpand(_ context.Context, req *imrpc.EngineVolumeExpandRequest) (*emptypb.Empty, error) {
	size := req.GetExpand().GetSize()
	err := p.withEngine(req.GetProxyEngineRequest(), true, func(e *engine) error {
		if size < e.size {
			return status.Errorf(codes.InvalidArgument, "cannot shrink volume %s from %d to %d", e.volume, e.size, size)
		}
		e.size = size
		return nil
	})
	return &emptypb.Empty{}, err
}

// VolumeFrontendStart starts the engine's frontend.
func (p *proxy) VolumeFrontendStart(_ context.Context, req *imrpc.EngineVolumeFrontendStartRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req.GetProxyEngineRequest(), true, func(e *engine) error {
		if f := req.GetFrontendStart().GetFrontend(); f != "" {
			e.frontend = f
		}
		e.started = true
		return nil
	})
	return &emptypb.Empty{}, err
}

// VolumeFrontendShutdown stops the engine's frontend.
func (p *proxy) VolumeFrontendShutdown(_ context.Context, req *imrpc.ProxyEngineRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req, true, func(e *engine) error { e.started = false; return nil })
	return &emptypb.Empty{}, err
}

// VolumeUnmapMarkSnapChainRemovedSet keeps the setting.
func (p *proxy) VolumeUnmapMarkSnapChainRemovedSet(_ context.Context, req *imrpc.EngineVolumeUnmapMarkSnapChainRemovedSetRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req.GetProxyEngineRequest(), false, func(e *engine) error {
		e.unmapMarkRemoved = req.GetUnmapMarkSnap().GetEnabled()
		return nil
	})
	return &emptypb.Empty{}, err
}

// VolumeSnapshotMaxCountSet keeps the setting.
func (p *proxy) VolumeSnapshotMaxCountSet(_ context.Context, req *imrpc.EngineVolumeSnapshotMaxCountSetRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req.GetProxyEngineRequest(), false, func(e *engine) error {
		e.snapshotMaxCount = req.GetCount().GetCount()
		return nil
	})
	return &emptypb.Empty{}, err
}

// VolumeSnapshotMaxSizeSet keeps the setting.
func (p *proxy) VolumeSnapshotMaxSizeSet(_ context.Context, req *imrpc.EngineVolumeSnapshotMaxSizeSetRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req.GetProxyEngineRequest(), false, func(e *engine) error {
		e.snapshotMaxSize = req.GetSize().GetSize()
		return nil
	})
	return &emptypb.Empty{}, err
}

// SnapshotList answers the volume head alone (no snapshot is ever taken),
// its size the bytes the volume's replicas hold: what longhorn-manager
// sums into the volume's actualSize.
func (p *proxy) SnapshotList(_ context.Context, req *imrpc.ProxyEngineRequest) (*imrpc.EngineSnapshotListProxyResponse, error) {
	var held int64
	err := p.withEngine(req, false, func(e *engine) error {
		h := p.im.net.data
		h.mu.Lock()
		defer h.mu.Unlock()
		held = h.volumeHeldLocked(e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &imrpc.EngineSnapshotListProxyResponse{Disks: map[string]*imrpc.EngineSnapshotDiskInfo{
		volumeHead: {Name: volumeHead, Children: map[string]bool{}, Size: strconv.FormatInt(held, 10), Created: timestamppb.Now().AsTime().UTC().Format("2006-01-02T15:04:05Z")},
	}}, nil
}

// SnapshotPurgeStatus answers no purge in progress.
func (p *proxy) SnapshotPurgeStatus(_ context.Context, req *imrpc.ProxyEngineRequest) (*imrpc.EngineSnapshotPurgeStatusProxyResponse, error) {
	if err := p.withEngine(req, false, func(*engine) error { return nil }); err != nil {
		return nil, err
	}
	return &imrpc.EngineSnapshotPurgeStatusProxyResponse{Status: map[string]*enginerpc.SnapshotPurgeStatusResponse{}}, nil
}

// SnapshotCloneStatus answers no clone in progress.
func (p *proxy) SnapshotCloneStatus(_ context.Context, req *imrpc.ProxyEngineRequest) (*imrpc.EngineSnapshotCloneStatusProxyResponse, error) {
	if err := p.withEngine(req, false, func(*engine) error { return nil }); err != nil {
		return nil, err
	}
	return &imrpc.EngineSnapshotCloneStatusProxyResponse{Status: map[string]*enginerpc.SnapshotCloneStatusResponse{}}, nil
}

// BackupRestoreStatus answers no restore in progress.
func (p *proxy) BackupRestoreStatus(_ context.Context, req *imrpc.ProxyEngineRequest) (*imrpc.EngineBackupRestoreStatusProxyResponse, error) {
	if err := p.withEngine(req, false, func(*engine) error { return nil }); err != nil {
		return nil, err
	}
	return &imrpc.EngineBackupRestoreStatusProxyResponse{Status: map[string]*imrpc.EngineBackupRestoreStatus{}}, nil
}

// ReplicaList answers the engine's replicas and their modes. A replica
// whose instance manager stopped is in error from then on, as
// longhorn-engine marks a replica whose connection failed; it stays so
// until it is removed.
func (p *proxy) ReplicaList(_ context.Context, req *imrpc.ProxyEngineRequest) (*imrpc.EngineReplicaListProxyResponse, error) {
	var list []*enginerpc.ControllerReplica
	err := p.withEngine(req, false, func(e *engine) error {
		for _, addr := range e.addresses() {
			if !p.im.net.reachable(addr) {
				e.replicas[addr] = enginerpc.ReplicaMode_ERR
			}
			list = append(list, &enginerpc.ControllerReplica{
				Address: &enginerpc.ReplicaAddress{Address: addr, InstanceName: e.names[addr]},
				Mode:    e.replicas[addr],
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &imrpc.EngineReplicaListProxyResponse{ReplicaList: &enginerpc.ReplicaListReply{Replicas: list}}, nil
}

// ReplicaAdd rebuilds a replica as longhorn-engine does, and returns once
// the rebuild ended: the replica joins the engine in WO mode and is copied
// what the volume holds at the network's rebuild rate (writes meanwhile
// included), ReplicaRebuildingStatus reporting its progress, then it is
// RW, as a finished rebuild leaves it. A volume that holds nothing is
// rebuilt at once. A replica whose instance manager stopped cannot be
// reached: the call fails and the engine is unchanged. One whose disk
// fills during the copy fails with ErrNoSpace, holding what it copied,
// and is left in ERR, as longhorn-engine leaves a replica whose sync
// failed.
func (p *proxy) ReplicaAdd(ctx context.Context, req *imrpc.EngineReplicaAddRequest) (*emptypb.Empty, error) {
	addr := req.GetReplicaAddress()
	if addr == "" {
		return nil, status.Error(codes.InvalidArgument, "missing replica address")
	}
	if !p.im.net.reachable(addr) {
		return nil, status.Errorf(codes.Unavailable, "cannot connect to replica %s: connection refused", addr)
	}
	engineReq := req.GetProxyEngineRequest()
	err := p.withEngine(engineReq, true, func(e *engine) error {
		e.replicas[addr] = enginerpc.ReplicaMode_WO
		if n := req.GetReplicaName(); n != "" {
			e.names[addr] = n
		}
		e.rebuilds[addr] = &rebuildProgress{from: e.rwAddresses()}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rate := p.im.net.RebuildRate()
	chunk := max(rate*int64(rebuildTick)/int64(time.Second), 1)
	for {
		var done bool
		err := p.withEngine(engineReq, false, func(e *engine) error {
			var err error
			done, err = p.im.rebuildStep(e, addr, chunk)
			if done || err != nil {
				p.im.notifyLocked()
			}
			return err
		})
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if done {
			return &emptypb.Empty{}, nil
		}
		select {
		case <-ctx.Done():
			_ = p.withEngine(engineReq, true, func(e *engine) error {
				if _, ok := e.rebuilds[addr]; ok {
					delete(e.rebuilds, addr)
					e.replicas[addr] = enginerpc.ReplicaMode_ERR
				}
				return nil
			})
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(rebuildTick):
		}
	}
}

// ReplicaRemove removes a replica from the engine.
func (p *proxy) ReplicaRemove(_ context.Context, req *imrpc.EngineReplicaRemoveRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req.GetProxyEngineRequest(), true, func(e *engine) error {
		delete(e.replicas, req.GetReplicaAddress())
		delete(e.names, req.GetReplicaAddress())
		delete(e.rebuilds, req.GetReplicaAddress())
		return nil
	})
	return &emptypb.Empty{}, err
}

// ReplicaModeUpdate sets a replica's mode.
func (p *proxy) ReplicaModeUpdate(_ context.Context, req *imrpc.EngineReplicaModeUpdateRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req.GetProxyEngineRequest(), true, func(e *engine) error {
		if _, ok := e.replicas[req.GetReplicaAddress()]; !ok {
			return status.Errorf(codes.NotFound, "cannot find replica %s", req.GetReplicaAddress())
		}
		e.replicas[req.GetReplicaAddress()] = req.GetMode()
		return nil
	})
	return &emptypb.Empty{}, err
}

// ReplicaRebuildingStatus answers the rebuilds in progress (ReplicaAdd's),
// by replica address: rebuilding, the percentage copied, and the
// replicas copied from.
func (p *proxy) ReplicaRebuildingStatus(_ context.Context, req *imrpc.ProxyEngineRequest) (*imrpc.EngineReplicaRebuildStatusProxyResponse, error) {
	out := map[string]*enginerpc.ReplicaRebuildStatusResponse{}
	err := p.withEngine(req, false, func(e *engine) error {
		for addr, r := range e.rebuilds {
			from := ""
			if len(r.from) > 0 {
				from = r.from[0]
			}
			out[addr] = &enginerpc.ReplicaRebuildStatusResponse{
				IsRebuilding: true, Progress: r.progress, State: "in_progress",
				FromReplicaAddress: from, FromReplicaAddressList: slices.Clone(r.from),
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &imrpc.EngineReplicaRebuildStatusProxyResponse{Status: out}, nil
}

// ReplicaVerifyRebuild finds every rebuilt replica sound.
func (p *proxy) ReplicaVerifyRebuild(_ context.Context, req *imrpc.EngineReplicaVerifyRebuildRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req.GetProxyEngineRequest(), false, func(e *engine) error {
		if _, ok := e.replicas[req.GetReplicaAddress()]; !ok {
			return status.Errorf(codes.NotFound, "cannot find replica %s", req.GetReplicaAddress())
		}
		return nil
	})
	return &emptypb.Empty{}, err
}

// ReplicaRebuildingQosSet accepts any limit.
func (p *proxy) ReplicaRebuildingQosSet(_ context.Context, req *imrpc.EngineReplicaRebuildingQosSetRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req.GetProxyEngineRequest(), false, func(*engine) error { return nil })
	return &emptypb.Empty{}, err
}

// ReplicaRebuildConcurrentSyncLimitSet keeps the limit.
func (p *proxy) ReplicaRebuildConcurrentSyncLimitSet(_ context.Context, req *imrpc.EngineReplicaRebuildConcurrentSyncLimitSetRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req.GetProxyEngineRequest(), false, func(e *engine) error {
		e.rebuildSyncLimit = req.GetLimit()
		return nil
	})
	return &emptypb.Empty{}, err
}

// ReplicaRebuildConcurrentSyncLimitGet answers the limit kept.
func (p *proxy) ReplicaRebuildConcurrentSyncLimitGet(_ context.Context, req *imrpc.ProxyEngineRequest) (*imrpc.EngineReplicaRebuildConcurrentSyncLimitGetResponse, error) {
	var limit int32
	err := p.withEngine(req, false, func(e *engine) error { limit = e.rebuildSyncLimit; return nil })
	if err != nil {
		return nil, err
	}
	return &imrpc.EngineReplicaRebuildConcurrentSyncLimitGetResponse{Limit: limit}, nil
}

// MetricsGet answers an idle engine.
func (p *proxy) MetricsGet(_ context.Context, req *imrpc.ProxyEngineRequest) (*imrpc.EngineMetricsGetProxyResponse, error) {
	if err := p.withEngine(req, false, func(*engine) error { return nil }); err != nil {
		return nil, err
	}
	return &imrpc.EngineMetricsGetProxyResponse{Metrics: &enginerpc.Metrics{}}, nil
}

// CleanupBackupMountPoints has nothing to clean up.
func (p *proxy) CleanupBackupMountPoints(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// SnapshotPurge has no snapshot to purge: it finishes at once.
func (p *proxy) SnapshotPurge(_ context.Context, req *imrpc.EngineSnapshotPurgeRequest) (*emptypb.Empty, error) {
	err := p.withEngine(req.GetProxyEngineRequest(), false, func(*engine) error { return nil })
	return &emptypb.Empty{}, err
}
