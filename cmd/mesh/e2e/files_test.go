package e2e

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/google/uuid"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// testPNG is a real PNG image, distinct for each seed.
func testPNG(t *testing.T, seed uint8) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = seed + uint8(i)
	}
	img.Set(0, 0, color.RGBA{R: seed, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// startFilesMesh is startLLMMesh with files.max_bytes at 64 KiB.
func startFilesMesh(t *testing.T, c llmCase) (*meshProc, *llmtest.Server) {
	t.Helper()
	opts, srv := llmMeshOpts(t, c, "  timeout: 20s\n")
	opts.config += "\nfiles:\n  max_bytes: 65536\n"
	opts.logLevel = "info"
	return startMesh(t, opts), srv
}

// modelSaw reports whether a request after the first n carried the image
// data in a user message, decoded by the fake from its API's wire form.
func modelSaw(srv *llmtest.Server, n int, data []byte) bool {
	for _, r := range srv.Requests()[n:] {
		for _, m := range r.Request.Messages {
			if m.Role != llm.RoleUser {
				continue
			}
			for _, f := range m.Files {
				if f.MediaType == "image/png" && bytes.Equal(f.Data, data) {
					return true
				}
			}
		}
	}
	return false
}

// TestFilesOverREST: an image sent with a REST message reaches each
// provider's fake in that API's form (OpenAI image_url data URL, Gemini
// inlineData, Anthropic image block: llmtest decodes each strictly), the
// message lists it, and its owner reads it back; a bad, refused or
// oversize file is 400, 415 or 413.
func TestFilesOverREST(t *testing.T) {
	t.Parallel()
	for _, c := range llmCases() {
		t.Run(c.name, func(t *testing.T) {
			m, srv := startFilesMesh(t, c)
			img := testPNG(t, 7)
			conv := m.newConversation()
			before := srv.Count()
			out := m.do(http.StatusOK, "POST", "/conversations/"+conv+"/messages", map[string]any{
				"message": "what is in this picture?",
				"files":   []any{map[string]any{"name": "dot.png", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(img)}},
			})
			if !modelSaw(srv, before, img) {
				t.Fatalf("no request to the %s fake carried the image's bytes", c.name)
			}
			users := messagesOf(obj(out, "conversation"), "user")
			if len(users) != 1 || len(list(users[0], "files")) != 1 {
				t.Fatalf("user messages %v: want one with its file", users)
			}
			file := obj(list(users[0], "files")[0])
			checkStrs(t, "the message's file", file, map[string]string{"media_type": "image/png", "name": "dot.png"})
			if file["size"] != float64(len(img)) {
				t.Errorf("the message's file size %v, want %d", file["size"], len(img))
			}
			if sum := str(file, "sha256"); len(sum) != 64 {
				t.Errorf("the message's file sha256 %q, want 64 hex digits", sum)
			}
			resp, err := http.Get(m.url("/conversations/" + conv + "/files/" + str(file, "id")))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Equal(got, img) || resp.Header.Get("Content-Type") != "image/png" {
				t.Errorf("GET the file: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(got))
			}
			if c.name != "openai" {
				return
			}
			for _, tc := range []struct {
				name   string
				file   map[string]any
				status int
				code   string
			}{
				{"bad base64", map[string]any{"media_type": "image/png", "data": "%%% not base64"}, http.StatusBadRequest, "bad_request"},
				{"refused type", map[string]any{"media_type": "image/svg+xml", "data": base64.StdEncoding.EncodeToString([]byte("<svg/>"))}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
				{"oversize", map[string]any{"media_type": "image/png", "data": base64.StdEncoding.EncodeToString(make([]byte, 65537))}, http.StatusRequestEntityTooLarge, "file_too_large"},
			} {
				status, body := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "and this?", "files": []any{tc.file}})
				if status != tc.status || str(body, "code") != tc.code {
					t.Errorf("%s: %d %v, want %d %s", tc.name, status, body, tc.status, tc.code)
				}
			}
			if n := len(messagesOf(obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation"), "user")); n != 1 {
				t.Errorf("%d user messages after the refusals, want 1", n)
			}
		})
	}
}

// TestFilesOverAGUIAndA2A: an image part from the official AG-UI client
// (@ag-ui/client, AG-UI 1.0 image part) and an A2A FilePart from a2a-go
// (0.3 file.bytes) reach the model with the image's bytes.
func TestFilesOverAGUIAndA2A(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@ag-ui/client")
	c := llmCases()[0]
	m, srv := startFilesMesh(t, c)

	t.Run("agui", func(t *testing.T) {
		img := testPNG(t, 40)
		before := srv.Count()
		var res struct {
			Events    []string `json:"events"`
			Error     string   `json:"error"`
			RunFailed string   `json:"runFailed"`
		}
		runPeer(t, node, "agui-files.mjs", 2*time.Minute, []string{"AGUI_URL=" + m.url("/agui"), "THREAD_ID=" + uuid.NewString(),
			"IMAGE_B64=" + base64.StdEncoding.EncodeToString(img), "IMAGE_TYPE=image/png"}, &res, nil)
		if res.Error != "" {
			t.Fatalf("the AG-UI client: error %s", res.Error)
		}
		if res.RunFailed != "" {
			t.Fatalf("the AG-UI client: run failed %s", res.RunFailed)
		}
		if len(res.Events) == 0 {
			t.Fatal("the AG-UI client saw no events")
		}
		if last := res.Events[len(res.Events)-1]; last != "RUN_FINISHED" {
			t.Fatalf("the AG-UI client's last event %s, want RUN_FINISHED: %v", last, res.Events)
		}
		if !modelSaw(srv, before, img) {
			t.Error("no model request carried the AG-UI image's bytes")
		}
	})

	t.Run("a2a", func(t *testing.T) {
		img := testPNG(t, 90)
		before := srv.Count()
		ctx := t.Context()
		card, err := agentcard.DefaultResolver.Resolve(ctx, m.url(""))
		if err != nil {
			t.Fatal(err)
		}
		client, err := a2aclient.NewFromCard(ctx, card)
		if err != nil {
			t.Fatal(err)
		}
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "what is in this picture?"},
			a2a.FilePart{File: a2a.FileBytes{FileMeta: a2a.FileMeta{MimeType: "image/png", Name: "dot.png"}, Bytes: base64.StdEncoding.EncodeToString(img)}})
		res, err := client.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Errorf("a2a-go got %#v, want a completed task", res)
		}
		if !modelSaw(srv, before, img) {
			t.Error("no model request carried the A2A file's bytes")
		}
		bad := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "and this?"},
			a2a.FilePart{File: a2a.FileBytes{FileMeta: a2a.FileMeta{MimeType: "image/svg+xml"}, Bytes: base64.StdEncoding.EncodeToString([]byte("<svg/>"))}})
		// -32005, which a2a-go reads as its own error.
		if _, err := client.SendMessage(ctx, &a2a.MessageSendParams{Message: bad}); !errors.Is(err, a2a.ErrUnsupportedContentType) {
			t.Errorf("a refused file part: %v, want a2a.ErrUnsupportedContentType (-32005)", err)
		}
	})
}
