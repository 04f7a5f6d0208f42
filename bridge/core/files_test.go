package core

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// Every refusal of a file is the status its kind says (400, 413, 415),
// and nothing is stored unless every file of the message passes.
func TestStoreFilesLimits(t *testing.T) {
	m := meshtest.New(t)
	c, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "a", Auth: true,
		Files: config.Files{MaxBytes: 10, MaxPerMessage: 2, MediaTypes: []string{"image/png", "application/pdf"}}})
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := as("alice", config.RoleUser), as("bob", config.RoleUser)
	conv, err := c.CreateConversation(t.Context(), mesh.NewID(), alice)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	png := Upload{Name: "a.png", MediaType: "image/png", Base64: b64("0123456789")}
	for _, tc := range []struct {
		name   string
		ups    []Upload
		status int
	}{
		{"bad base64", []Upload{{MediaType: "image/png", Base64: "!!!not base64"}}, http.StatusBadRequest},
		{"no media type", []Upload{{Base64: b64("x")}}, http.StatusBadRequest},
		{"refused type", []Upload{{MediaType: "image/svg+xml", Base64: b64("<svg/>")}}, http.StatusUnsupportedMediaType},
		{"refused type, allowed elsewhere", []Upload{{MediaType: "text/plain", Base64: b64("hi")}}, http.StatusUnsupportedMediaType},
		{"one byte over", []Upload{{MediaType: "image/png", Base64: b64("0123456789a")}}, http.StatusRequestEntityTooLarge},
		{"far over", []Upload{{MediaType: "image/png", Base64: strings.Repeat("A", 1<<20)}}, http.StatusRequestEntityTooLarge},
		{"too many", []Upload{png, png, png}, http.StatusBadRequest},
		{"empty", []Upload{{MediaType: "image/png", Base64: ""}}, http.StatusBadRequest},
		{"http url", []Upload{{MediaType: "image/png", URL: "http://169.254.169.254/latest"}}, http.StatusBadRequest},
		{"url with credentials", []Upload{{MediaType: "image/png", URL: "https://u:p@example.com/a.png"}}, http.StatusBadRequest},
		{"name with a slash", []Upload{{Name: "../a.png", MediaType: "image/png", Base64: b64("x")}}, http.StatusBadRequest},
		{"bytes and url", []Upload{{MediaType: "image/png", Base64: b64("x"), URL: "https://example.com/a.png"}}, http.StatusBadRequest},
		{"second one refused", []Upload{png, {MediaType: "image/gif", Base64: b64("GIF8")}}, http.StatusUnsupportedMediaType},
	} {
		if _, err := c.StoreFiles(t.Context(), conv.ID, tc.ups, alice); mesh.HTTPStatus(err) != tc.status {
			t.Errorf("%s: %v (status %d), want %d", tc.name, err, mesh.HTTPStatus(err), tc.status)
		}
	}
	if n := objects(t, m); n != 0 {
		t.Errorf("%d objects stored by refused messages, want none", n)
	}

	files, err := c.StoreFiles(t.Context(), conv.ID, []Upload{png, {MediaType: "application/pdf", URL: "https://example.com/r.pdf"}}, alice)
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	if len(files) != 2 {
		t.Fatalf("stored %d files, want 2: %+v", len(files), files)
	}
	if files[0].ID == "" {
		t.Fatalf("the uploaded png has no id: %+v", files[0])
	}
	if files[0].Size != 10 {
		t.Fatalf("the uploaded png's size %d, want 10", files[0].Size)
	}
	if files[1].ID != "" {
		t.Fatalf("the pdf by url has id %q, want none (not stored)", files[1].ID)
	}
	if files[1].URL == "" {
		t.Fatalf("the pdf by url lost its url: %+v", files[1])
	}
	data, f, err := c.File(t.Context(), conv.ID, files[0].ID, alice)
	if err != nil || !bytes.Equal(data, []byte("0123456789")) || f.MediaType != "image/png" {
		t.Errorf("alice reads %q %+v %v", data, f, err)
	}
	// Another user: the conversation and its files are not found.
	if _, _, err := c.File(t.Context(), conv.ID, files[0].ID, bob); !errors.Is(err, mesh.ErrSessionNotFound) {
		t.Errorf("bob reads alice's file: %v, want not found", err)
	}
	if _, err := c.StoreFiles(t.Context(), conv.ID, []Upload{png}, bob); !errors.Is(err, mesh.ErrSessionNotFound) {
		t.Errorf("bob stores into alice's conversation: %v, want not found", err)
	}
	if _, _, err := c.File(t.Context(), conv.ID, "f-nope", alice); mesh.HTTPStatus(err) != http.StatusNotFound {
		t.Errorf("an unknown file: %v, want 404", err)
	}
	if got, err := decodeBase64(base64.RawURLEncoding.EncodeToString([]byte{0xfb, 0xff})); err != nil || !bytes.Equal(got, []byte{0xfb, 0xff}) {
		t.Errorf("URL-safe base64: %v %v", got, err)
	}
}

func objects(t *testing.T, m *meshtest.Mesh) uint64 {
	t.Helper()
	s, err := m.JS.Stream(t.Context(), "OBJ_mesh_files")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
