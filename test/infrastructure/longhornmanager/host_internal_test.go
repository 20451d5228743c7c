package longhornmanager

import (
	"fmt"
	"testing"

	lhcltypes "github.com/longhorn/go-common-libs/types"
	"golang.org/x/sys/unix"
)

func TestThisHostGivesADiskWithoutFilesystemIDOneOfItsDevice(t *testing.T) {
	run := func(path, id string) string {
		t.Helper()
		res, err := thisHost{}.Run(func() (interface{}, error) { return lhcltypes.DiskStat{Path: path, DiskID: id}, nil })
		if err != nil {
			t.Fatal(err)
		}
		return res.(lhcltypes.DiskStat).DiskID
	}
	if got := run("/proc", "00ab00000001"); got != "00ab00000001" {
		t.Errorf("a filesystem ID statfs reported: %q; want it kept", got)
	}
	for _, path := range []string{"/proc", "/sys"} {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		// The kernel's u64_to_fsid(dev), then io.GetDiskStat's format.
		fsid := unix.Fsid{Val: [2]int32{int32(uint32(st.Dev)), int32(uint32(st.Dev >> 32))}}
		var v uint64
		for _, w := range fsid.Val {
			v = v<<32 | uint64(uint32(w))
		}
		if got, want := run(path, noFilesystemID), fmt.Sprintf("%012x", v); got != want {
			t.Errorf("%s, on device %#x, without a filesystem ID: %q; want %q", path, st.Dev, got, want)
		}
	}
}
