package dataplane

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/longhorn/types/pkg/generated/smrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// NFSPort is where a share manager's NFS server (NFS-Ganesha) serves on
// its pod's IP, the port of the Service Longhorn's share manager
// controller creates for it.
const NFSPort = 2049

// ShareManagerDeviceCheckInterval is how often a share manager looks for
// its volume's block device until it appears, as longhorn-share-manager's
// daemon does (its waitBetweenChecks, 5 s; the first look is at its
// start).
const ShareManagerDeviceCheckInterval = 5 * time.Second

// BlockDevices tells whether a volume's block device (/dev/longhorn/<volume>)
// exists on a node: what a share manager on that node waits for.
type BlockDevices interface {
	BlockDevice(node, volume string) bool
}

// NodeInstanceManagers are the nodes' instance managers by node name; a
// volume's block device exists on a node when an engine of the volume runs
// there with its block-device frontend started.
type NodeInstanceManagers map[string]*InstanceManager

// BlockDevice reports whether volume's block device exists on node.
func (m NodeInstanceManagers) BlockDevice(node, volume string) bool {
	im := m[node]
	return im != nil && im.BlockDevice(volume)
}

// BlockDevice reports whether volume's block device (/dev/longhorn/<volume>)
// exists on the instance manager's node: an engine of the volume runs
// there with its blockdev frontend started, as longhorn-engine's
// tgt-blockdev frontend makes the device.
func (im *InstanceManager) BlockDevice(volume string) bool {
	im.mu.Lock()
	defer im.mu.Unlock()
	for _, in := range im.instances {
		if e := in.engine; e != nil && e.volume == volume && e.endpoint() == "/dev/longhorn/"+volume {
			return true
		}
	}
	return false
}

// ShareManager is one RWX volume's simulated share manager
// (longhorn-share-manager v1.12's daemon in its pod): it waits for the
// volume's block device on its node, checking at its start and every
// ShareManagerDeviceCheckInterval, then "mounts and exports" the volume
// and starts its NFS server, which listens on NFSPort on the pod's IP (and
// answers nothing: no NFS is served, nothing mounts it); its gRPC service
// (port 9600, longhorn-share-manager's smrpc definitions and gRPC health)
// answers what longhorn-manager calls: Mount and Unmount (the share manager
// controller), FilesystemTrim (Longhorn's API), FilesystemResize (the CSI
// node server) and the health check (the Kubernetes pod controller's
// IsServing). Once started, the export never fails on its own.
type ShareManager struct {
	smrpc.UnimplementedShareManagerServiceServer

	volume string
	// device reports whether the volume's block device exists.
	device func() bool

	mu sync.Mutex
	// nfs is the NFS server's listener once it runs.
	nfs net.Listener
	// exported is whether the volume is mounted and exported.
	exported bool
}

// NewShareManager returns the share manager of volume, whose block device
// exists when device says so.
func NewShareManager(volume string, device func() bool) *ShareManager {
	return &ShareManager{volume: volume, device: device}
}

// Serve serves the share manager's gRPC service on l, and its NFS server on
// l's IP at NFSPort once the volume's device appeared, until ctx ends.
func (m *ShareManager) Serve(ctx context.Context, l net.Listener) error {
	ip, _, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, shareManagerHealth{m: m})
	smrpc.RegisterShareManagerServiceServer(s, m)
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- m.run(runCtx, ip) }()
	err = serveUntil(ctx, s, l, stopRun)
	if runErr := <-runDone; err == nil {
		err = runErr
	}
	return err
}

// run waits for the device, then starts the NFS server on ip, as the
// daemon's Run loop does: a look at once, then one every
// ShareManagerDeviceCheckInterval. An NFS port still held (by the share
// manager of a pod that had this IP and is stopping) is tried again at the
// next look.
func (m *ShareManager) run(ctx context.Context, ip string) error {
	var l net.Listener
	for {
		if m.device() {
			var err error
			if l, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(NFSPort))); err == nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(ShareManagerDeviceCheckInterval):
		}
	}
	m.mu.Lock()
	m.nfs, m.exported = l, true
	m.mu.Unlock()
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	// The NFS server accepts connections (a kubelet's or a client's) and
	// serves nothing on them.
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		_ = conn.Close()
	}
}

// nfsRunning reports whether the NFS server runs.
func (m *ShareManager) nfsRunning() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nfs != nil
}

// Exported reports whether the volume is mounted and exported.
func (m *ShareManager) Exported() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exported
}

// Mount mounts and exports the volume again after an Unmount, as the
// daemon does; nothing when the NFS server does not run yet (the daemon
// exports it when it starts) or it is exported.
func (m *ShareManager) Mount(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nfs == nil || m.exported {
		return &emptypb.Empty{}, nil
	}
	if !m.device() {
		return nil, status.Errorf(codes.Internal, "failed to mount volume %v: its device /dev/longhorn/%v does not exist", m.volume, m.volume)
	}
	m.exported = true
	return &emptypb.Empty{}, nil
}

// Unmount unexports and unmounts the volume; nothing when the NFS server
// does not run.
func (m *ShareManager) Unmount(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nfs != nil {
		m.exported = false
	}
	return &emptypb.Empty{}, nil
}

// FilesystemTrim trims nothing: it answers as the daemon does when the
// device is missing or the volume not mounted, and succeeds otherwise.
func (m *ShareManager) FilesystemTrim(context.Context, *smrpc.FilesystemTrimRequest) (*emptypb.Empty, error) {
	if !m.device() {
		return &emptypb.Empty{}, status.Errorf(codes.FailedPrecondition, "volume %v is not valid", m.volume)
	}
	if !m.Exported() {
		return &emptypb.Empty{}, status.Errorf(codes.InvalidArgument, "/export/%v is not a mount point", m.volume)
	}
	return &emptypb.Empty{}, nil
}

// FilesystemResize resizes nothing: it answers as the daemon does when the
// device is missing or the volume not mounted, and succeeds otherwise.
func (m *ShareManager) FilesystemResize(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	if !m.device() {
		return &emptypb.Empty{}, status.Errorf(codes.FailedPrecondition, "volume %v is not valid", m.volume)
	}
	if !m.Exported() {
		return &emptypb.Empty{}, status.Errorf(codes.Internal, "/export/%v is not mounted", m.volume)
	}
	return &emptypb.Empty{}, nil
}

// shareManagerHealth is the share manager's gRPC health check: serving
// while the volume is exported, as the daemon's health check server
// answers (with an error otherwise).
type shareManagerHealth struct {
	healthpb.UnimplementedHealthServer
	m *ShareManager
}

func (h shareManagerHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.m.Exported() {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, errors.New("share manager gRPC server is not running")
}
