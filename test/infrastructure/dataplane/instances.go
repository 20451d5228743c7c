package dataplane

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	imtypes "github.com/longhorn/longhorn-instance-manager/pkg/types"
	"github.com/longhorn/types/pkg/generated/enginerpc"
	"github.com/longhorn/types/pkg/generated/imrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// firstPort is the first port an instance manager gives its instances, as
// longhorn-instance-manager's process manager does (its port range starts
// at 10000).
const firstPort = 10000

// instance is one engine or replica the instance manager runs.
type instance struct {
	spec   *imrpc.InstanceSpec
	status *imrpc.InstanceStatus
	// engine is the engine's state; nil for a replica.
	engine *engine
}

// engine is what an engine instance answers through the proxy.
type engine struct {
	volume   string
	size     int64
	frontend string
	started  bool
	// replicas are the engine's replicas by address (tcp://ip:port), each
	// with its mode.
	replicas map[string]enginerpc.ReplicaMode
	// names are the replicas' instance names by address, when given.
	names               map[string]string
	snapshotMaxCount    int32
	snapshotMaxSize     int64
	unmapMarkRemoved    bool
	rebuildSyncLimit    int32
	expansionInProgress bool
	// rebuilds are the rebuilds in progress by replica address.
	rebuilds map[string]*rebuildProgress
}

// response is the instance as the instance service answers it.
func (in *instance) response() *imrpc.InstanceResponse {
	return &imrpc.InstanceResponse{
		Spec:   proto.Clone(in.spec).(*imrpc.InstanceSpec),
		Status: proto.Clone(in.status).(*imrpc.InstanceStatus),
	}
}

// instanceService is the instance manager's instance service.
type instanceService struct {
	imrpc.UnimplementedInstanceServiceServer
	im *InstanceManager
}

// InstanceCreate starts an instance at once, running, with the ports it
// asks for.
func (s *instanceService) InstanceCreate(_ context.Context, req *imrpc.InstanceCreateRequest) (*imrpc.InstanceResponse, error) {
	spec := req.GetSpec()
	if spec.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "missing instance name")
	}
	if spec.GetDataEngine() != imrpc.DataEngine_DATA_ENGINE_V1 {
		return nil, status.Errorf(codes.Unimplemented, "instance %s: only the v1 data engine is simulated", spec.GetName())
	}
	if spec.GetProcessInstanceSpec() == nil {
		return nil, status.Errorf(codes.InvalidArgument, "instance %s: missing process instance spec", spec.GetName())
	}
	im := s.im
	im.mu.Lock()
	defer im.mu.Unlock()
	if _, ok := im.instances[spec.GetName()]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "instance %s already exists", spec.GetName())
	}
	in, err := im.newInstance(spec)
	if err != nil {
		return nil, err
	}
	im.instances[spec.GetName()] = in
	im.notifyLocked()
	return in.response(), nil
}

// newInstance builds a running instance of spec, its ports taken from the
// instance manager's range. im.mu is held.
func (im *InstanceManager) newInstance(spec *imrpc.InstanceSpec) (*instance, error) {
	count := max(spec.GetPortCount(), 1)
	start := im.nextPort
	im.nextPort += count
	in := &instance{
		spec: proto.Clone(spec).(*imrpc.InstanceSpec),
		status: &imrpc.InstanceStatus{
			State:     imtypes.ProcessStateRunning,
			PortStart: start,
			PortEnd:   start + count - 1,
		},
	}
	if spec.GetType() == imtypes.InstanceTypeEngine {
		e, err := parseEngine(spec)
		if err != nil {
			return nil, err
		}
		in.engine = e
		in.status.Frontend = e.frontend
	}
	if spec.GetType() == imtypes.InstanceTypeReplica {
		if dir := replicaDataDir(spec.GetProcessInstanceSpec().GetArgs()); dir != "" {
			if err := im.net.data.replicaStarted(fmt.Sprintf("%s:%d", im.ip, start), dir); err != nil {
				return nil, status.Errorf(codes.Internal, "replica %s: %v", spec.GetName(), err)
			}
		}
	}
	return in, nil
}

// parseEngine reads an engine's volume, size, frontend and replicas from
// the arguments longhorn-manager starts longhorn-engine's controller with.
func parseEngine(spec *imrpc.InstanceSpec) (*engine, error) {
	e := &engine{volume: spec.GetVolumeName(), replicas: map[string]enginerpc.ReplicaMode{}, names: map[string]string{}, rebuilds: map[string]*rebuildProgress{}}
	args := spec.GetProcessInstanceSpec().GetArgs()
	for i := 0; i < len(args); i++ {
		value := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch args[i] {
		case "controller":
			if v := value(); e.volume == "" {
				e.volume = v
			}
		case "--frontend":
			e.frontend = value()
		case "--size":
			size, err := strconv.ParseInt(value(), 10, 64)
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "engine %s: --size: %v", spec.GetName(), err)
			}
			e.size = size
		case "--replica":
			e.replicas[value()] = enginerpc.ReplicaMode_RW
		case "--snapshot-max-count":
			n, _ := strconv.ParseInt(value(), 10, 32)
			e.snapshotMaxCount = int32(n)
		case "--snapshot-max-size":
			e.snapshotMaxSize, _ = strconv.ParseInt(value(), 10, 64)
		}
	}
	// longhorn-engine's controller starts its frontend as it starts with
	// its replicas (controller.Start), so an engine given both serves its
	// endpoint once it runs.
	e.started = e.frontend != "" && len(e.replicas) > 0
	return e, nil
}

// withInstance answers fn's response for the named instance, the instance
// manager locked; a missing instance is NotFound in the words
// longhorn-manager looks for ("cannot find").
func (im *InstanceManager) withInstance(name string, fn func(*instance) *imrpc.InstanceResponse) (*imrpc.InstanceResponse, error) {
	im.mu.Lock()
	defer im.mu.Unlock()
	in, ok := im.instances[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "cannot find instance %s", name)
	}
	return fn(in), nil
}

// InstanceDelete stops and removes an instance.
func (s *instanceService) InstanceDelete(_ context.Context, req *imrpc.InstanceDeleteRequest) (*imrpc.InstanceResponse, error) {
	im := s.im
	return im.withInstance(req.GetName(), func(in *instance) *imrpc.InstanceResponse {
		delete(im.instances, req.GetName())
		im.notifyLocked()
		resp := in.response()
		resp.Status.State = imtypes.ProcessStateStopped
		resp.Deleted = true
		return resp
	})
}

// InstanceGet answers one instance.
func (s *instanceService) InstanceGet(_ context.Context, req *imrpc.InstanceGetRequest) (*imrpc.InstanceResponse, error) {
	return s.im.withInstance(req.GetName(), (*instance).response)
}

// InstanceList answers every instance.
func (s *instanceService) InstanceList(context.Context, *emptypb.Empty) (*imrpc.InstanceListResponse, error) {
	im := s.im
	im.mu.Lock()
	defer im.mu.Unlock()
	resp := &imrpc.InstanceListResponse{Instances: make(map[string]*imrpc.InstanceResponse, len(im.instances))}
	for name, in := range im.instances {
		resp.Instances[name] = in.response()
	}
	return resp, nil
}

// InstanceReplace replaces an instance with one of a new spec, running at
// once (what an engine's live upgrade does).
func (s *instanceService) InstanceReplace(_ context.Context, req *imrpc.InstanceReplaceRequest) (*imrpc.InstanceResponse, error) {
	spec := req.GetSpec()
	im := s.im
	im.mu.Lock()
	defer im.mu.Unlock()
	if _, ok := im.instances[spec.GetName()]; !ok {
		return nil, status.Errorf(codes.NotFound, "cannot find instance %s", spec.GetName())
	}
	in, err := im.newInstance(spec)
	if err != nil {
		return nil, err
	}
	im.instances[spec.GetName()] = in
	im.notifyLocked()
	return in.response(), nil
}

// InstanceWatch sends an empty message on every change of the instances,
// until the client goes or the instance manager stops.
func (s *instanceService) InstanceWatch(_ *emptypb.Empty, stream imrpc.InstanceService_InstanceWatchServer) error {
	changes, cancel := s.im.watch()
	defer cancel()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case _, ok := <-changes:
			if !ok {
				return nil
			}
			if err := stream.Send(&emptypb.Empty{}); err != nil {
				return err
			}
		}
	}
}

// InstanceLog answers no log lines.
func (s *instanceService) InstanceLog(*imrpc.InstanceLogRequest, imrpc.InstanceService_InstanceLogServer) error {
	return nil
}

// LogSetLevel accepts any level.
func (s *instanceService) LogSetLevel(context.Context, *imrpc.LogSetLevelRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// LogSetFlags accepts any flags.
func (s *instanceService) LogSetFlags(context.Context, *imrpc.LogSetFlagsRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// LogGetLevel answers info.
func (s *instanceService) LogGetLevel(context.Context, *imrpc.LogGetLevelRequest) (*imrpc.LogGetLevelResponse, error) {
	return &imrpc.LogGetLevelResponse{Level: "info"}, nil
}

// LogGetFlags answers none.
func (s *instanceService) LogGetFlags(context.Context, *imrpc.LogGetFlagsRequest) (*imrpc.LogGetFlagsResponse, error) {
	return &imrpc.LogGetFlagsResponse{}, nil
}

// VersionGet answers longhorn-instance-manager v1.12.0's API versions.
func (s *instanceService) VersionGet(context.Context, *emptypb.Empty) (*imrpc.VersionResponse, error) {
	return instanceManagerVersion(), nil
}

// processManager is the instance manager's process manager service, which
// longhorn-manager reaches only to read the API version of an instance
// manager it has not met yet.
type processManager struct {
	imrpc.UnimplementedProcessManagerServiceServer
}

// VersionGet answers longhorn-instance-manager v1.12.0's API versions.
func (processManager) VersionGet(context.Context, *emptypb.Empty) (*imrpc.VersionResponse, error) {
	return instanceManagerVersion(), nil
}

// engineOf returns the engine a proxy request names, by engine name, else
// by its address (ip:port); im.mu is held.
func (im *InstanceManager) engineOf(req *imrpc.ProxyEngineRequest) (*engine, error) {
	if in, ok := im.instances[req.GetEngineName()]; ok && in.engine != nil {
		return in.engine, nil
	}
	for _, in := range im.instances {
		if in.engine == nil {
			continue
		}
		if req.GetAddress() == fmt.Sprintf("%s:%d", im.ip, in.status.PortStart) {
			return in.engine, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "cannot find engine %s (%s)", req.GetEngineName(), req.GetAddress())
}

// addresses returns an engine's replica addresses, sorted.
func (e *engine) addresses() []string {
	out := make([]string, 0, len(e.replicas))
	for addr := range e.replicas {
		out = append(out, addr)
	}
	slices.Sort(out)
	return out
}
