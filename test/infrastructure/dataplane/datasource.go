package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/longhorn/backing-image-manager/api"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Source parameters of a BackingImage that the simulated data source reads
// (as the sandbox's simulation of Longhorn does, test/infrastructure/simcluster): no
// file is downloaded, so its size is declared.
const (
	// SourceParamSize is the file's size, a quantity.
	SourceParamSize = "size"
	// SourceParamRealSize is the space the file takes on a disk, a
	// quantity no larger than its size (a sparse file takes less); the
	// size when not given.
	SourceParamRealSize = "realSize"
)

// DefaultBackingImageSize is the size of a file whose data source declares
// none (neither SourceParamSize nor, for an export, the volume's size).
const DefaultBackingImageSize = 1 << 30

// DataSourceSpec is what a backing-image data source pod is started with
// (its command line and labels).
type DataSourceSpec struct {
	Name, UUID, DiskUUID, SourceType, Checksum string
	Parameters                                 map[string]string
}

// DataSource is one image's simulated backing-image data source: the file
// it prepares (no data, a size and a state) and the HTTP API
// longhorn-manager and the backing-image manager reach it through
// (bimclient.DataSourceClient's Get and Transfer).
type DataSource struct {
	mu   sync.Mutex
	info api.DataSourceInfo
}

// NewDataSource returns the data source of spec. A file whose size is
// known (SourceParamSize, an export's volume size, or
// DefaultBackingImageSize for a download, a restore or a clone) is ready
// for transfer at once; an upload waits for an upload the sandbox never
// sends (pending).
func NewDataSource(spec DataSourceSpec) *DataSource {
	size := quantity(spec.Parameters[SourceParamSize])
	if size <= 0 {
		size = quantity(spec.Parameters[lhv1.DataSourceTypeExportFromVolumeParameterVolumeSize])
	}
	if size <= 0 {
		size = DefaultBackingImageSize
	}
	realSize := quantity(spec.Parameters[SourceParamRealSize])
	if realSize <= 0 || realSize > size {
		realSize = size
	}
	info := api.DataSourceInfo{
		SourceType: spec.SourceType, Parameters: spec.Parameters, Name: spec.Name,
		FileInfo: api.FileInfo{
			DiskUUID: spec.DiskUUID, ExpectedChecksum: spec.Checksum, UUID: spec.UUID,
			FilePath:         "/data/tmp/" + spec.Name + "-" + spec.UUID,
			ModificationTime: time.Now().UTC().Format(time.RFC3339),
		},
	}
	if spec.SourceType == string(lhv1.BackingImageDataSourceTypeUpload) {
		info.State = string(lhv1.BackingImageStatePending)
	} else {
		info.State = string(lhv1.BackingImageStateReadyForTransfer)
		info.Size, info.VirtualSize, info.RealSize, info.ProcessedSize, info.Progress = size, size, realSize, size, 100
		info.CurrentChecksum = fileChecksum(spec.Name, spec.UUID, size, spec.Checksum)
	}
	return &DataSource{info: info}
}

func quantity(s string) int64 {
	if s == "" {
		return 0
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
		return 0
	}
	return q.Value()
}

// Serve serves the data source's HTTP API on l until ctx ends.
func (d *DataSource) Serve(ctx context.Context, l net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/file", d.get)
	mux.HandleFunc("POST /v1/file", d.action)
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errs := make(chan error, 1)
	go func() { errs <- s.Serve(l) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	_ = s.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Info returns what the data source reports of its file.
func (d *DataSource) Info() api.DataSourceInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	return *d.info.DeepCopy()
}

func (d *DataSource) get(w http.ResponseWriter, _ *http.Request) {
	info := d.Info()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&info)
}

// action answers the transfer action: a file ready for transfer becomes
// ready (taken over by the backing-image manager of its disk). Upload and
// the other actions are refused.
func (d *DataSource) action(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Query().Get("action") {
	case "transfer":
		d.mu.Lock()
		defer d.mu.Unlock()
		switch d.info.State {
		case string(lhv1.BackingImageStateReadyForTransfer), string(lhv1.BackingImageStateReady):
			d.info.State = string(lhv1.BackingImageStateReady)
		default:
			http.Error(w, "the file is "+d.info.State+", not ready for transfer", http.StatusInternalServerError)
		}
	default:
		http.Error(w, "the simulated data source serves no "+r.URL.Query().Get("action")+" action: it stores no data", http.StatusNotImplemented)
	}
}
