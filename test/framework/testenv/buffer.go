package testenv

import (
	"os"
	"strings"
	"sync"
	"testing"
)

// LockedBuffer collects text written from several goroutines, such as a
// sandbox's progress lines, and returns it whole.
type LockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (w *LockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// String returns what was written so far.
func (w *LockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// LogTail logs the last 4000 bytes of the log file at path, for a failed
// test to show what a component of its sandbox said last.
func LogTail(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Logf("reading %s: %v", path, err)
		return
	}
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	t.Logf("end of %s:\n%s", path, data)
}
