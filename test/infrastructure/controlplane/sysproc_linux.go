package controlplane

import "syscall"

// childAttr returns how a control-plane process is started: in its own
// process group (so a ^C to the caller's terminal leaves its shutdown to
// the caller), and killed by the kernel when the thread that started it
// exits (the Go runtime does not end its threads; the Reaper covers the
// rest).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// OwnMountNamespace starts the process in a mount namespace of its own, so
// that what it mounts is seen by it alone and goes with it.
func OwnMountNamespace() ProcessOption {
	return func(a *syscall.SysProcAttr) { a.Cloneflags |= syscall.CLONE_NEWNS }
}
