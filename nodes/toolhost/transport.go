package toolhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

const (
	// terminateAfter is how long a child may take to exit after its stdin
	// is closed, and again after SIGTERM, before it is killed.
	terminateAfter = 2 * time.Second
	// pipeDelay bounds the wait for a dead child's pipes to close (a
	// grandchild may hold them).
	pipeDelay = 2 * time.Second
	// maxLogLine caps one logged line of a child's stderr.
	maxLogLine = 4096
)

// transport returns how to reach s, and a function to call once the session
// is closed (it flushes the child's last stderr line).
func (s *server) transport() (mcp.Transport, *exec.Cmd, func(), error) {
	if s.cfg.URL != "" {
		hc := &http.Client{Transport: &httpTransport{base: http.DefaultTransport, headers: s.cfg.Headers}}
		return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc}, nil, func() {}, nil
	}
	path, err := findCommand(s.cfg.Command, s.h.cfg.SearchDirs)
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(path, s.cfg.Args...)
	cmd.Env = commandEnv(s.cfg, s.h.cfg.Environ)
	stderr := &lineLogger{log: s.log}
	cmd.Stderr = stderr
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = pipeDelay
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateAfter}, cmd, stderr.flush, nil
}

// findCommand resolves name on PATH, then in dirs. A name with a slash is
// used as it is.
func findCommand(name string, dirs []string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) || strings.ContainsRune(name, '/') {
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("command %s: %w", name, err)
		}
		return name, nil
	}
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	if errors.Is(err, exec.ErrDot) {
		return path, nil // found in the working directory through a relative PATH entry
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if len(dirs) == 0 {
		return "", fmt.Errorf("command %s: not found on PATH", name)
	}
	return "", fmt.Errorf("command %s: not found on PATH nor in %s", name, strings.Join(dirs, ", "))
}

// commandEnv is the environment of a server's command: what any program
// needs to run, from the toolhost's environment environ
// (config.ProgramEnv), and MESH_CPU_PROFILE (the sample server writes a
// profile there, as the roles do); then the server's env section, in a
// stable order, its values winning. Nothing else of the toolhost's
// environment passes, neither its NATS identity nor a variable it holds to
// expand another server's section: a server gets a secret only when its
// own env section names it.
func commandEnv(c config.MCPServer, environ []string) []string {
	env := config.ProgramEnv(environ)
	for _, kv := range environ {
		if strings.HasPrefix(kv, config.EnvProfile+"=") {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		env = append(env, k+"="+c.Env[k])
	}
	return env
}

// lineLogger logs what a child writes to stderr, one line per entry.
type lineLogger struct {
	log zerolog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > maxLogLine {
		l.emit(l.buf)
		l.buf = nil
	}
	if len(l.buf) == 0 {
		l.buf = nil // let a large buffer go
	}
	return len(p), nil
}

func (l *lineLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > maxLogLine {
		line = line[:maxLogLine]
	}
	if len(line) == 0 {
		return
	}
	l.log.Info().Str("stderr", string(line)).Msg("mcp server stderr")
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.emit(l.buf)
	l.buf = nil
}

// callKey marks the context of one tools/call for the HTTP transport.
type callKey struct{}

// callInfo is what the HTTP transport needs to know about a call.
type callInfo struct {
	// auth is the caller's Authorization header; never logged.
	auth string
}

func withCall(ctx context.Context, auth string) context.Context {
	return context.WithValue(ctx, callKey{}, callInfo{auth: auth})
}

// httpTransport adds the configured headers to every request to an HTTP
// MCP server, and the caller's Authorization to the requests of a call. The
// SDK creates the HTTP request of a call with the context given to
// CallTool, which is how the token gets here.
type httpTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *httpTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	call, isCall := req.Context().Value(callKey{}).(callInfo)
	r := req.Clone(req.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	// A configured Authorization header is the operator's choice for that
	// server and wins over the caller's.
	if isCall && call.auth != "" && !t.configured("Authorization") {
		r.Header.Set("Authorization", call.auth)
	}
	// The call's trace goes in the HTTP headers too, for servers and
	// proxies that trace HTTP rather than MCP's _meta.
	telemetry.HTTPInject(req.Context(), r.Header)
	resp, err := t.base.RoundTrip(r)
	if err != nil || !isCall {
		return resp, err
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		resp.Body.Close()
		return nil, &authError{status: resp.StatusCode}
	}
	return resp, nil
}

func (t *httpTransport) configured(name string) bool {
	for k := range t.headers {
		if http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(name) {
			return true
		}
	}
	return false
}
