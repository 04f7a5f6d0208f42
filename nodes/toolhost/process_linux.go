//go:build linux

package toolhost

import "syscall"

// sysProcAttr makes the kernel kill an MCP child when the toolhost dies,
// even by SIGKILL. Pdeathsig follows the OS thread that started the child;
// the Go runtime only retires threads locked by LockOSThread, which the
// toolhost does not use.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
