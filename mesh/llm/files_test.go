package llm_test

import (
	"reflect"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// An image, a PDF, a text file and an image by URL reach each API in its
// own form: OpenAI's content parts (image_url data URLs, a file part, the
// text file as a text part; Ollama takes no PDF), Anthropic's image and
// document blocks, Gemini's inlineData and fileData parts. The servers
// decode them as the APIs do; the golden files pin the exact bodies.
func TestProviderFiles(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
	pdf := "%PDF-1.4\n1 0 obj<<>>endobj\n%%EOF"
	ask := "What is in these?"
	msgs := []llm.Message{{Role: llm.RoleUser, Content: ask, Files: []llm.File{
		{MediaType: "image/png", Name: "cat.png", Data: []byte(png)},
		{MediaType: "application/pdf", Name: "report.pdf", Data: []byte(pdf)},
		{MediaType: "text/plain", Name: "notes.txt", Data: []byte("hello notes")},
		{MediaType: "image/jpeg", Name: "dog.jpg", URL: "https://example.com/dog.jpg"},
	}}}
	// What each server decoded: OpenAI's text parts make up the message's
	// text, in order.
	notes := "[notes.txt]\nhello notes"
	want := map[string]llm.Message{
		"openai": {Role: llm.RoleUser, Content: ask + notes, Files: []llm.File{
			{MediaType: "image/png", Data: []byte(png)},
			{MediaType: "application/pdf", Name: "report.pdf", Data: []byte(pdf)},
			{URL: "https://example.com/dog.jpg"},
		}},
		"ollama": {Role: llm.RoleUser, Content: ask + "[file report.pdf (application/pdf) not shown to this model]" + notes, Files: []llm.File{
			{MediaType: "image/png", Data: []byte(png)},
			{URL: "https://example.com/dog.jpg"},
		}},
		"cohere": {Role: llm.RoleUser, Content: ask + "[file report.pdf (application/pdf) not shown to this model]" + notes, Files: []llm.File{
			{MediaType: "image/png", Data: []byte(png)},
			{URL: "https://example.com/dog.jpg"},
		}},
		"anthropic": {Role: llm.RoleUser, Content: ask, Files: []llm.File{
			{MediaType: "image/png", Data: []byte(png)},
			{MediaType: "application/pdf", Name: "report.pdf", Data: []byte(pdf)},
			{MediaType: "text/plain", Name: "notes.txt", Data: []byte("hello notes")},
			{URL: "https://example.com/dog.jpg"},
		}},
		"gemini": {Role: llm.RoleUser, Content: ask, Files: []llm.File{
			{MediaType: "image/png", Data: []byte(png)},
			{MediaType: "application/pdf", Data: []byte(pdf)},
			{MediaType: "text/plain", Data: []byte("hello notes")},
			{MediaType: "image/jpeg", URL: "https://example.com/dog.jpg"},
		}},
	}
	for _, w := range wires() {
		t.Run(w.name, func(t *testing.T) {
			f := newFake(t, w, reply{Text: []string{"A cat, a report, notes and a dog."}})
			if _, err := f.provider(testOptions(nil)).Generate(t.Context(), llm.Request{System: contractSystem, Messages: msgs}); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			got := f.last()
			wantMsgs := []llm.Message{want[w.name]}
			if sent := f.sent(got); !reflect.DeepEqual(sent, wantMsgs) {
				t.Errorf("messages sent:\n%s\nwant:\n%s", mustJSON(sent), mustJSON(wantMsgs))
			}
			golden(t, w.name+"_files", got.Body)
		})
	}
}

// A user message of files alone (no text) is still sent.
func TestProviderFilesWithoutText(t *testing.T) {
	img := llm.File{MediaType: "image/webp", Data: []byte("RIFF\x00\x00\x00\x00WEBPVP8 ")}
	for _, w := range wires() {
		t.Run(w.name, func(t *testing.T) {
			f := newFake(t, w, reply{Text: []string{"ok"}})
			if _, err := f.provider(testOptions(nil)).Generate(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Files: []llm.File{img}}}}); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			got := f.sent(f.last())
			if len(got) != 1 {
				t.Fatalf("sent %d messages, want one user message: %s", len(got), mustJSON(got))
			}
			if len(got[0].Files) != 1 {
				t.Fatalf("sent %d files, want the webp image: %s", len(got[0].Files), mustJSON(got))
			}
			if f := got[0].Files[0]; string(f.Data) != string(img.Data) {
				t.Errorf("sent file data %q, want the webp's %q", f.Data, img.Data)
			}
			if f := got[0].Files[0]; f.MediaType != "image/webp" {
				t.Errorf("sent media type %q, want image/webp", f.MediaType)
			}
		})
	}
}
