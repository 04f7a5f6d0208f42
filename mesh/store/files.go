package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// FileStore keeps the bytes of conversations' files in the object store
// mesh_files ([BucketFiles]).
type FileStore struct {
	obs jetstream.ObjectStore
}

// NewFileStore wraps a bound or provisioned object store.
func NewFileStore(obs jetstream.ObjectStore) *FileStore { return &FileStore{obs: obs} }

// Put stores data as the file f of conversation and returns f with its
// id, size and digest set.
func (s *FileStore) Put(ctx context.Context, conversation string, f mesh.File, data []byte) (mesh.File, error) {
	if err := mesh.CheckID(conversation); err != nil {
		return mesh.File{}, err
	}
	if f.ID == "" {
		f.ID = NewFileID()
	}
	if err := mesh.CheckID(f.ID); err != nil {
		return mesh.File{}, err
	}
	sum := sha256.Sum256(data)
	f.Size, f.SHA256, f.URL = int64(len(data)), hex.EncodeToString(sum[:]), ""
	_, err := s.obs.Put(ctx, jetstream.ObjectMeta{
		Name:    FileObject(conversation, f.ID),
		Headers: map[string][]string{"Content-Type": {f.MediaType}},
	}, bytes.NewReader(data))
	if err != nil {
		return mesh.File{}, fmt.Errorf("put file %s: %w", f.ID, err)
	}
	return f, nil
}

// Get reads the bytes of conversation's file f (its ID, and its digest
// when set, as a message names them) and returns them with the file as
// stored (its media type). A stored object whose digest differs is refused.
func (s *FileStore) Get(ctx context.Context, conversation string, f mesh.File) ([]byte, mesh.File, error) {
	if mesh.CheckID(conversation) != nil || mesh.CheckID(f.ID) != nil {
		return nil, mesh.File{}, mesh.ErrFileNotFound
	}
	res, err := s.obs.Get(ctx, FileObject(conversation, f.ID))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, mesh.File{}, mesh.ErrFileNotFound
	}
	if err != nil {
		return nil, mesh.File{}, fmt.Errorf("get file %s: %w", f.ID, err)
	}
	defer res.Close()
	data, err := io.ReadAll(res)
	if err != nil {
		return nil, mesh.File{}, fmt.Errorf("read file %s: %w", f.ID, err)
	}
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:])
	if f.SHA256 != "" && !strings.EqualFold(sum, f.SHA256) {
		return nil, mesh.File{}, fmt.Errorf("file %s: digest differs from the message's", f.ID)
	}
	stored := mesh.File{ID: f.ID, Name: f.Name, Size: int64(len(data)), SHA256: sum, MediaType: f.MediaType}
	if info, err := res.Info(); err == nil && info.Headers != nil {
		if mt := info.Headers.Get("Content-Type"); mt != "" {
			stored.MediaType = mt
		}
	}
	return data, stored, nil
}

// NewFileID returns a new file id, f-<uuid>: a valid [CheckID] id.
func NewFileID() string { return "f-" + mesh.NewID() }

// FileObject is the object name of a conversation's file:
// <conversation>.<file id>.
func FileObject(conversation, fileID string) string { return conversation + "." + fileID }
