package mesh

import (
	"net/http"
)

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

// Errors of files, with the HTTP statuses every surface answers them with.
var (
	ErrFileTooLarge = &Error{Kind: "file_too_large", Status: http.StatusRequestEntityTooLarge, Message: "mesh: file too large"}
	ErrFileType     = &Error{Kind: "unsupported_media_type", Status: http.StatusUnsupportedMediaType, Message: "mesh: media type not accepted"}
	ErrFileNotFound = &Error{Kind: "file_not_found", Status: http.StatusNotFound, Message: "mesh: file not found"}
)

// NewFileID returns a new file id, f-<uuid>: a valid [CheckID] id.
func NewFileID() string { return "f-" + NewID() }

// FileObject is the object name of a conversation's file:
// <conversation>.<file id>.
func FileObject(conversation, fileID string) string { return conversation + "." + fileID }
