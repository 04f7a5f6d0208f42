package mesh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
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

// FileStore keeps the bytes of conversations' files in the object store
// mesh_files ([BucketFiles]).
type FileStore struct {
	obs jetstream.ObjectStore
}

// NewFileStore wraps a bound or provisioned object store.
func NewFileStore(obs jetstream.ObjectStore) *FileStore { return &FileStore{obs: obs} }

// Put stores data as the file f of conversation and returns f with its
// id, size and digest set.
func (s *FileStore) Put(ctx context.Context, conversation string, f File, data []byte) (File, error) {
	if err := CheckID(conversation); err != nil {
		return File{}, err
	}
	if f.ID == "" {
		f.ID = NewFileID()
	}
	if err := CheckID(f.ID); err != nil {
		return File{}, err
	}
	sum := sha256.Sum256(data)
	f.Size, f.SHA256, f.URL = int64(len(data)), hex.EncodeToString(sum[:]), ""
	_, err := s.obs.Put(ctx, jetstream.ObjectMeta{
		Name:    FileObject(conversation, f.ID),
		Headers: map[string][]string{"Content-Type": {f.MediaType}},
	}, bytes.NewReader(data))
	if err != nil {
		return File{}, fmt.Errorf("put file %s: %w", f.ID, err)
	}
	return f, nil
}

// Get reads the bytes of conversation's file f (its ID, and its digest
// when set, as a message names them) and returns them with the file as
// stored (its media type). A stored object whose digest differs is refused.
func (s *FileStore) Get(ctx context.Context, conversation string, f File) ([]byte, File, error) {
	if CheckID(conversation) != nil || CheckID(f.ID) != nil {
		return nil, File{}, ErrFileNotFound
	}
	res, err := s.obs.Get(ctx, FileObject(conversation, f.ID))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, File{}, ErrFileNotFound
	}
	if err != nil {
		return nil, File{}, fmt.Errorf("get file %s: %w", f.ID, err)
	}
	defer res.Close()
	data, err := io.ReadAll(res)
	if err != nil {
		return nil, File{}, fmt.Errorf("read file %s: %w", f.ID, err)
	}
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:])
	if f.SHA256 != "" && !strings.EqualFold(sum, f.SHA256) {
		return nil, File{}, fmt.Errorf("file %s: digest differs from the message's", f.ID)
	}
	stored := File{ID: f.ID, Name: f.Name, Size: int64(len(data)), SHA256: sum, MediaType: f.MediaType}
	if info, err := res.Info(); err == nil && info.Headers != nil {
		if mt := info.Headers.Get("Content-Type"); mt != "" {
			stored.MediaType = mt
		}
	}
	return data, stored, nil
}
