package mesh

// This file holds the files of conversations (images, documents). A
// message names its files ([Message.Files]); their bytes are objects of the
// object store mesh_files, one per file, never in mesh_sessions or
// MESH_MESSAGES, so a conversation's head and its message log stay small
// whatever its users upload.

// File is one file a message carries. A stored file (ID set) has its
// bytes in the object store under [FileObject]; a file given by URL (URL
// set, no ID) was passed on as it came: models whose API takes URLs fetch
// it themselves, and the mesh never opens it.
type File struct {
	// ID names the file within its conversation: f-<uuid>.
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size,omitempty"`
	// SHA256 is the hex digest of the bytes, checked on every read.
	SHA256 string `json:"sha256,omitempty"`
	URL    string `json:"url,omitempty"`
}
