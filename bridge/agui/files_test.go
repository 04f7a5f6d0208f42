package agui

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// recorder is a model that keeps the files of the last user message of
// each request.
type recorder struct {
	mu    sync.Mutex
	files [][]llm.File
}

func (r *recorder) provider() script {
	return func(_ context.Context, req llm.Request) (*llm.Response, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		var last []llm.File
		for _, m := range req.Messages {
			if m.Role == llm.RoleUser {
				last = m.Files
			}
		}
		r.files = append(r.files, last)
		return &llm.Response{Text: fmt.Sprintf("saw %d files", len(last))}, nil
	}
}

func (r *recorder) last() []llm.File {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.files) == 0 {
		return nil
	}
	return r.files[len(r.files)-1]
}

// An AG-UI user message's image parts (1.0's image part and the older
// binary part) reach the model with their bytes; the conversation keeps
// references, and the owner reads the bytes back over REST.
func TestAGUIImagePartsReachTheModel(t *testing.T) {
	rec := &recorder{}
	f := newFixture(t, rec.provider(), nil)
	png := []byte("\x89PNG\r\n\x1a\n-agui-image")
	gif := []byte("GIF89a-binary-part")
	b64 := base64.StdEncoding.EncodeToString
	body := fmt.Sprintf(`{"threadId":"files-1","runId":"files-r1","tools":[],"context":[],"forwardedProps":{},
		"messages":[{"id":"u1","role":"user","content":[{"type":"text","text":"what is this?"},
		{"type":"image","source":{"type":"data","value":%q,"mimeType":"image/png"}},
		{"type":"binary","mimeType":"image/gif","data":%q,"filename":"anim.gif"}]}]}`, b64(png), b64(gif))
	_, stream := f.stream("/agui", body)
	if !bytes.Contains([]byte(stream), []byte("saw 2 files")) {
		t.Fatalf("stream without the model's answer:\n%s", stream)
	}
	got := rec.last()
	if len(got) != 2 {
		t.Fatalf("the model got %d files, want 2: %+v", len(got), got)
	}
	if !bytes.Equal(got[0].Data, png) {
		t.Fatalf("the model's file 0 has %d bytes, want the png's %d", len(got[0].Data), len(png))
	}
	if got[0].MediaType != "image/png" {
		t.Fatalf("the model's file 0 is %q, want image/png", got[0].MediaType)
	}
	if !bytes.Equal(got[1].Data, gif) {
		t.Fatalf("the model's file 1 has %d bytes, want the gif's %d", len(got[1].Data), len(gif))
	}
	if got[1].Name != "anim.gif" {
		t.Fatalf("the model's file 1 is named %q, want anim.gif", got[1].Name)
	}
	conv := f.conversation("files-1")
	var files []mesh.File
	for _, m := range conv.Messages {
		if m.Role == mesh.RoleUser {
			files = m.Files
		}
	}
	if len(files) != 2 {
		t.Fatalf("the message has %d files, want 2: %+v", len(files), files)
	}
	if files[0].ID == "" {
		t.Fatalf("the message's file 0 has no id: %+v", files[0])
	}
	if files[0].Size != int64(len(png)) {
		t.Fatalf("the message's file 0 size %d, want %d", files[0].Size, len(png))
	}
	if len(files[0].SHA256) != 64 {
		t.Fatalf("the message's file 0 sha256 %q, want 64 hex digits", files[0].SHA256)
	}
	resp, err := f.srv.Client().Get(f.srv.URL + "/conversations/files-1/files/" + files[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET the file: status %d, want 200", resp.StatusCode)
	}
	if !bytes.Equal(data, gif) {
		t.Errorf("GET the file: %d bytes, want the gif's %d", len(data), len(gif))
	}
	if got := resp.Header.Get("Content-Type"); got != "image/gif" {
		t.Errorf("GET the file: Content-Type %q, want image/gif", got)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("GET the file: X-Content-Type-Options %q, want nosniff", got)
	}
	resp, err = f.srv.Client().Get(f.srv.URL + "/conversations/files-1/files/f-missing")
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, resp, http.StatusNotFound, mesh.ErrFileNotFound.Kind())
}

// Refused files: 400 (bad base64, a provider's file handle), 415 (a media
// type not accepted) and 413 (too large), before a thread is created.
func TestAGUIFilesRefused(t *testing.T) {
	f := newFixture(t, (&recorder{}).provider(), nil)
	big := base64.StdEncoding.EncodeToString(make([]byte, 5<<20+1))
	for _, tc := range []struct {
		name, part, code string
		status           int
	}{
		{"bad base64", `{"type":"image","source":{"type":"data","value":"%%%","mimeType":"image/png"}}`, "bad_request", 400},
		{"provider handle", `{"type":"image","source":{"type":"file","value":"file-abc","mimeType":"image/png"}}`, "bad_request", 400},
		{"svg", `{"type":"image","source":{"type":"data","value":"PHN2Zy8+","mimeType":"image/svg+xml"}}`, mesh.ErrFileType.Kind(), 415},
		{"audio", `{"type":"audio","source":{"type":"data","value":"AAAA","mimeType":"audio/wav"}}`, mesh.ErrFileType.Kind(), 415},
		{"too large", `{"type":"document","source":{"type":"data","value":"` + big + `","mimeType":"application/pdf"}}`, mesh.ErrFileTooLarge.Kind(), 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			thread := "refused-" + fmt.Sprint(tc.status) + "-" + fmt.Sprint(len(tc.name))
			body := `{"threadId":"` + thread + `","runId":"r","tools":[],"context":[],"forwardedProps":{},"messages":[{"id":"u","role":"user","content":[{"type":"text","text":"hi"},` + tc.part + `]}]}`
			if tc.status == 413 {
				// Past the default body limit too: this one is a file limit.
				f2 := newFixture(t, (&recorder{}).provider(), func(c *Config) { c.MaxBodyBytes = 16 << 20 })
				wantError(t, f2.post(t.Context(), "/agui", body), tc.status, tc.code)
				return
			}
			wantError(t, f.post(t.Context(), "/agui", body), tc.status, tc.code)
			if _, err := f.store.Get(t.Context(), thread); err == nil {
				t.Errorf("thread %s was created", thread)
			}
		})
	}
}
