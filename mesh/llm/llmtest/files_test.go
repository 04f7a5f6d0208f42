package llmtest_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// The real providers' images and documents reach the backend with their
// bytes: each server decodes its API's form (OpenAI data URLs and file
// parts, Anthropic image and document blocks, Gemini inlineData).
func TestFilesDecoded(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x01")
	pdf := []byte("%PDF-1.4\n%%EOF")
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			srv := llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey, Backend: llmtest.Replies()})
			files := []llm.File{{MediaType: "image/png", Name: "cat.png", Data: png}, {MediaType: "application/pdf", Name: "r.pdf", Data: pdf}}
			msgs := []llm.Message{{Role: llm.RoleUser, Content: "What is this?", Files: files}}
			if _, err := client(t, srv, tg.model, nil).Generate(t.Context(), llm.Request{Messages: msgs}); err != nil {
				t.Fatal(err)
			}
			got := srv.Requests()[0].Request.Messages
			if len(got) != 1 || got[0].Content != "What is this?" && !strings.HasPrefix(got[0].Content, "What is this?") {
				t.Fatalf("messages %+v", got)
			}
			var img, doc *llm.File
			for i, f := range got[0].Files {
				switch f.MediaType {
				case "image/png":
					img = &got[0].Files[i]
				case "application/pdf":
					doc = &got[0].Files[i]
				}
			}
			if img == nil || !bytes.Equal(img.Data, png) {
				t.Errorf("image: %+v, want the png's bytes", got[0].Files)
			}
			if tg.name == "ollama" {
				// Ollama takes no PDF: a placeholder says so in text.
				if doc != nil || !strings.Contains(got[0].Content, "r.pdf (application/pdf) not shown") {
					t.Errorf("ollama: %q, %+v: want the PDF as a placeholder", got[0].Content, got[0].Files)
				}
				return
			}
			if doc == nil || !bytes.Equal(doc.Data, pdf) {
				t.Errorf("document: %+v, want the pdf's bytes", got[0].Files)
			}
		})
	}
}

// Malformed files are refused as the APIs refuse them.
func TestFilesRefused(t *testing.T) {
	for _, c := range []struct {
		api  llmtest.API
		path string
		body string
	}{
		{llmtest.OpenAI, oaPath, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,%%%"}}]}]}`},
		{llmtest.OpenAI, oaPath, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}]}]}`},
		{llmtest.OpenAI, oaPath, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:text/plain;base64,AAAA"}}]}]}`},
		{llmtest.OpenAI, oaPath, `{"model":"gpt-4o-mini","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]},{"role":"user","content":"hi"}]}`},
		{llmtest.Anthropic, anPath, `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/tiff","data":"AAAA"}}]}]}`},
		{llmtest.Anthropic, anPath, `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"%%%"}}]}]}`},
		{llmtest.Gemini, gmPath, `{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"image/png","data":"%%%"}}]}]}`},
		{llmtest.Gemini, gmPath, `{"contents":[{"role":"user","parts":[{"inlineData":{"data":"AAAA"}}]}]}`},
	} {
		srv := llmtest.Start(t, llmtest.Config{API: c.api, APIKey: testKey, Backend: llmtest.Replies()})
		if status, _, body := send(t, srv, c.api, rawCase{path: c.path, body: c.body}); status != 400 || errorMessage(c.api, body) == "" {
			t.Errorf("%s %s: status %d %s, want the API's 400", c.api, c.body, status, body)
		}
	}
}
