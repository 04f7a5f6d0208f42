package a2a

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// File parts (0.3 file.bytes, 1.0 raw) are stored with the user's message
// of the task's conversation; a refused media type is -32005 and a bad
// one -32602, and no task is created for either.
func TestFileParts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	png := []byte("\x89PNG\r\n\x1a\na2a")
	b64 := base64.StdEncoding.EncodeToString(png)
	userFiles := func(id string) []mesh.File {
		conv, err := f.core.Sessions.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range conv.Messages {
			if m.Role == mesh.RoleUser {
				return m.Files
			}
		}
		return nil
	}
	check := func(name, id string) {
		files := userFiles(id)
		if len(files) != 1 || files[0].MediaType != "image/png" || files[0].Size != int64(len(png)) {
			t.Fatalf("%s: the message's files %+v", name, files)
		}
		data, _, err := f.core.File(t.Context(), id, files[0].ID, core.Caller{})
		if err != nil || !bytes.Equal(data, png) {
			t.Errorf("%s: stored %q, %v", name, data, err)
		}
	}
	var task wire.Task
	f.result("", rpc(1, wire.MethodSend, `{"message":{"kind":"message","messageId":"m1","role":"user","parts":[`+
		`{"kind":"text","text":"list all resources"},{"kind":"file","file":{"name":"cat.png","mimeType":"image/png","bytes":"`+b64+`"}}]}}`), &task)
	check("0.3", task.ID)

	var v1 struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	f.result("1.0", rpc(2, wire.MethodSendMessage, `{"message":{"messageId":"m2","role":"ROLE_USER","parts":[`+
		`{"text":"list all resources"},{"raw":"`+b64+`","mediaType":"image/png","filename":"cat.png"}]}}`), &v1)
	check("1.0", v1.Task.ID)

	for _, tc := range []struct {
		name, part string
		code       int
	}{
		{"refused type", `{"kind":"file","file":{"mimeType":"image/svg+xml","bytes":"PHN2Zy8+"}}`, wire.CodeContentTypeNotSupported},
		{"bad base64", `{"kind":"file","file":{"mimeType":"image/png","bytes":"%%%"}}`, wire.CodeInvalidParams},
		{"plain http", `{"kind":"file","file":{"mimeType":"image/png","uri":"http://10.0.0.1/x.png"}}`, wire.CodeInvalidParams},
	} {
		a := f.call("", rpc(3, wire.MethodSend, `{"message":{"kind":"message","messageId":"m3","role":"user","contextId":"ctx-files-refused","parts":[{"kind":"text","text":"hi"},`+tc.part+`]}}`))
		if a.Error == nil || a.Error.Code != tc.code {
			t.Errorf("%s: %s, want code %d", tc.name, a.Raw, tc.code)
		}
	}
	if _, err := f.core.Sessions.Head(t.Context(), "ctx-files-refused"); err == nil {
		t.Error("a refused message created its task")
	}
}
