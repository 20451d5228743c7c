package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// reaperScript is the reaper's program, a POSIX shell reading one line per
// thing to clean up ("pid N", "dir PATH") until "stop" (the owner cleaned
// up itself) or the end of its input (the owner died, however it died):
// then it kills every process group and process it was given and removes
// the directories.
const reaperScript = `pids=""; dirs=""
while IFS= read -r line; do
	case "$line" in
	stop) exit 0 ;;
	"pid "*) pids="$pids ${line#pid }" ;;
	"dir "*) dirs="$dirs
${line#dir }" ;;
	esac
done
for p in $pids; do kill -KILL -- "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
printf '%s\n' "$dirs" | while IFS= read -r d; do [ -n "$d" ] && rm -rf -- "$d"; done
exit 0`

// Reaper makes the processes and directories a sandbox or test creates
// die with it: a small shell process, in a process group of its own, that
// holds the read end of a pipe whose write end only the owner holds. When
// the owner exits without calling Stop — SIGKILL, a `go test -timeout`
// panic, CI's time limit — the pipe closes and the reaper kills what it
// was given. Processes started with StartProcess also carry Linux's parent
// death signal; those started by others (envtest's etcd and kube-apiserver)
// have only the reaper.
type Reaper struct {
	mu      sync.Mutex
	cmd     *exec.Cmd
	in      io.WriteCloser
	stopped bool
}

// StartReaper starts a reaper.
func StartReaper() (*Reaper, error) {
	cmd := exec.Command("/bin/sh", "-c", reaperScript)
	// Its own process group: a ^C to the owner's terminal reaches the
	// owner, which then stops what it started and stops the reaper.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("creating the reaper's pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the reaper: %w", err)
	}
	return &Reaper{cmd: cmd, in: in}, nil
}

// Watch makes the reaper kill pid (and its process group, if it leads
// one) should the owner die.
func (r *Reaper) Watch(pid int) error { return r.send("pid " + strconv.Itoa(pid)) }

// RemoveDir makes the reaper remove dir should the owner die.
func (r *Reaper) RemoveDir(dir string) error { return r.send("dir " + dir) }

func (r *Reaper) send(line string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return errors.New("the reaper is stopped")
	}
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		return fmt.Errorf("telling the reaper %q: %w", line, err)
	}
	return nil
}

// Stop tells the reaper that the owner cleaned up itself and waits (at
// most a few seconds) for it to exit without touching anything.
func (r *Reaper) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.stopped = true
	_, werr := io.WriteString(r.in, "stop\n")
	cerr := r.in.Close()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		return errors.Join(werr, cerr, err)
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		return errors.Join(werr, cerr, errors.New("the reaper did not stop within 5s and was killed"))
	}
}
