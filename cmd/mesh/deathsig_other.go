//go:build !linux

package main

import "os/exec"

// setDeathSignal has no portable equivalent outside Linux: children of a
// supervisor killed with SIGKILL keep running there.
func setDeathSignal(cmd *exec.Cmd) {}
