package llmtest

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// Files in requests: images and documents, decoded from each API's form
// into llm.File (bytes, or a URL), checked as the APIs check them.

// imageTypes are the image media types the three APIs take.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// dataURL splits data:<media type>;base64,<data>.
func dataURL(u string) (string, []byte, bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	mt, b64, ok2 := strings.Cut(rest, ";base64,")
	if !ok || !ok2 || mt == "" {
		return "", nil, false
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	return mt, data, err == nil && len(data) > 0
}

// openAIFilePart decodes an image_url or file part of a user message.
func openAIFilePart(pat, role, typ string, p map[string]json.RawMessage) (llm.File, *apiError) {
	if role != "user" {
		return llm.File{}, openAIBad(pat+".type", "Invalid value: '%s'. Supported values are: 'text' and 'refusal'.", typ)
	}
	if typ == "image_url" {
		var img struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(p["image_url"], &img); err != nil || img.URL == "" {
			return llm.File{}, openAIBad(pat+".image_url", "Missing required parameter: '%s.image_url.url'.", pat)
		}
		if strings.HasPrefix(img.URL, "https://") || strings.HasPrefix(img.URL, "http://") {
			return llm.File{URL: img.URL}, nil
		}
		mt, data, ok := dataURL(img.URL)
		if !ok {
			return llm.File{}, openAIBad(pat+".image_url", "Invalid image URL: '%s.image_url.url'. Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got an invalid value.", pat)
		}
		if !imageTypes[mt] {
			return llm.File{}, openAIBad(pat+".image_url", "You uploaded an unsupported image. Please make sure your image has of one the following formats: ['png', 'jpeg', 'gif', 'webp'].")
		}
		return llm.File{MediaType: mt, Data: data}, nil
	}
	var f struct {
		Filename string `json:"filename"`
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
	}
	if err := json.Unmarshal(p["file"], &f); err != nil || (f.FileData == "") == (f.FileID == "") {
		return llm.File{}, openAIBad(pat+".file", "Invalid file: '%s.file'. Expected one of file_data or file_id.", pat)
	}
	if f.FileID != "" {
		return llm.File{}, openAIBad(pat+".file.file_id", "Invalid file id (this test server has no files API).")
	}
	mt, data, ok := dataURL(f.FileData)
	if !ok || mt != "application/pdf" {
		return llm.File{}, openAIBad(pat+".file.file_data", "Invalid file data: '%s.file.file_data'. Expected a base64-encoded data URL with a PDF MIME type (e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ=='), but got an invalid value.", pat)
	}
	return llm.File{MediaType: mt, Name: f.Filename, Data: data}, nil
}

// anthropicFile decodes an image or document block of a user message.
func anthropicFile(bat, typ, role string, raw json.RawMessage) (llm.File, *apiError) {
	var b anthropicMedia
	if e := anthropicStrict(bat+"."+typ, raw, &b); e != nil {
		return llm.File{}, e
	}
	if role != "user" {
		return llm.File{}, anthropicBad("%s: %s blocks are only allowed in user messages", bat, typ)
	}
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	if err := json.Unmarshal(b.Source, &src); err != nil {
		return llm.File{}, anthropicBad("%s.%s.source: Field required", bat, typ)
	}
	var title string
	_ = json.Unmarshal(b.Title, &title)
	f := llm.File{Name: title, MediaType: src.MediaType}
	switch {
	case src.Type == "url" && src.URL != "":
		f.URL = src.URL
		return f, nil
	case src.Type == "text" && typ == "document":
		if src.MediaType != "text/plain" {
			return llm.File{}, anthropicBad("%s.document.source.text.media_type: Input should be 'text/plain'", bat)
		}
		f.Data = []byte(src.Data)
		return f, nil
	case src.Type != "base64":
		return llm.File{}, anthropicBad("%s.%s.source: Input tag '%s' found using 'type' does not match any of the expected tags: 'base64', 'url'%s", bat, typ, src.Type,
			map[bool]string{true: ", 'text', 'content'", false: ""}[typ == "document"])
	case typ == "image" && !imageTypes[src.MediaType]:
		return llm.File{}, anthropicBad("%s.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", bat)
	case typ == "document" && src.MediaType != "application/pdf":
		return llm.File{}, anthropicBad("%s.document.source.base64.media_type: Input should be 'application/pdf'", bat)
	}
	data, err := base64.StdEncoding.DecodeString(src.Data)
	if err != nil || len(data) == 0 {
		return llm.File{}, anthropicBad("%s.%s.source.base64.data: The %s data is not valid base64", bat, typ, typ)
	}
	f.Data = data
	return f, nil
}

// geminiFile decodes an inlineData or fileData part of a user turn.
func geminiFile(pat, role string, p *geminiPart) (llm.File, *apiError) {
	if role != "user" {
		return llm.File{}, geminiBad("* GenerateContentRequest.%s: files are only taken in user turns here", pat)
	}
	if len(p.FileData) > 0 {
		var fd struct {
			MimeType string `json:"mimeType"`
			FileURI  string `json:"fileUri"`
		}
		if err := json.Unmarshal(p.FileData, &fd); err != nil || fd.FileURI == "" {
			return llm.File{}, geminiBad("* GenerateContentRequest.%s.file_data.file_uri: Required field is not set.", pat)
		}
		return llm.File{MediaType: fd.MimeType, URL: fd.FileURI}, nil
	}
	var blob struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	}
	if err := json.Unmarshal(p.InlineData, &blob); err != nil {
		return llm.File{}, geminiBad("Invalid JSON payload received. Invalid value at '%s.inline_data'", pat)
	}
	if blob.MimeType == "" {
		return llm.File{}, geminiBad("* GenerateContentRequest.%s.inline_data.mime_type: Required field is not set.", pat)
	}
	data, err := base64.StdEncoding.DecodeString(blob.Data)
	if err != nil {
		return llm.File{}, geminiBad("Invalid value at '%s.inline_data.data' (TYPE_BYTES), Base64 decoding failed for %q", pat, clip(blob.Data))
	}
	if len(data) == 0 {
		return llm.File{}, geminiBad("* GenerateContentRequest.%s.inline_data.data: Required field is not set.", pat)
	}
	if !imageTypes[blob.MimeType] && blob.MimeType != "application/pdf" && blob.MimeType != "text/plain" {
		return llm.File{}, geminiBad("Unsupported MIME type: %s", blob.MimeType)
	}
	return llm.File{MediaType: blob.MimeType, Data: data}, nil
}

func clip(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}
