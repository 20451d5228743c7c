package gate

import (
	"reflect"
	"strings"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/internal/testenv"
)

// What a BackingImage write of Longhorn's asks of the ledgers: a copy on
// each disk it adds to spec.diskFileSpecMap, at status.realSize, the size
// Longhorn's node controller counts.
func TestCopyNeed(t *testing.T) {
	const ns = "longhorn-system"
	// A qcow2 image of 10Gi whose file takes 3Gi, with a copy on uuid-0.
	image := func(realSize int64, disks ...string) *lhv1.BackingImage {
		bi := testenv.BackingImage(ns, "default-image-x7k2p", 10*gi, disks...)
		bi.Status.RealSize = realSize
		return bi
	}
	for _, tc := range []struct {
		name    string
		old, bi *lhv1.BackingImage
		disks   []string
		size    int64
		reason  string
	}{
		{name: "a disk added asks a copy of the image's realSize, not its size",
			old: image(3*gi, "uuid-0"), bi: image(3*gi, "uuid-0", "uuid-1"), disks: []string{"uuid-1"}, size: 3 * gi},
		{name: "an image created with copies asks each",
			bi: image(3*gi, "uuid-1", "uuid-0"), disks: []string{"uuid-0", "uuid-1"}, size: 3 * gi},
		{name: "a real size not known yet asks nothing: the mirror adopts the copies later",
			old: image(0, "uuid-0"), bi: image(0, "uuid-0", "uuid-1"), reason: "real size is not known yet"},
		{name: "no disk added asks nothing",
			old: image(3*gi, "uuid-0", "uuid-1"), bi: image(3*gi, "uuid-1"), reason: "gains no disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disks, size, reason := copyNeed(tc.old, tc.bi)
			if !reflect.DeepEqual(disks, tc.disks) || size != tc.size {
				t.Errorf("copies on %v of %d (%q), want on %v of %d", disks, size, reason, tc.disks, tc.size)
			}
			if !strings.Contains(reason, tc.reason) || (tc.reason == "") != (reason == "") {
				t.Errorf("reason %q, want %q", reason, tc.reason)
			}
		})
	}
}
