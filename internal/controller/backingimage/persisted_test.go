package backingimage

import (
	"reflect"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/internal/testenv"
)

// What the mirror counts of backing images on a disk is what Longhorn's
// node controller adds to its storageScheduled: a copy at the image's
// realSize, for each image whose diskFileSpecMap lists the disk.
func TestPersisted(t *testing.T) {
	const ns, disk = "longhorn-system", "uuid-0"
	image := func(name string, size, realSize int64, disks ...string) lhv1.BackingImage {
		bi := testenv.BackingImage(ns, name, size, disks...)
		bi.Status.RealSize = realSize
		return *bi
	}
	for _, tc := range []struct {
		name   string
		images []lhv1.BackingImage
		want   map[string]int64
	}{
		{name: "a copy counts at the image's realSize",
			images: []lhv1.BackingImage{image("default-image-x7k2p", 5*gi, 3*gi, disk)},
			want:   map[string]int64{"default-image-x7k2p": 3 * gi}},
		{name: "a copy whose realSize is not known yet counts 0 (kept, not added)",
			images: []lhv1.BackingImage{image("default-image-x7k2p", 5*gi, 0, disk)},
			want:   map[string]int64{"default-image-x7k2p": 0}},
		{name: "an image on other disks only counts nothing here",
			images: []lhv1.BackingImage{image("default-image-x7k2p", 5*gi, 3*gi, "uuid-1")},
			want:   map[string]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Persisted(disk, tc.images); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("persisted %v, want %v", got, tc.want)
			}
		})
	}
}
