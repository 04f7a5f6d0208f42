//go:build !linux

package e2e

import "syscall"

// meshProcAttr starts a mesh the harness runs in a process group of its
// own (stopped as one). Only Linux can tie its life to the test binary's.
func meshProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
