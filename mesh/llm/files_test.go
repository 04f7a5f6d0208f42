package llm

import (
	"reflect"
	"testing"
)

// An image, a PDF, a text file and an image by URL reach each API in its
// own form: OpenAI's content parts (image_url data URLs, a file part; Ollama
// takes no PDF), Anthropic's image and document blocks, Gemini's inlineData
// and fileData parts. The fakes decode them as the APIs do; the golden
// files pin the exact bodies.
func TestProviderFiles(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
	pdf := "%PDF-1.4\n1 0 obj<<>>endobj\n%%EOF"
	ask := "What is in these?"
	msgs := []Message{{Role: RoleUser, Content: ask, Files: []File{
		{MediaType: "image/png", Name: "cat.png", Data: []byte(png)},
		{MediaType: "application/pdf", Name: "report.pdf", Data: []byte(pdf)},
		{MediaType: "text/plain", Name: "notes.txt", Data: []byte("hello notes")},
		{MediaType: "image/jpeg", Name: "dog.jpg", URL: "https://example.com/dog.jpg"},
	}}}
	openai := []seenFile{
		{Kind: "image", MediaType: "image/png", Data: png},
		{Kind: "document", MediaType: "application/pdf", Name: "report.pdf", Data: pdf},
		{Kind: "text", Data: "[notes.txt]\nhello notes"},
		{Kind: "image", URL: "https://example.com/dog.jpg"},
	}
	ollama := append([]seenFile(nil), openai...)
	ollama[1] = seenFile{Kind: "text", Data: "[file report.pdf (application/pdf) not shown to this model]"}
	want := map[string][]seenFile{
		"openai": openai,
		"ollama": ollama,
		"anthropic": {
			{Kind: "image", MediaType: "image/png", Data: png},
			{Kind: "document", MediaType: "application/pdf", Name: "report.pdf", Data: pdf},
			{Kind: "document", MediaType: "text/plain", Name: "notes.txt", Data: "hello notes"},
			{Kind: "image", URL: "https://example.com/dog.jpg"},
		},
		"gemini": {
			{Kind: "image", MediaType: "image/png", Data: png},
			{Kind: "document", MediaType: "application/pdf", Data: pdf},
			{Kind: "document", MediaType: "text/plain", Data: "hello notes"},
			{Kind: "file", MediaType: "image/jpeg", URL: "https://example.com/dog.jpg"},
		},
	}
	for _, w := range wires() {
		t.Run(w.Name(), func(t *testing.T) {
			f := newFake(t, w, nil)
			f.set(f.answer(reply{Text: []string{"A cat, a report, notes and a dog."}}))
			if _, err := f.provider(testOptions(nil)).Generate(t.Context(), Request{System: contractSystem, Messages: msgs}); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			got := f.last()
			wantMsgs := []seenMsg{{Role: "user", Text: ask, Files: want[w.Name()]}}
			if !reflect.DeepEqual(got.Messages, wantMsgs) {
				t.Errorf("messages sent:\n%s\nwant:\n%s", mustJSON(got.Messages), mustJSON(wantMsgs))
			}
			golden(t, w.Name()+"_files", got.Body)
		})
	}
}

// A user message of files alone (no text) is still sent.
func TestProviderFilesWithoutText(t *testing.T) {
	img := File{MediaType: "image/webp", Data: []byte("RIFF\x00\x00\x00\x00WEBPVP8 ")}
	for _, w := range wires() {
		t.Run(w.Name(), func(t *testing.T) {
			f := newFake(t, w, nil)
			f.set(f.answer(reply{Text: []string{"ok"}}))
			if _, err := f.provider(testOptions(nil)).Generate(t.Context(), Request{Messages: []Message{{Role: RoleUser, Files: []File{img}}}}); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			got := f.last().Messages
			if len(got) != 1 {
				t.Fatalf("sent %d messages, want one user message: %s", len(got), mustJSON(got))
			}
			if len(got[0].Files) != 1 {
				t.Fatalf("sent %d files, want the webp image: %s", len(got[0].Files), mustJSON(got))
			}
			if f := got[0].Files[0]; f.Data != string(img.Data) {
				t.Errorf("sent file data %q, want the webp's %q", f.Data, img.Data)
			}
			if f := got[0].Files[0]; f.MediaType != "image/webp" {
				t.Errorf("sent media type %q, want image/webp", f.MediaType)
			}
		})
	}
}
