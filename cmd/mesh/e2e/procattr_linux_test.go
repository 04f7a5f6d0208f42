package e2e

import "syscall"

// meshProcAttr starts a mesh the harness runs in a process group of its
// own (stopped as one), killed by the kernel if the test binary dies first:
// a test that times out, or is killed, skips its cleanups, and its mesh
// would otherwise run on, holding ports and CPU.
func meshProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
