package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// The HTTP helpers every surface of the bridge (REST, AG-UI, A2A, the web
// page) reads requests and answers with, so that none imports another.

// CallerOf reads the credentials, principal and trace id of a request.
func CallerOf(r *http.Request) Caller {
	return Caller{Authorization: r.Header.Get("Authorization"), SessionID: r.Header.Get(mesh.HeaderSessionID), Principal: auth.FromContext(r.Context())}
}

// ReadBody reads a request body of at most limit bytes; a larger one is an
// error with status 413.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, ErrBodyTooLarge.With(fmt.Sprintf("request body exceeds the limit of %d bytes", limit))
	}
	if err != nil {
		return nil, mesh.ErrBadRequest.With("reading the request body: " + err.Error())
	}
	return data, nil
}

// ErrBodyTooLarge is a request body over the configured limit.
var ErrBodyTooLarge = mesh.NewError("body_too_large", http.StatusRequestEntityTooLarge, "request body too large")

// DecodeBody reads a JSON object into v; an empty body is allowed when
// optional. Errors name the problem and carry status 400 or 413.
func DecodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, optional bool) error {
	data, err := ReadBody(w, r, limit)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		if optional {
			return nil
		}
		return mesh.ErrBadRequest.With("empty body: send a JSON object")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return mesh.ErrBadRequest.With("invalid body: " + mesh.JSONErrorText(err))
	}
	return nil
}

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// WriteJSONDoc is [WriteJSON] for a body whose "conversation" is doc: its
// messages go out as stored, not scanned again by encoding/json.
func WriteJSONDoc(w http.ResponseWriter, status int, body map[string]any, doc *store.ConversationDoc) {
	rest := make(map[string]any, len(body))
	for k, v := range body {
		if k != "conversation" {
			rest[k] = v
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rest); err != nil {
		WriteError(w, err)
		return
	}
	bp := answerBufs.Get().(*[]byte)
	out, err := doc.AppendJSON(append((*bp)[:0], `{"conversation":`...))
	if err != nil {
		answerBufs.Put(bp)
		WriteError(w, err)
		return
	}
	if tail := bytes.TrimSpace(buf.Bytes()); len(tail) > 2 {
		out = append(append(out, ','), tail[1:]...)
	} else {
		out = append(out, '}')
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	out = append(out, '\n')
	_, _ = w.Write(out)
	if cap(out) <= maxPooledAnswer {
		*bp = out[:0]
		answerBufs.Put(bp)
	}
}

// answerBufs are the buffers [WriteJSONDoc] writes answers in: an answer
// with its page of messages is some kilobytes, and every turn has one.
var answerBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledAnswer bounds the buffers put back: a rare large answer's goes.
const maxPooledAnswer = 256 << 10

// WriteError writes err as {"error", "code"} with its status; a refusal of a
// conversation waiting for approval also carries the approval, and a
// limit's refusal ([LimitError]) its resetAt (RFC 3339).
func WriteError(w http.ResponseWriter, err error) {
	body := map[string]any{"error": err.Error(), "code": mesh.ErrorKind(err)}
	var pending *PendingError
	if errors.As(err, &pending) {
		body["approval"] = pending.Approval
	}
	limit := LimitOf(err)
	if limit != nil {
		body["resetAt"] = limit.ResetAt.Format(time.RFC3339)
	}
	status := mesh.HTTPStatus(err)
	if ra := mesh.RetryAfter(err); ra > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ra))
	}
	if status >= 500 && limit == nil && !mesh.IsUnavailable(err) && !errors.Is(err, mesh.ErrDegraded) {
		body["error"] = "internal error: " + err.Error()
	}
	WriteJSON(w, status, body)
}

// Mux is where a surface registers its routes: an *http.ServeMux, or
// whatever records them (the bridge lists its routes for their access
// rules).
type Mux interface {
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}
