//go:build !linux

package controlplane

import "syscall"

// childAttr returns how a control-plane process is started: in its own
// process group; without Linux's parent death signal, the Reaper alone
// stops it when the caller dies.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// OwnMountNamespace is Linux's alone: elsewhere it changes nothing, and a
// process that needs one refuses to mount.
func OwnMountNamespace() ProcessOption { return func(*syscall.SysProcAttr) {} }
