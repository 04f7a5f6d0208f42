package llmtest

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// wire is one API: how requests are checked and decoded, and answers and
// errors encoded.
type wire interface {
	// route checks the method and path, filling c.model (Gemini names it
	// in the path) and c.stream (ditto).
	route(r *http.Request, c *call) *apiError
	// auth checks the key and the headers the API requires.
	auth(r *http.Request, key string) *apiError
	// decode checks the body and fills c.
	decode(s *Server, r *http.Request, body []byte, c *call) *apiError
	// unknownModel is the API's answer to a model it does not serve.
	unknownModel(model string) *apiError
	// errorBody is the API's error body for e; retryHeaders sets the
	// headers it sends with it.
	errorBody(e *apiError) []byte
	retryHeaders(h http.Header, e *apiError)
	// whole is a non-streamed answer.
	whole(s *Server, c *call, resp *llm.Response) []byte
	// stream returns the encoder of a streamed answer.
	stream(s *Server, c *call, out *eventOut) streamer
}

// streamer writes a streamed answer: text deltas as they come, then the
// end (tool calls, stop reason, usage), or an error.
type streamer interface {
	// reasoning sends a piece of the model's reasoning, before any text.
	reasoning(delta string)
	text(delta string)
	finish(resp *llm.Response)
	fail(e *apiError)
}

// apiError is an error answer.
type apiError struct {
	status int
	// kind is the API's error type (OpenAI type, Anthropic error.type,
	// Gemini status); empty means the API's type for the status.
	kind string
	// code and param are OpenAI's.
	code, param string
	// reason is Gemini's google.rpc.ErrorInfo reason (API_KEY_INVALID).
	reason     string
	message    string
	retryAfter time.Duration
}

// eventOut writes server-sent events, or collects them (collect) to write
// them later or as a JSON array.
type eventOut struct {
	w http.ResponseWriter
	// eol ends lines: "\n", or Gemini's "\r\n".
	eol     string
	collect bool
	started bool
	events  []string // collected frames
	data    []string // the data of every frame sent, collected or not
}

// send writes one event: an event line when name is set, then the data.
func (o *eventOut) send(name string, v any) {
	data := mustJSON(v)
	o.data = append(o.data, string(data))
	eol := o.eol
	if eol == "" {
		eol = "\n"
	}
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + eol)
	}
	b.WriteString("data: " + string(data) + eol + eol)
	o.write(b.String())
}

// write sends a whole frame.
func (o *eventOut) write(frame string) {
	if o.collect {
		o.events = append(o.events, frame)
		return
	}
	o.writeRaw(frame)
}

// writeRaw sends text as it is, starting the answer if needed.
func (o *eventOut) writeRaw(text string) {
	if !o.started {
		o.started = true
		h := o.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		o.w.WriteHeader(http.StatusOK)
	}
	_, _ = io.WriteString(o.w, text)
	_ = http.NewResponseController(o.w).Flush()
}

// JSON helpers.

func mustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("llmtest: encode %T: %v", v, err))
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// strict decodes data into v refusing unknown fields, as all three APIs
// do. The error is a *jsonProblem.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSON(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &jsonProblem{text: "data after the JSON value"}
	}
	return nil
}

// jsonProblem says what is wrong with a body: an unknown field, a value of
// the wrong type, or bad JSON.
type jsonProblem struct {
	unknown string // the unknown field's name
	field   string // the mistyped field's path
	want    string // the type it should have
	text    string
}

func (p *jsonProblem) Error() string { return p.text }

var unknownFieldRE = regexp.MustCompile(`unknown field "([^"]*)"`)

func describeJSON(err error) *jsonProblem {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &jsonProblem{field: te.Field, want: te.Type.String(), text: fmt.Sprintf("%s: expected %s, got JSON %s", te.Field, te.Type, te.Value)}
	}
	if m := unknownFieldRE.FindStringSubmatch(err.Error()); m != nil {
		return &jsonProblem{unknown: m[1], text: "unknown field " + m[1]}
	}
	return &jsonProblem{text: strings.TrimPrefix(err.Error(), "json: ")}
}

// jsonKind names the JSON type of raw: null, string, array, object,
// number, bool, or "" when empty.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return ""
	}
	switch t[0] {
	case 'n':
		return "null"
	case '"':
		return "string"
	case '[':
		return "array"
	case '{':
		return "object"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

// objectArgs returns raw when it is a JSON object, else {}.
func objectArgs(raw []byte) json.RawMessage {
	if jsonKind(raw) == "object" && json.Valid(raw) {
		return json.RawMessage(bytes.TrimSpace(raw))
	}
	return json.RawMessage(`{}`)
}

// Ids.

const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randomID is prefix followed by n random letters and digits.
func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idChars[int(b[i])%len(idChars)]
	}
	return prefix + string(b)
}

// pieces splits s into fragments of at most n bytes, as streams send tool
// arguments.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// estimateTokens counts about four characters as a token.
func estimateTokens(req llm.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return max(1, n/4)
}

// stoppedAtLimit tells whether the backend's stop reason means the token
// limit, in any provider's words.
func stoppedAtLimit(reason string) bool {
	switch strings.ToLower(reason) {
	case "max_tokens", "length":
		return true
	}
	return false
}

// toolNameRE is the function name OpenAI and Anthropic accept.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// mediaType is the media type of a Content-Type header, lowercased.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}
