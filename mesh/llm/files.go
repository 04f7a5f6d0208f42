package llm

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// File is an image or a document a user message carries, as a model API
// takes it: its bytes (sent inline, base64), or a URL the provider fetches
// itself.
type File struct {
	// MediaType is image/png, image/jpeg, image/gif, image/webp,
	// application/pdf or text/plain.
	MediaType string
	// Name is the file's name, shown to the model where the API has a place
	// for it (OpenAI's file part) and in placeholders.
	Name string
	// Data are the bytes; nil when URL is set.
	Data []byte
	// URL is an https URL of the file, passed on as it is.
	URL string
}

// IsImage says whether the file is an image.
func (f File) IsImage() bool { return strings.HasPrefix(f.MediaType, "image/") }

// dataURL is data:<media type>;base64,<bytes>.
func (f File) dataURL() string {
	return "data:" + f.MediaType + ";base64," + base64.StdEncoding.EncodeToString(f.Data)
}

// base64 is the bytes in standard base64.
func (f File) base64() string { return base64.StdEncoding.EncodeToString(f.Data) }

// Placeholder is the text a model that takes no files (or a file an API
// cannot carry) gets in the file's place.
func (f File) Placeholder() string {
	name := f.Name
	if name == "" {
		name = "unnamed"
	}
	return fmt.Sprintf("[file %s (%s) not shown to this model]", name, f.MediaType)
}

// textOf is a text/plain file's contents as a text part, named.
func (f File) textOf() string {
	name := f.Name
	if name == "" {
		name = "file"
	}
	return fmt.Sprintf("[%s]\n%s", name, f.Data)
}
