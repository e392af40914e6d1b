package egress

import (
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// limitListener accepts at most n connections at a time (a connection counts until it is
// closed, hijacked tunnels included) and can close all of them at shutdown, which
// http.Server does not do for hijacked ones.
//
// It also bounds the connections of one client address (perClient): each session network
// holds one sandbox, so one address is one sandbox, and without this bound a single sandbox
// could hold every slot with idle tunnels and stall every other sandbox's egress. A client
// over its bound gets a 429 and the connection is closed.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	perClient int
	mu        sync.Mutex
	conns     map[*limitConn]struct{}
	byClient  map[string]int
}

func newLimitListener(ln net.Listener, n, perClient int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), perClient: perClient,
		conns: map[*limitConn]struct{}{}, byClient: map[string]int{}}
}

// tooMany is what a client over its connection bound reads before the close.
var tooMany = func() string {
	body := "egress proxy: this sandbox has too many connections open\n"
	return "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		l.slots <- struct{}{}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		client := clientHost(c.RemoteAddr())
		l.mu.Lock()
		if l.perClient > 0 && l.byClient[client] >= l.perClient {
			l.mu.Unlock()
			<-l.slots
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c, tooMany)
			_ = c.Close()
			continue
		}
		lc := &limitConn{Conn: c, l: l, client: client}
		l.conns[lc] = struct{}{}
		l.byClient[client]++
		l.mu.Unlock()
		return lc, nil
	}
}

func clientHost(a net.Addr) string {
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

func (l *limitListener) closeAll() {
	l.mu.Lock()
	conns := make([]*limitConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

type limitConn struct {
	net.Conn
	l      *limitListener
	client string
	once   sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		if c.l.byClient[c.client]--; c.l.byClient[c.client] <= 0 {
			delete(c.l.byClient, c.client)
		}
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}

// CloseWrite half-closes a TCP connection, so a tunnel can pass an EOF on.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
