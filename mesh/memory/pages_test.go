package memory

import (
	"strings"
	"testing"
)

// A process's smaps: the program's code, read-only data, a read-only range
// the dynamic linker wrote before protecting it (RELRO), its writable data,
// the heap, a library's code, the vDSO and a file mapped shared.
const smapsSample = `00400000-013b8000 r-xp 00000000 fe:00 9986215                            /opt/mesh bin/mesh
Size:              16096 kB
Rss:               10476 kB
Anonymous:             0 kB
013b8000-02450000 r--p 00fb8000 fe:00 9986215                            /opt/mesh bin/mesh
Size:              16992 kB
Rss:               10720 kB
Anonymous:             0 kB
02450000-02453000 r--p 02050000 fe:00 9986215                            /opt/mesh bin/mesh
Size:                 12 kB
Anonymous:            12 kB
02453000-024e0000 rw-p 02053000 fe:00 9986215                            /opt/mesh bin/mesh
Size:                576 kB
Anonymous:            40 kB
024e0000-04529000 rw-p 00000000 00:00 0 
Size:              32804 kB
Anonymous:           144 kB
7fbcc3e80000-7fbcc3fd6000 r-xp 00026000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
Size:               1368 kB
Anonymous:             0 kB
7ffd8a5f2000-7ffd8a5f4000 r-xp 00000000 00:00 0                          [vdso]
Size:                  8 kB
Anonymous:             0 kB
7fbcc4100000-7fbcc4108000 rw-s 00000000 fe:00 1234                       /data/resources.db-shm
Size:                 32 kB
Anonymous:             0 kB
7fbcc4200000-7fbcc4208000 r--s 00000000 fe:00 1235                       /data/shared.map
Size:                 32 kB
Anonymous:             0 kB
`

// TestFileMappings: only the read-only mappings of files that hold nothing
// but their file's bytes may be dropped.
func TestFileMappings(t *testing.T) {
	got := fileMappings(strings.NewReader(smapsSample))
	want := []mapping{
		{start: 0x400000, end: 0x13b8000, perms: "r-xp", path: "/opt/mesh bin/mesh"},
		{start: 0x13b8000, end: 0x2450000, perms: "r--p", path: "/opt/mesh bin/mesh"},
		{start: 0x7fbcc3e80000, end: 0x7fbcc3fd6000, perms: "r-xp", path: "/usr/lib/x86_64-linux-gnu/libc.so.6"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mappings %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
