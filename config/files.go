package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Defaults of [Files].
const (
	DefaultFileMaxBytes      = 5 << 20
	DefaultFilesPerMessage   = 4
	MaxFileBytesLimit        = 64 << 20
	MaxFilesPerMessageLimit  = 16
	fileMediaTypeDescription = "image/png, image/jpeg, image/gif, image/webp, application/pdf, text/plain"
)

// FileMediaTypes are the media types a file may have: those every
// provider's API takes as an image or a document.
func FileMediaTypes() []string {
	return []string{"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf", "text/plain"}
}

// Files limits the images and documents users send with their messages
// (REST files, AG-UI binary parts, A2A file parts). Their bytes are kept in
// the object store mesh_files, apart from the conversation.
type Files struct {
	// MaxBytes bounds one file's bytes (413 past it). A file is sent
	// inline in base64 (4/3 of its size) within a request body, so it is
	// at most 3/4 of http.max_body_bytes: raise that to take larger files.
	// Zero means 5 MiB, or 3/4 of http.max_body_bytes when that is less
	// (768 KiB with the default 1 MiB body); at most 64 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxPerMessage bounds the files of one message (400 past it). Zero
	// means 4; at most 16.
	MaxPerMessage int `yaml:"max_per_message"`
	// MediaTypes are the media types accepted (415 for another). Empty
	// means every one of [FileMediaTypes]; each must be one of them.
	MediaTypes []string `yaml:"media_types"`
	// MaxAge is how long a file is kept after it was sent (the object
	// store's age limit): the files of deleted and expired conversations
	// go with it. A model asked about a file past it gets a placeholder.
	// Zero means sessions.ttl (7 days); "never" (or negative) keeps files
	// until an operator removes them.
	MaxAge Duration `yaml:"max_age"`
	// TextOnlyModels are models (as llm.model names them) that take no
	// files: a text placeholder naming each file replaces it in their
	// requests. (The offline model takes files and ignores them.)
	TextOnlyModels []string `yaml:"text_only_models"`
}

// applyDefaults sets the zero fields; bodyBytes is http.max_body_bytes
// (zero: none), which bounds a file sent inline.
func (f *Files) applyDefaults(bodyBytes int64) {
	if f.MaxBytes == 0 {
		f.MaxBytes = DefaultFileMaxBytes
		if bodyBytes > 0 {
			f.MaxBytes = min(f.MaxBytes, inlineBound(bodyBytes))
		}
	}
	if f.MaxPerMessage == 0 {
		f.MaxPerMessage = DefaultFilesPerMessage
	}
	if len(f.MediaTypes) == 0 {
		f.MediaTypes = FileMediaTypes()
	}
}

// inlineBound is the largest file whose base64 fits a body of bodyBytes.
func inlineBound(bodyBytes int64) int64 { return bodyBytes / 4 * 3 }

// WithDefaults is f with its zero fields set to their defaults (no body
// limit considered).
func (f Files) WithDefaults() Files {
	f.applyDefaults(0)
	return f
}

func (f *Files) validate(bodyBytes int64) *fieldErr {
	if f.MaxBytes < 1 || f.MaxBytes > MaxFileBytesLimit {
		return &fieldErr{"files.max_bytes", fmt.Sprintf("%d: use 1 to %d (64 MiB)", f.MaxBytes, MaxFileBytesLimit)}
	}
	if f.MaxBytes > inlineBound(bodyBytes) {
		return &fieldErr{"files.max_bytes", fmt.Sprintf("%d: a file is sent inline in base64 within a request body: raise http.max_body_bytes (%d) to at least %d, or lower this to %d",
			f.MaxBytes, bodyBytes, (f.MaxBytes+2)/3*4+1024, inlineBound(bodyBytes))}
	}
	if f.MaxPerMessage < 1 || f.MaxPerMessage > MaxFilesPerMessageLimit {
		return &fieldErr{"files.max_per_message", fmt.Sprintf("%d: use 1 to %d", f.MaxPerMessage, MaxFilesPerMessageLimit)}
	}
	for _, mt := range f.MediaTypes {
		if !slices.Contains(FileMediaTypes(), strings.ToLower(mt)) {
			return &fieldErr{"files.media_types", fmt.Sprintf("%q: use some of %s", mt, fileMediaTypeDescription)}
		}
	}
	return nil
}

// Accepts reports whether the media type mt (parameters ignored) is one
// of MediaTypes.
func (f *Files) Accepts(mt string) bool {
	mt, _, _ = strings.Cut(mt, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	for _, m := range f.MediaTypes {
		if strings.EqualFold(m, mt) {
			return true
		}
	}
	return false
}

// KeepFor is the object store's age limit: MaxAge, else sessionTTL (zero:
// none).
func (f *Files) KeepFor(sessionTTL time.Duration) time.Duration {
	switch {
	case f.MaxAge < 0:
		return 0
	case f.MaxAge > 0:
		return f.MaxAge.Std()
	}
	return sessionTTL
}

// TextOnly reports whether model takes no files.
func (f *Files) TextOnly(model string) bool {
	return slices.Contains(f.TextOnlyModels, model)
}
