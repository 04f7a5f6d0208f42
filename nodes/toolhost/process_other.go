//go:build !linux

package toolhost

import "syscall"

// sysProcAttr has no parent-death signal outside Linux: a child outlives a
// toolhost killed by SIGKILL there, and ends when it reads EOF on stdin.
func sysProcAttr() *syscall.SysProcAttr { return nil }
