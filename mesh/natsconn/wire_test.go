package natsconn

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// The guard's reading of the server's protocol, however the bytes are cut.
func TestGuardFilter(t *testing.T) {
	in := "INFO {}\r\n" +
		"MSG _INBOX.mesh.agent.x 5 $JS.ACK.S.c.1.1.1.1.0 5\r\nhello\r\n" + // its own consumer: kept
		"MSG mesh.approval.a.decide 7 $JS.ACK.S.c.1.2.2.1.0 17\r\n{\"approved\":true}\r\n" + // pushed elsewhere: dropped
		"HMSG mesh.approval.a.decide 7 $JS.FC.S.c.x 12 12\r\nNATS/1.0\r\n\r\n\r\n" + // flow control elsewhere: dropped
		"HMSG mesh.approval.a.decide 7 _INBOX.mesh.bridge.r 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nok\r\n" + // a request: kept
		"-ERR 'Maximum Control Line Exceeded'\r\n" + // swallowed
		"-ERR 'Permissions Violation for Publish to \"x\"'\r\n" +
		"PING\r\n"
	want := "INFO {}\r\n" +
		"MSG _INBOX.mesh.agent.x 5 $JS.ACK.S.c.1.1.1.1.0 5\r\nhello\r\n" +
		"HMSG mesh.approval.a.decide 7 _INBOX.mesh.bridge.r 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nok\r\n" +
		"-ERR 'Permissions Violation for Publish to \"x\"'\r\n" +
		"PING\r\n"
	for _, chunk := range []int{1, 2, 3, 7, 16, 64, len(in)} {
		g := &guardConn{inbox: []byte("_INBOX.mesh.agent."), inboxSids: map[string]bool{"5": true}}
		var events []string
		g.event = func(subject, what string) { events = append(events, subject) }
		for i := 0; i < len(in); i += chunk {
			g.filter([]byte(in[i:min(i+chunk, len(in))]))
		}
		if got := string(g.out); got != want {
			t.Errorf("chunks of %d: got\n%q\nwant\n%q", chunk, got, want)
		}
		if len(events) != 3 {
			t.Errorf("chunks of %d: events %q, want three", chunk, events)
		}
	}
}

// chunkConn is a socket that reads data in chunks of at most n bytes.
type chunkConn struct {
	net.Conn
	data []byte
	n    int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[k:]
	return k, nil
}

// The guard's Read hands on what filter keeps, in order, whatever the
// sizes of the socket's reads and of nats.go's buffer, its buffer used
// again from one read of the socket to the next.
func TestGuardRead(t *testing.T) {
	msg := "MSG _INBOX.mesh.agent.x 5 $JS.ACK.S.c.1.1.1.1.0 5\r\nhello\r\n"
	drop := "MSG mesh.approval.a.decide 7 $JS.ACK.S.c.1.2.2.1.0 17\r\n{\"approved\":true}\r\n"
	big := "MSG _INBOX.mesh.agent.y 5 100000\r\n" + strings.Repeat("b", 100000) + "\r\n"
	in := strings.Repeat(msg+drop, 500) + big + strings.Repeat(msg, 300)
	want := strings.Repeat(msg, 500) + big + strings.Repeat(msg, 300)
	for _, size := range [][2]int{{7, 5}, {1000, 4096}, {32 << 10, 32 << 10}, {32 << 10, 100}} {
		g := &guardConn{Conn: &chunkConn{data: []byte(in), n: size[0]}, inbox: []byte("_INBOX.mesh.agent."), inboxSids: map[string]bool{"5": true}}
		var got []byte
		p := make([]byte, size[1])
		for {
			n, err := g.Read(p)
			got = append(got, p[:n]...)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if string(got) != want {
			t.Errorf("reads of %d into %d: %d bytes, want %d", size[0], size[1], len(got), len(want))
		}
		if cap(g.out) > maxKeptOut {
			t.Errorf("reads of %d into %d: kept a buffer of %d bytes", size[0], size[1], cap(g.out))
		}
	}
}

// BenchmarkGuardRead is the guard's Read of events of 300 bytes, 32 KiB a
// read of the socket, into nats.go's buffer of 32 KiB.
func BenchmarkGuardRead(b *testing.B) {
	payload := strings.Repeat("x", 300)
	msg := "HMSG mesh.evt.0f0e0d0c-1111-2222-3333-444455556666.TEXT_MESSAGE_CONTENT 5 $JS.ACK.MESH_EVENTS.c.1.2.3.1712345678.0 47 347\r\n" +
		"NATS/1.0\r\nNats-Msg-Id: run:1:3\r\nMesh-Run: r\r\n\r\n" + payload + "\r\n"
	data := []byte(strings.Repeat(msg, 1000))
	conn := &chunkConn{n: 32 << 10}
	g := &guardConn{Conn: conn, inbox: []byte("_INBOX.mesh.bridge."), inboxSids: map[string]bool{"5": true}}
	p := make([]byte, 32<<10)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		conn.data = data
		for {
			if _, err := g.Read(p); err != nil {
				break
			}
		}
		g.err = nil
	}
}

// The guard's reading of what nats.go writes: inbox subscriptions are
// remembered, and an operation whose line is too long is not sent.
func TestGuardWatch(t *testing.T) {
	long := strings.Repeat("a", MaxControlLine)
	g := &guardConn{inbox: []byte("_INBOX.mesh.agent."), inboxSids: map[string]bool{}}
	out := g.watch([]byte("SUB _INBOX.mesh.agent.x.* 3\r\nSUB mesh.tool.> q 4\r\nPUB a.b 5\r\nSUB x\r\n\r\n"))
	if string(out) != "SUB _INBOX.mesh.agent.x.* 3\r\nSUB mesh.tool.> q 4\r\nPUB a.b 5\r\nSUB x\r\n\r\n" {
		t.Errorf("changed a write with nothing to refuse: %q", out)
	}
	if !g.inboxSids["3"] || g.inboxSids["4"] {
		t.Errorf("inbox sids %v, want 3 only", g.inboxSids)
	}
	out = g.watch([]byte("PUB x." + long + " 3\r\nabc\r\nHPUB ok _INBOX.r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nSUB y." + long + " 9\r\nUNSUB 3\r\n" +
		"PUB z." + long + " _INBOX.mesh.agent.m.7 2\r\nhi\r\n" + // a request: answered "no responders" at once
		"HPUB w." + long + " _INBOX.elsewhere 12 12\r\nNATS/1.0\r\n\r\n\r\nPING\r\n")) // a reply outside the inbox: left out
	if want := "HPUB ok _INBOX.r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nUNSUB 3\r\n" +
		"HPUB _INBOX.mesh.agent.m.7 16 16\r\nNATS/1.0 503\r\n\r\n\r\nPING\r\n"; string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
	if g.inboxSids["3"] {
		t.Error("UNSUB did not forget sid 3")
	}
}

// BenchmarkGuard is the wire guard's cost per message the server sends: an
// event of 300 bytes delivered to a consumer in the inbox.
func BenchmarkGuard(b *testing.B) {
	payload := strings.Repeat("x", 300)
	msg := []byte("HMSG mesh.evt.0f0e0d0c-1111-2222-3333-444455556666.TEXT_MESSAGE_CONTENT 5 $JS.ACK.MESH_EVENTS.c.1.2.3.1712345678.0 47 347\r\n" +
		"NATS/1.0\r\nNats-Msg-Id: run:1:3\r\nMesh-Run: r\r\n\r\n" + payload + "\r\n")
	g := &guardConn{inbox: []byte("_INBOX.mesh.bridge."), inboxSids: map[string]bool{"5": true}}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		g.filter(msg)
		g.out = g.out[:0]
	}
}
