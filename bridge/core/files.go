package core

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// This file takes the files of users' messages (REST files, AG-UI binary
// parts, A2A file parts): it checks them against the files section's
// limits, stores their bytes in the object store mesh_files under the
// conversation, and gives the message the references (mesh.File) it
// carries. A file given by URL is not fetched: the bridge never opens a
// connection a client chose (no request forgery against the mesh's own
// network); the URL goes to the model's API as it came, and an API that
// takes no URL for that kind of file gets a placeholder.

// Upload is one file a client sent with a message: its bytes (base64, as
// every surface carries them) or a URL.
type Upload struct {
	Name      string
	MediaType string
	// Base64 is the file's bytes in standard (or URL-safe) base64.
	Base64 string
	// URL is an https URL of the file.
	URL string
}

// maxURLLen bounds a file's URL.
const maxURLLen = 2048

// CheckUploads checks the uploads of a message against the limits, storing
// nothing: a surface that creates a conversation refuses bad files first.
func (c *Core) CheckUploads(ups []Upload) error {
	_, err := c.checkUploads(ups)
	return err
}

// checkedUpload is an upload that passed the limits, and its bytes.
type checkedUpload struct {
	f    mesh.File
	data []byte
}

// checkUploads checks ups against the limits and decodes their bytes.
func (c *Core) checkUploads(ups []Upload) ([]checkedUpload, error) {
	limits := c.cfg.Files
	if len(ups) > limits.MaxPerMessage {
		return nil, mesh.ErrBadRequest.With(fmt.Sprintf("%d files: a message carries at most %d (files.max_per_message)", len(ups), limits.MaxPerMessage))
	}
	all := make([]checkedUpload, 0, len(ups))
	for i, u := range ups {
		f, data, err := checkUpload(&limits, i, u)
		if err != nil {
			return nil, err
		}
		all = append(all, checkedUpload{f, data})
	}
	return all, nil
}

// StoreFiles checks the uploads of a message to conversation id (the
// caller's) and stores their bytes, returning the references the message
// carries. Nothing is stored unless every upload passes: a bad one is a
// 400 (bad base64, no media type, too many files), 413 (too large) or 415
// (a media type the files section does not accept).
func (c *Core) StoreFiles(ctx context.Context, id string, ups []Upload, caller Caller) ([]mesh.File, error) {
	if len(ups) == 0 {
		return nil, nil
	}
	if err := c.Writes(caller); err != nil {
		return nil, err
	}
	all, err := c.checkUploads(ups)
	if err != nil {
		return nil, err
	}
	if _, err := c.HeadFor(ctx, id, caller); err != nil {
		return nil, err
	}
	if c.files == nil {
		return nil, mesh.ErrUnavailable.With("the mesh has no file store (mesh_files): provision it with mesh provision")
	}
	out := make([]mesh.File, 0, len(all))
	for _, ck := range all {
		if ck.f.URL != "" {
			out = append(out, ck.f)
			continue
		}
		f, err := c.files.Put(ctx, id, ck.f, ck.data)
		if err != nil {
			return nil, mesh.ErrUnavailable.With("the file was not stored: " + err.Error())
		}
		out = append(out, f)
	}
	return out, nil
}

// checkUpload checks upload i against the limits and decodes its bytes.
func checkUpload(limits *config.Files, i int, u Upload) (mesh.File, []byte, error) {
	at := fmt.Sprintf("file %d", i)
	if u.Name != "" {
		at = fmt.Sprintf("file %d (%s)", i, mesh.Clip(u.Name))
	}
	name := u.Name
	if len(name) > 255 || strings.ContainsAny(name, "\x00\r\n/\\") {
		return mesh.File{}, nil, mesh.ErrBadRequest.With(at + `: "name" is at most 255 bytes, without '/', '\' or control characters`)
	}
	mt, _, _ := strings.Cut(u.MediaType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	if mt == "" {
		return mesh.File{}, nil, mesh.ErrBadRequest.With(at + `: a media type is required ("media_type", AG-UI "mimeType", A2A "mimeType"/"mediaType")`)
	}
	if !limits.Accepts(mt) {
		return mesh.File{}, nil, mesh.ErrFileType.With(fmt.Sprintf("%s: media type %s is not accepted; files.media_types: %s", at, mesh.Clip(mt), strings.Join(limits.MediaTypes, ", ")))
	}
	f := mesh.File{Name: name, MediaType: mt}
	switch {
	case u.URL != "" && u.Base64 != "":
		return mesh.File{}, nil, mesh.ErrBadRequest.With(at + ": give the bytes or a URL, not both")
	case u.URL != "":
		p, err := url.Parse(u.URL)
		if err != nil || p.Scheme != "https" || p.Host == "" || p.User != nil || len(u.URL) > maxURLLen {
			return mesh.File{}, nil, mesh.ErrBadRequest.With(fmt.Sprintf("%s: url must be an https URL without credentials, at most %d bytes", at, maxURLLen))
		}
		f.URL = u.URL
		return f, nil, nil
	}
	// Decoded size, before decoding: no allocation for a refused file.
	if int64(base64.StdEncoding.DecodedLen(len(u.Base64))) > limits.MaxBytes+3 {
		return mesh.File{}, nil, tooLarge(at, limits.MaxBytes)
	}
	data, err := decodeBase64(u.Base64)
	if err != nil {
		return mesh.File{}, nil, mesh.ErrBadRequest.With(at + ": the data is not base64")
	}
	if len(data) == 0 {
		return mesh.File{}, nil, mesh.ErrBadRequest.With(at + ": the file is empty")
	}
	if int64(len(data)) > limits.MaxBytes {
		return mesh.File{}, nil, tooLarge(at, limits.MaxBytes)
	}
	return f, data, nil
}

func tooLarge(at string, max int64) error {
	return mesh.ErrFileTooLarge.With(fmt.Sprintf("%s: a file holds at most %d bytes (files.max_bytes)", at, max))
}

// decodeBase64 takes standard or URL-safe base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// File is the bytes of conversation id's file, for its owner (or an
// admin): not found for anyone else, as the conversation is.
func (c *Core) File(ctx context.Context, id, fileID string, caller Caller) ([]byte, mesh.File, error) {
	if err := CheckConversationID(id); err != nil {
		return nil, mesh.File{}, err
	}
	if err := mesh.CheckID(fileID); err != nil {
		return nil, mesh.File{}, mesh.ErrFileNotFound.With(fmt.Sprintf("file %s not found", mesh.Clip(fileID)))
	}
	if _, err := c.HeadFor(ctx, id, caller); err != nil {
		return nil, mesh.File{}, err
	}
	if c.files == nil {
		return nil, mesh.File{}, mesh.ErrFileNotFound.With(fmt.Sprintf("file %s not found", fileID))
	}
	data, f, err := c.files.Get(ctx, id, mesh.File{ID: fileID})
	if err != nil {
		if mesh.ErrorKind(err) == mesh.ErrFileNotFound.Kind() {
			return nil, mesh.File{}, mesh.ErrFileNotFound.With(fmt.Sprintf("file %s not found in conversation %s", fileID, id))
		}
		return nil, mesh.File{}, err
	}
	return data, f, nil
}
