package dataplane

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	bimclient "github.com/longhorn/backing-image-manager/pkg/client"
	bimmeta "github.com/longhorn/backing-image-manager/pkg/meta"
	"github.com/longhorn/longhorn-manager/engineapi"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/longhorn/types/pkg/generated/bimrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// BackingImageManager is one disk's simulated backing-image manager: the
// backing-image files it holds (no data, their sizes and states) and the
// gRPC service longhorn-manager reaches them through, on its pod's IP.
type BackingImageManager struct {
	bimrpc.UnimplementedBackingImageManagerServiceServer

	// disk is the path of the disk it keeps files on, and net the
	// network whose disks count their bytes; nil for a manager whose files
	// take no space.
	disk string
	net  *Network

	mu       sync.Mutex
	files    map[string]*bimrpc.BackingImageResponse
	watchers map[chan struct{}]struct{}
}

// NewBackingImageManager returns a backing-image manager holding no file,
// whose files take no space.
func NewBackingImageManager() *BackingImageManager {
	return &BackingImageManager{files: map[string]*bimrpc.BackingImageResponse{}, watchers: map[chan struct{}]struct{}{}}
}

// NewDiskBackingImageManager returns the backing-image manager of the disk
// at path on n: each file it holds takes its bytes on that disk (in
// backing-images/<name>-<uuid>, where backing-image-manager keeps it), and
// a file the disk has no room for fails with ErrNoSpace.
func NewDiskBackingImageManager(path string, n *Network) *BackingImageManager {
	m := NewBackingImageManager()
	m.disk, m.net = filepath.Clean(path), n
	return m
}

// fileDir is where a file of the image name and uuid lives on the
// manager's disk, as backing-image-manager keeps it.
func (m *BackingImageManager) fileDir(name, uuid string) string {
	return filepath.Join(m.disk, "backing-images", name+"-"+uuid)
}

// Serve serves the backing-image manager's gRPC service on l until ctx
// ends, then ends every watch.
func (m *BackingImageManager) Serve(ctx context.Context, l net.Listener) error {
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	bimrpc.RegisterBackingImageManagerServiceServer(s, m)
	return serveUntil(ctx, s, l, m.stopWatches)
}

// serveUntil serves s on l until ctx ends or s fails, then calls stop and
// stops s.
func serveUntil(ctx context.Context, s *grpc.Server, l net.Listener, stop func()) error {
	errs := make(chan error, 1)
	go func() { errs <- s.Serve(l) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	stop()
	s.Stop()
	if err == grpc.ErrServerStopped {
		err = nil
	}
	return err
}

// VersionGet answers backing-image-manager v1.12's API versions.
func (m *BackingImageManager) VersionGet(context.Context, *emptypb.Empty) (*bimrpc.VersionResponse, error) {
	return &bimrpc.VersionResponse{
		Version:                          "v1.12.0",
		BackingImageManagerApiVersion:    int64(bimmeta.BackingImageManagerAPIVersion),
		BackingImageManagerApiMinVersion: int64(bimmeta.BackingImageManagerAPIMinVersion),
	}, nil
}

// Fetch takes the first file of an image over from its data source, whose
// address it is given, as backing-image-manager does: it reads the file's
// sizes and checksum from the data source, asks it to transfer, and holds
// the file ready at once.
func (m *BackingImageManager) Fetch(_ context.Context, req *bimrpc.FetchRequest) (*bimrpc.BackingImageResponse, error) {
	spec := req.GetSpec()
	if spec.GetName() == "" || spec.GetUuid() == "" || req.GetDataSourceAddress() == "" {
		return nil, status.Error(codes.InvalidArgument, "missing required argument")
	}
	if f := m.get(spec.GetName()); f != nil {
		return nil, status.Errorf(codes.AlreadyExists, "backing image %v already exists", spec.GetName())
	}
	ds := &bimclient.DataSourceClient{Remote: req.GetDataSourceAddress()}
	info, err := ds.Get()
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "getting the file of backing image %v from its data source: %v", spec.GetName(), err)
	}
	if info.State != string(lhv1.BackingImageStateReadyForTransfer) && info.State != string(lhv1.BackingImageStateReady) {
		return nil, status.Errorf(codes.FailedPrecondition, "the data source of backing image %v is %v, not ready for transfer", spec.GetName(), info.State)
	}
	if err := ds.Transfer(); err != nil {
		return nil, status.Errorf(codes.Unavailable, "transferring the file of backing image %v: %v", spec.GetName(), err)
	}
	size := spec.GetSize()
	if size <= 0 {
		size = info.Size
	}
	return m.add(&bimrpc.BackingImageSpec{
		Name: spec.GetName(), Uuid: spec.GetUuid(), Size: size, VirtualSize: info.VirtualSize, RealSize: info.RealSize,
		Checksum: info.CurrentChecksum,
	})
}

// Sync copies an image's file from the backing-image manager at the given
// address, as backing-image-manager does: it reads the source's file and
// holds the same file ready at once.
func (m *BackingImageManager) Sync(_ context.Context, req *bimrpc.SyncRequest) (*bimrpc.BackingImageResponse, error) {
	spec := req.GetSpec()
	if spec.GetName() == "" || spec.GetUuid() == "" || req.GetFromAddress() == "" || spec.GetSize() <= 0 {
		return nil, status.Error(codes.InvalidArgument, "missing required argument")
	}
	if f := m.get(spec.GetName()); f != nil {
		return nil, status.Errorf(codes.AlreadyExists, "backing image %v already exists", spec.GetName())
	}
	src, err := bimclient.NewBackingImageManagerClient(req.GetFromAddress()).Get(spec.GetName(), spec.GetUuid())
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "getting backing image %v from %v: %v", spec.GetName(), req.GetFromAddress(), err)
	}
	if src.Status.State != string(lhv1.BackingImageStateReady) {
		return nil, status.Errorf(codes.FailedPrecondition, "backing image %v at %v is %v, not ready", spec.GetName(), req.GetFromAddress(), src.Status.State)
	}
	return m.add(&bimrpc.BackingImageSpec{
		Name: spec.GetName(), Uuid: spec.GetUuid(), Size: src.Size, VirtualSize: src.VirtualSize, RealSize: src.RealSize,
		Checksum: src.Status.CurrentChecksum,
	})
}

// PrepareDownload is refused: no file can be downloaded from the sandbox.
func (m *BackingImageManager) PrepareDownload(context.Context, *bimrpc.PrepareDownloadRequest) (*bimrpc.PrepareDownloadResponse, error) {
	return nil, status.Error(codes.Unimplemented, "the simulated backing-image manager stores no data to download")
}

// Get returns the named file.
func (m *BackingImageManager) Get(_ context.Context, req *bimrpc.GetRequest) (*bimrpc.BackingImageResponse, error) {
	f := m.get(req.GetName())
	if f == nil || (req.GetUuid() != "" && f.Spec.Uuid != req.GetUuid()) {
		return nil, status.Errorf(codes.NotFound, "backing image %v(%v) not found", req.GetName(), req.GetUuid())
	}
	return f, nil
}

// List returns every file.
func (m *BackingImageManager) List(context.Context, *emptypb.Empty) (*bimrpc.ListResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := &bimrpc.ListResponse{BackingImages: map[string]*bimrpc.BackingImageResponse{}}
	for name, f := range m.files {
		out.BackingImages[name] = cloneFile(f)
	}
	return out, nil
}

// Delete removes the named file (nothing when it is not held).
func (m *BackingImageManager) Delete(_ context.Context, req *bimrpc.DeleteRequest) (*emptypb.Empty, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.files[req.GetName()]; ok && (req.GetUuid() == "" || f.Spec.Uuid == req.GetUuid()) {
		if m.net != nil {
			if err := os.RemoveAll(m.fileDir(f.Spec.Name, f.Spec.Uuid)); err != nil {
				return nil, status.Errorf(codes.Internal, "deleting the file of backing image %v: %v", f.Spec.Name, err)
			}
		}
		delete(m.files, req.GetName())
		m.notifyLocked()
	}
	return &emptypb.Empty{}, nil
}

// Watch sends an empty message on every change of the files, as
// backing-image-manager does, until the client or the server ends it.
func (m *BackingImageManager) Watch(_ *emptypb.Empty, stream bimrpc.BackingImageManagerService_WatchServer) error {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.watchers[ch] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.watchers[ch]; ok {
			delete(m.watchers, ch)
			close(ch)
		}
	}()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case _, ok := <-ch:
			if !ok {
				return status.Error(codes.Unavailable, "the backing-image manager stopped")
			}
			if err := stream.Send(&emptypb.Empty{}); err != nil {
				return err
			}
		}
	}
}

func (m *BackingImageManager) get(name string) *bimrpc.BackingImageResponse {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.files[name]; ok {
		return cloneFile(f)
	}
	return nil
}

// add holds a ready file of spec and tells the watchers. On a disk that
// has no room for its bytes (its real size, else its size) the file is
// held failed, saying why, as backing-image-manager reports a file whose
// write failed.
func (m *BackingImageManager) add(spec *bimrpc.BackingImageSpec) (*bimrpc.BackingImageResponse, error) {
	f := &bimrpc.BackingImageResponse{Spec: spec, Status: &bimrpc.BackingImageStatus{
		State: string(lhv1.BackingImageStateReady), Progress: 100, Checksum: spec.Checksum,
	}}
	if m.net != nil {
		bytes := spec.RealSize
		if bytes <= 0 {
			bytes = spec.Size
		}
		if err := m.net.data.holdFile(m.fileDir(spec.Name, spec.Uuid), bytes); err != nil {
			f.Status = &bimrpc.BackingImageStatus{State: string(lhv1.BackingImageStateFailed), ErrorMsg: err.Error()}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[spec.Name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "backing image %v already exists", spec.Name)
	}
	m.files[spec.Name] = f
	m.notifyLocked()
	return cloneFile(f), nil
}

func (m *BackingImageManager) notifyLocked() {
	for ch := range m.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (m *BackingImageManager) stopWatches() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ch := range m.watchers {
		delete(m.watchers, ch)
		close(ch)
	}
}

func cloneFile(f *bimrpc.BackingImageResponse) *bimrpc.BackingImageResponse {
	return proto.Clone(f).(*bimrpc.BackingImageResponse)
}

// fileChecksum is the checksum a file of name, uuid and size is reported
// with (a SHA-512 in hex, as backing-image-manager computes one, of those
// three, since no data is stored) unless its expected checksum is given.
func fileChecksum(name, uuid string, size int64, expected string) string {
	if expected != "" {
		return expected
	}
	sum := sha512.Sum512([]byte(name + "/" + uuid + "/" + strconv.FormatInt(size, 10)))
	return hex.EncodeToString(sum[:])
}

// backingImageManagerAddress is where the backing-image manager of a pod
// of ip serves.
func backingImageManagerAddress(ip string) string {
	return net.JoinHostPort(ip, strconv.Itoa(engineapi.BackingImageManagerDefaultPort))
}
