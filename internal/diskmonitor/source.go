package diskmonitor

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Measurement is what a Source found of one disk.
type Measurement struct {
	// UUID identifies the disk; it names the disk's DiskSchedule.
	UUID string
	// Type is the disk's type.
	Type longhornv1.DiskType
	// StorageMaximum is the disk's size in bytes.
	StorageMaximum int64
	// StorageAvailable is the disk's actual free space in bytes.
	StorageAvailable int64
}

// Source measures disks.
type Source interface {
	// Measure returns the measurement of the disk with the given name and spec.
	Measure(name string, spec longhornv1.DiskSpec) (Measurement, error)
}

// UUIDFile is the file on each disk that keeps the disk's UUID.
const UUIDFile = "longhorn-disk.cfg"

// Statfs measures filesystem disks with statfs(2) and keeps each disk's UUID
// in UUIDFile at the disk's root, created on first sight.
type Statfs struct{}

// Measure implements Source.
func (Statfs) Measure(_ string, spec longhornv1.DiskSpec) (Measurement, error) {
	if spec.DiskType == longhornv1.DiskTypeBlock {
		return Measurement{}, fmt.Errorf("block disk %s: measuring block devices is not supported", spec.Path)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(spec.Path, &st); err != nil {
		return Measurement{}, fmt.Errorf("statfs %s: %w", spec.Path, err)
	}
	uuid, err := diskUUID(spec.Path)
	if err != nil {
		return Measurement{}, err
	}
	return Measurement{
		UUID:             uuid,
		Type:             longhornv1.DiskTypeFilesystem,
		StorageMaximum:   int64(st.Blocks) * st.Bsize,
		StorageAvailable: int64(st.Bavail) * st.Bsize,
	}, nil
}

type diskConfig struct {
	DiskUUID string `json:"diskUUID"`
}

// diskUUID reads the disk's UUID from UUIDFile, creating the file with a new
// UUID when it does not exist.
func diskUUID(path string) (string, error) {
	file := filepath.Join(path, UUIDFile)
	data, err := os.ReadFile(file)
	if err == nil {
		var cfg diskConfig
		if err := json.Unmarshal(data, &cfg); err != nil || cfg.DiskUUID == "" {
			return "", fmt.Errorf("reading the disk UUID from %s: malformed file", file)
		}
		return cfg.DiskUUID, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading the disk UUID from %s: %w", file, err)
	}
	cfg := diskConfig{DiskUUID: newUUID()}
	data, _ = json.Marshal(cfg)
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", fmt.Errorf("writing the disk UUID to %s: %w", file, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return "", fmt.Errorf("writing the disk UUID to %s: %w", file, err)
	}
	return cfg.DiskUUID, nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Static is a Source with fixed measurements by disk name, standing in for
// real disks in tests and the sandbox. A disk it does not know fails to measure.
type Static map[string]Measurement

// Measure implements Source.
func (s Static) Measure(name string, _ longhornv1.DiskSpec) (Measurement, error) {
	m, ok := s[name]
	if !ok {
		return Measurement{}, fmt.Errorf("disk %s is not in the static table", name)
	}
	return m, nil
}
