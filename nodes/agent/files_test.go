package agent

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// A turn's files reach the model with their bytes, read from mesh_files;
// a text-only model gets a placeholder naming each instead; a file whose
// object is gone becomes a placeholder too, and the turn still runs.
func TestTurnFiles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		textOnly bool
		lose     bool
	}{{"bytes", false, false}, {"text only", true, false}, {"lost object", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got llm.Message
			f := newFixture(t, script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
				mu.Lock()
				defer mu.Unlock()
				got = req.Messages[len(req.Messages)-1]
				return &llm.Response{Text: "seen"}, nil
			}), func(c *config.Config) {
				if tc.textOnly {
					c.Files.TextOnlyModels = []string{"offline"}
				}
			})
			conv := f.conversation()
			png := []byte("\x89PNG\r\n\x1a\nagent")
			file, err := f.m.Resources.Files.Put(t.Context(), conv, mesh.File{Name: "cat.png", MediaType: "image/png"}, png)
			if err != nil {
				t.Fatal(err)
			}
			if tc.lose {
				file.ID = store.NewFileID()
			}
			id := mesh.NewID()
			f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "what is it?", Files: []mesh.File{file}})
			c := f.waitApplied(conv, id)
			if user := c.Messages[len(c.Messages)-2]; user.Role != mesh.RoleUser || len(user.Files) != 1 || user.Files[0] != file {
				t.Errorf("the stored user message: %+v", user)
			}
			mu.Lock()
			defer mu.Unlock()
			placeholder := "[file cat.png (image/png) not shown to this model]"
			switch {
			case tc.textOnly || tc.lose:
				if len(got.Files) != 0 || got.Content != "what is it?\n"+placeholder {
					t.Errorf("the model got %q with %d files, want the placeholder only", got.Content, len(got.Files))
				}
			default:
				if len(got.Files) != 1 {
					t.Fatalf("the model got %d files, want the png: %+v", len(got.Files), got.Files)
				}
				if !bytes.Equal(got.Files[0].Data, png) {
					t.Errorf("the model got %d bytes, want the png's %d", len(got.Files[0].Data), len(png))
				}
				if got.Files[0].MediaType != "image/png" {
					t.Errorf("the model got media type %q, want image/png", got.Files[0].MediaType)
				}
				if strings.Contains(got.Content, "[file") {
					t.Errorf("the model got a placeholder with the file: %q", got.Content)
				}
			}
		})
	}
}
