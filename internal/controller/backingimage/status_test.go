package backingimage

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

func TestFileStatuses(t *testing.T) {
	prev := map[string]longhornv1.BackingImageDiskFileStatus{
		"old-failed": {State: longhornv1.BackingImageFileFailed, Message: "rejected earlier"},
		"old-ready":  {State: longhornv1.BackingImageFileReady},
		"retried":    {State: longhornv1.BackingImageFileFailed, Message: "rejected earlier"},
	}
	got := fileStatuses(prev, copies{
		size: 4 * gi, granted: []string{"g"}, pending: []string{"p", "retried"},
		failed: map[string]string{"f": "disk f rejected the copy: requested 4Gi, 2Gi free of limit 10Gi"},
	})
	want := map[string]longhornv1.BackingImageDiskFileStatus{
		"old-failed": {State: longhornv1.BackingImageFileFailed, Message: "rejected earlier"},
		"f":          {State: longhornv1.BackingImageFileFailed, Message: "disk f rejected the copy: requested 4Gi, 2Gi free of limit 10Gi"},
		"g":          {State: longhornv1.BackingImageFileReady},
		"p":          {State: longhornv1.BackingImageFilePending, Message: "waiting for the ledger of disk p to grant 4Gi"},
		"retried":    {State: longhornv1.BackingImageFilePending, Message: "waiting for the ledger of disk retried to grant 4Gi"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fileStatuses =\n%v\nwant\n%v", got, want)
	}
	if got := fileStatuses(nil, copies{}); got != nil {
		t.Errorf("fileStatuses of nothing = %v, want nil", got)
	}
}

func TestCopiesCondition(t *testing.T) {
	short := selection{Refused: []refusal{{Where: "n1/d1 (u1)", Why: "2Gi free of limit 10Gi, needs 4Gi"}, {Where: "node n2", Why: "not ready"}}, Holding: 1}
	cases := []struct {
		name       string
		c          copies
		status     metav1.ConditionStatus
		reason     string
		msgContain []string
	}{{
		name:   "enough copies granted",
		c:      copies{want: 2, size: 4 * gi, granted: []string{"u2", "u1"}},
		status: metav1.ConditionTrue, reason: longhornv1.BackingImageReasonCopiesScheduled,
		msgContain: []string{"2 copies of 4Gi granted, on disks u1, u2"},
	}, {
		name:   "granted beats a shortfall of extra copies",
		c:      copies{want: 1, size: 4 * gi, granted: []string{"u1"}, short: true},
		status: metav1.ConditionTrue, reason: longhornv1.BackingImageReasonCopiesScheduled,
	}, {
		name:   "no disk for a missing copy",
		c:      copies{want: 3, size: 4 * gi, granted: []string{"u3"}, pending: []string{"u4"}, short: true, sel: short},
		status: metav1.ConditionFalse, reason: longhornv1.BackingImageReasonInsufficientDisks,
		msgContain: []string{"3 copies of 4Gi wanted, 1 granted, 1 pending; no other disk can take one (1 disks hold a copy)",
			"n1/d1 (u1): 2Gi free of limit 10Gi, needs 4Gi; node n2: not ready"},
	}, {
		name:   "placed, waiting for the ledgers",
		c:      copies{want: 2, size: 4 * gi, granted: []string{"u1"}, pending: []string{"u2"}},
		status: metav1.ConditionFalse, reason: longhornv1.BackingImageReasonCopiesPending,
		msgContain: []string{"2 copies of 4Gi wanted, 1 granted; waiting for the ledgers of disks u2 to decide"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := copiesCondition(tc.c, 7)
			if got.Type != longhornv1.BackingImageConditionCopiesScheduled || got.Status != tc.status || got.Reason != tc.reason || got.ObservedGeneration != 7 {
				t.Errorf("condition %+v, want %s %s at generation 7", got, tc.status, tc.reason)
			}
			for _, part := range tc.msgContain {
				if !strings.Contains(got.Message, part) {
					t.Errorf("message %q does not contain %q", got.Message, part)
				}
			}
		})
	}
}

func TestFileStatusesBounded(t *testing.T) {
	prev := map[string]longhornv1.BackingImageDiskFileStatus{}
	for i := range maxFileStatuses {
		prev[fmt.Sprintf("old-%03d", i)] = longhornv1.BackingImageDiskFileStatus{State: longhornv1.BackingImageFileFailed, Message: "rejected earlier"}
	}
	got := fileStatuses(prev, copies{size: gi, granted: []string{"g"}, failed: map[string]string{"f": "rejected now"}})
	if len(got) != maxFileStatuses {
		t.Fatalf("%d file statuses, want at most %d", len(got), maxFileStatuses)
	}
	for _, uuid := range []string{"g", "f", "old-255"} {
		if _, ok := got[uuid]; !ok {
			t.Errorf("file status of %s was dropped", uuid)
		}
	}
	if _, ok := got["old-000"]; ok {
		t.Errorf("the first earlier failure was kept over the current ones")
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate("short", 10); got != "short" {
		t.Errorf("truncate kept %q, want it whole", got)
	}
	got := truncate(strings.Repeat("é", 10), 10) // 20 bytes
	if len(got) > 10 || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Errorf("truncate = %q (%d bytes), want at most 10 valid bytes ending in ...", got, len(got))
	}
}
