package natsconn

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// The wire guard sits between a role's NATS connection and its socket, and
// reads the protocol both ways. It does what nats.go cannot be told to do:
//
//   - A server that finds a protocol line too long (a subject built from an
//     id of thousands of characters) answers "-ERR 'Maximum Control Line
//     Exceeded'" and closes the socket; nats.go takes that error for fatal
//     and closes the connection for good, so the role would stay off the bus
//     until restarted. The guard does not send a publish or subscription
//     whose line is longer than the server's default limit (4 KiB): its
//     caller waits in vain (a request times out), and nobody else notices.
//     Should a server with a lower limit still refuse a line, the guard
//     swallows the error: nats.go then sees a plain disconnection and
//     reconnects, as it does for any other.
//   - NATS does not check a push consumer's deliver subject against its
//     creator's permissions: a role allowed to create a consumer could make
//     the server deliver stream messages, with headers it wrote, to any
//     subject, such as another role's request subject (the message then
//     even shows the stream's subject, not the one it came on). Such
//     messages carry a JetStream reply ($JS.ACK… or $JS.FC…); every
//     consumer the mesh's roles create delivers to their own inbox, so the
//     guard, which sees the connection's subscriptions go out, drops a
//     message with such a reply for any subscription outside the inbox.
//
// The guard also speaks TLS itself (the dialer tells nats.go to skip its
// own handshake), so that it reads the protocol in the clear.

// maxGuardLine bounds a protocol line the guard holds while it waits for
// its end; the server's own lines are far shorter.
const maxGuardLine = 1 << 20

// MaxControlLine is the longest protocol line a NATS server takes by
// default (max_control_line), and the longest nats.go parses itself.
const MaxControlLine = 4096

// wireDialer dials the server for nats.go and wraps the socket in a guard.
type wireDialer struct {
	timeout time.Duration
	// tls is the client TLS configuration; nil means the system's roots,
	// used only when the server requires TLS.
	tls *tls.Config
	// want: TLS is required by this side (a TLS configuration was given).
	want bool
	// inbox is the subject prefix JetStream may push to ("_INBOX.….").
	inbox string
	// event reports what the guard did (the subject, shortened, and why).
	event func(subject, what string)
}

// SkipTLSHandshake tells nats.go that the dialer does the TLS handshake.
func (d *wireDialer) SkipTLSHandshake() bool { return true }

// Dial connects, reads the server's INFO, upgrades to TLS when the server
// requires it (or offers it and this side wants it), and returns the guard.
func (d *wireDialer) Dial(network, address string) (net.Conn, error) {
	raw, err := (&net.Dialer{Timeout: d.timeout}).Dial(network, address)
	if err != nil {
		return nil, err
	}
	conn, err := d.handshake(raw, address)
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	return conn, nil
}

func (d *wireDialer) handshake(raw net.Conn, address string) (net.Conn, error) {
	_ = raw.SetDeadline(time.Now().Add(d.timeout))
	br := bufio.NewReaderSize(raw, 4096)
	info, err := br.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("read server info: %w", err)
	}
	info = bytes.Clone(info)
	var opts struct {
		TLSRequired  bool `json:"tls_required"`
		TLSAvailable bool `json:"tls_available"`
	}
	if !bytes.HasPrefix(info, []byte("INFO ")) || json.Unmarshal(bytes.TrimSpace(info[5:]), &opts) != nil {
		return nil, errors.New("the server did not start with INFO")
	}
	g := &guardConn{Conn: raw, out: info, inbox: []byte(d.inbox), event: d.event, inboxSids: map[string]bool{}}
	switch {
	case opts.TLSRequired || opts.TLSAvailable && d.want:
		if br.Buffered() > 0 {
			return nil, errors.New("the server sent data before the TLS handshake")
		}
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if d.tls != nil {
			cfg = d.tls.Clone()
		}
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(address)
			cfg.ServerName = host
		}
		tc := tls.Client(raw, cfg)
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		g.Conn = tc
	case d.want:
		return nil, errors.New("tls is configured but the server does not offer it")
	default:
		// Nothing follows INFO until the client speaks; keep it anyway.
		rest, _ := br.Peek(br.Buffered())
		g.out = append(g.out, rest...)
	}
	_ = raw.SetDeadline(time.Time{})
	return g, nil
}

// guardConn filters what the server sends (see the top of this file).
type guardConn struct {
	net.Conn
	inbox []byte
	event func(subject, what string)

	// The read side, nats.go's read loop.
	buf  [32 << 10]byte
	out  []byte // filtered bytes; out[off:] not yet read by nats.go
	off  int
	in   lines // the server's protocol
	pass int   // payload bytes still to hand on
	skip int   // payload bytes still to drop
	err  error // the socket's error, returned once out is drained

	// The write side: the subscriptions that go out, to tell inbox ones.
	wmu       sync.Mutex
	wr        lines
	wskip     int
	wdrop     bool            // the payload being skipped is not sent
	inboxSids map[string]bool // guarded by wmu
}

// lines gathers a protocol line that spans reads or writes.
type lines struct{ partial []byte }

// next returns the next whole line of data and the rest; line is nil when
// data ends before the line does (it is kept for the next call). A line
// longer than maxGuardLine is no line of the protocol: tooLong reports it.
func (l *lines) next(data []byte) (line, rest []byte, tooLong bool) {
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		if len(l.partial)+len(data) > maxGuardLine {
			return nil, data, true
		}
		l.partial = append(l.partial, data...)
		return nil, nil, false
	}
	line, rest = data[:i+1], data[i+1:]
	if len(l.partial) > 0 {
		line = append(l.partial, line...)
		l.partial = l.partial[:0]
	}
	return line, rest, false
}

// Write sends p, but for the operations whose line the server would refuse
// (see the top of this file). nats.go writes whole operations at a time.
func (g *guardConn) Write(p []byte) (int, error) {
	out := g.watch(p)
	if len(out) > 0 {
		if _, err := g.Conn.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// watch follows what nats.go writes (SUB and UNSUB lines; the payloads of
// publishes are skipped) and returns what to send: data itself, or a copy
// in which each operation whose line is too long is left out, or, for a
// request, replaced by its answer (see refusal).
func (g *guardConn) watch(data []byte) []byte {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	var edits []edit
	pos := 0
	for pos < len(data) {
		if g.wskip > 0 {
			k := min(g.wskip, len(data)-pos)
			if g.wdrop {
				edits = append(edits, edit{start: pos, end: pos + k})
			}
			g.wskip -= k
			pos += k
			continue
		}
		g.wdrop = false
		line, rest, tooLong := g.wr.next(data[pos:])
		if tooLong {
			g.wskip = 1 << 62 // not the protocol: stop following
			break
		}
		if line == nil {
			break
		}
		opStart := pos
		pos = len(data) - len(rest)
		f := bytes.Fields(line)
		if len(f) < 2 {
			continue
		}
		var reply []byte
		switch string(f[0]) {
		case "SUB":
			if len(f) >= 3 && bytes.HasPrefix(f[1], g.inbox) {
				g.inboxSids[string(f[len(f)-1])] = true
			}
		case "UNSUB":
			delete(g.inboxSids, string(f[1]))
		case "PUB", "HPUB":
			if n, err := strconv.Atoi(string(f[len(f)-1])); err == nil && n >= 0 {
				g.wskip = n + 2
			}
			if string(f[0]) == "PUB" && len(f) == 4 || string(f[0]) == "HPUB" && len(f) == 5 {
				reply = f[2]
			}
		}
		// A line too long for the server is not sent, nor its payload (the
		// line must lie whole in this write, as nats.go writes them).
		if len(line) > MaxControlLine && pos-opStart == len(line) {
			g.report(f[1], "did not send a subject longer than the server takes")
			edits = append(edits, edit{start: opStart, end: pos, repl: g.refusal(reply)})
			g.wdrop = true
		}
	}
	if len(edits) == 0 {
		return data
	}
	out := make([]byte, 0, len(data))
	last := 0
	for _, e := range edits {
		out = append(append(out, data[last:e.start]...), e.repl...)
		last = e.end
	}
	return append(out, data[last:]...)
}

// edit replaces data[start:end] with repl.
type edit struct {
	start, end int
	repl       []byte
}

// refusal is what is sent instead of a request that cannot be: a "no
// responders" status to its own inbox, which the server hands straight
// back, so that the caller fails at once instead of waiting out its
// timeout (a handler stuck that long would hold up every request behind
// it). A publish without a reply, or with a reply outside the inbox, is
// only left out.
func (g *guardConn) refusal(reply []byte) []byte {
	if !bytes.HasPrefix(reply, g.inbox) {
		return nil
	}
	const status = "NATS/1.0 503\r\n\r\n"
	return fmt.Appendf(nil, "HPUB %s %d %d\r\n%s\r\n", reply, len(status), len(status), status)
}

func (g *guardConn) inboxSub(sid []byte) bool {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	return g.inboxSids[string(sid)]
}

func (g *guardConn) Read(p []byte) (int, error) {
	for g.off == len(g.out) && g.err == nil {
		// Read through: the buffer is filled again from its start. It
		// holds a read of the socket and a line carried over, unless a
		// long line passed: such a buffer is let go.
		g.out, g.off = g.out[:0], 0
		if cap(g.out) > maxKeptOut {
			g.out = nil
		}
		n, err := g.Conn.Read(g.buf[:])
		g.filter(g.buf[:n])
		g.err = err
	}
	if g.off == len(g.out) {
		return 0, g.err
	}
	n := copy(p, g.out[g.off:])
	g.off += n
	return n, nil
}

// maxKeptOut bounds the filtered bytes' buffer kept from one read of the
// socket to the next: made anew for each read, it would be allocated for
// every read of a busy bridge's socket.
const maxKeptOut = 64 << 10

// filter appends to out what of data nats.go may see.
func (g *guardConn) filter(data []byte) {
	for len(data) > 0 {
		switch {
		case g.pass > 0:
			k := min(g.pass, len(data))
			g.out = append(g.out, data[:k]...)
			g.pass -= k
			data = data[k:]
		case g.skip > 0:
			k := min(g.skip, len(data))
			g.skip -= k
			data = data[k:]
		default:
			line, rest, tooLong := g.in.next(data)
			if tooLong {
				// Not a line the server writes: hand everything on.
				g.out = append(append(g.out, g.in.partial...), data...)
				g.pass = 1 << 62
				return
			}
			if line == nil {
				return
			}
			data = rest
			g.control(line)
		}
	}
}

// control handles one protocol line of the server.
func (g *guardConn) control(line []byte) {
	switch {
	case bytes.HasPrefix(line, []byte("MSG ")), bytes.HasPrefix(line, []byte("HMSG ")):
		subject, sid, reply, size, ok := parseMsgLine(line)
		if !ok {
			break
		}
		if isJetStreamReply(reply) && !g.inboxSub(sid) {
			g.skip = size + 2
			g.report(subject, "dropped a message JetStream pushed outside this connection's inbox")
			return
		}
		g.out = append(g.out, line...)
		g.pass = size + 2
		return
	case bytes.HasPrefix(line, []byte("-ERR")) && bytes.Contains(bytes.ToLower(line), []byte("maximum control line exceeded")):
		g.report(nil, "the server refused a protocol line longer than its limit; reconnecting")
		return
	}
	g.out = append(g.out, line...)
}

func (g *guardConn) report(subject []byte, what string) {
	if g.event == nil {
		return
	}
	if len(subject) > 64 {
		subject = append(bytes.Clone(subject[:64]), "…"...)
	}
	g.event(string(subject), what)
}

// parseMsgLine reads "MSG <subject> <sid> [reply] <size>" and
// "HMSG <subject> <sid> [reply] <header size> <total size>".
func parseMsgLine(line []byte) (subject, sid, reply []byte, size int, ok bool) {
	var f [6][]byte
	n := splitFields(line, &f)
	want := 4
	if bytes.Equal(f[0], []byte("HMSG")) {
		want = 5
	}
	switch n {
	case want:
	case want + 1:
		reply = f[3]
	default:
		return nil, nil, nil, 0, false
	}
	size, err := strconv.Atoi(string(f[n-1]))
	if err != nil || size < 0 {
		return nil, nil, nil, 0, false
	}
	return f[1], f[2], reply, size, true
}

// splitFields splits a protocol line at spaces and tabs into f without
// allocating, and returns how many fields there are (len(f)+1 for more).
func splitFields(line []byte, f *[6][]byte) int {
	n, start := 0, -1
	for i := 0; i <= len(line); i++ {
		sep := i == len(line) || line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n'
		switch {
		case !sep && start < 0:
			start = i
		case sep && start >= 0:
			if n == len(f) {
				return n + 1
			}
			f[n], n, start = line[start:i], n+1, -1
		}
	}
	return n
}

func isJetStreamReply(reply []byte) bool {
	return bytes.HasPrefix(reply, []byte("$JS.ACK.")) || bytes.HasPrefix(reply, []byte("$JS.FC."))
}
