//go:build !linux

package memory

// DropFilePages does nothing outside Linux, and returns 0.
func DropFilePages() uint64 { return 0 }
