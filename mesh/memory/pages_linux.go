package memory

import (
	"os"
	"syscall"
)

// DropFilePages unmaps from this process the pages of the code and
// read-only data of its program and shared libraries (madvise
// MADV_DONTNEED), and returns how many bytes of address space it covered.
// The pages stay in the kernel's page cache: the next instruction or read
// that needs one maps it again (a minor fault, no disk read while the cache
// holds it), exactly as after the kernel itself reclaimed it under memory
// pressure, which it may do at any time to such pages. What the process keeps mapped afterwards is what
// it touches from then on (the C library's, loaded for cgo's name lookups,
// mostly never). Only mappings that hold nothing but their file's bytes are
// dropped (fileMappings); writable data never is.
func DropFilePages() (bytes uint64) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0
	}
	maps := fileMappings(f)
	_ = f.Close()
	for _, m := range maps {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), syscall.MADV_DONTNEED); errno == 0 {
			bytes += m.end - m.start
		}
	}
	return bytes
}
