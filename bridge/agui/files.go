package agui

import (
	"encoding/json"
	"fmt"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// mediaPart is a content part of a user message that carries a file: AG-UI
// 1.0's image, document, audio and video parts ({type, source: {type:
// "data"|"url"|"file", value, mimeType}}), and the binary part of the
// versions before it ({type: "binary", mimeType, data | url, filename}).
type mediaPart struct {
	Type   string `json:"type"`
	Source *struct {
		Type     string `json:"type"`
		Value    string `json:"value"`
		MimeType string `json:"mimeType"`
	} `json:"source"`
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
	URL      string `json:"url"`
	Filename string `json:"filename"`
}

// uploads are the files of the message's content parts.
func (m inputMessage) uploads() ([]core.Upload, error) {
	if len(m.Content) == 0 || m.Content[0] != '[' {
		return nil, nil
	}
	var parts []mediaPart
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return nil, mesh.ErrBadRequest.With(fmt.Sprintf("message %s: content must be a string or an array of content parts", mesh.Clip(m.ID)))
	}
	var out []core.Upload
	for i, p := range parts {
		switch p.Type {
		case "text":
			continue
		case "binary":
			out = append(out, core.Upload{Name: p.Filename, MediaType: p.MimeType, Base64: p.Data, URL: p.URL})
			continue
		case "image", "document", "audio", "video":
		default:
			return nil, mesh.ErrBadRequest.With(fmt.Sprintf("message %s: content part %d has type %q: use text, image, document or binary", mesh.Clip(m.ID), i, mesh.Clip(p.Type)))
		}
		if p.Source == nil {
			return nil, mesh.ErrBadRequest.With(fmt.Sprintf("message %s: content part %d (%s) has no source", mesh.Clip(m.ID), i, p.Type))
		}
		u := core.Upload{Name: p.Filename, MediaType: p.Source.MimeType}
		switch p.Source.Type {
		case "data":
			u.Base64 = p.Source.Value
		case "url":
			u.URL = p.Source.Value
		default:
			// A provider's own file handle: only that provider could read it.
			return nil, mesh.ErrBadRequest.With(fmt.Sprintf("message %s: content part %d: source type %q is not taken; send the bytes (data) or an https url", mesh.Clip(m.ID), i, mesh.Clip(p.Source.Type)))
		}
		out = append(out, u)
	}
	return out, nil
}
