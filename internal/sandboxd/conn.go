package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// ServeConn answers on the one connection conn until the peer closes it or ctx ends. It is
// how the docker provider talks to a container: each connection is a `docker exec` of
// `managed-agents sandboxd --stdio`, whose stdin and stdout carry HTTP/1.1 (StdioConn), so a
// container needs no network and no listening port, and a command costs one request on a
// kept-alive stream instead of an exec of its own. When the peer goes, the calls in flight
// see their request canceled and the daemon kills their commands' process groups.
func (s *Server) ServeConn(ctx context.Context, conn net.Conn) error {
	ln := newSingleListener(conn)
	srv := s.httpServer(ctx)
	return run(ctx, srv, func() error {
		err := srv.Serve(ln)
		if errors.Is(err, net.ErrClosed) {
			return nil // the connection ended, nothing was in flight (it closes after its calls)
		}
		return err
	})
}

// singleListener hands out one connection, then blocks until that connection is closed
// (http.Server closes it when the peer hangs up) or the listener is.
type singleListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	addr   net.Addr
}

func newSingleListener(conn net.Conn) *singleListener {
	l := &singleListener{conns: make(chan net.Conn, 1), closed: make(chan struct{}), addr: conn.LocalAddr()}
	l.conns <- &closeNotifyConn{Conn: conn, onClose: l.close}
	return l
}

func (l *singleListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *singleListener) close() { l.once.Do(func() { close(l.closed) }) }

func (l *singleListener) Close() error {
	l.close()
	return nil
}

func (l *singleListener) Addr() net.Addr { return l.addr }

type closeNotifyConn struct {
	net.Conn
	onClose func()
}

func (c *closeNotifyConn) Close() error {
	err := c.Conn.Close()
	c.onClose()
	return err
}

// StdioConn is the process's standard input and output as one connection. Both are switched
// to non-blocking mode first, so that the runtime's poller serves them and the deadlines
// http.Server sets work (a blocking pipe would ignore them, and a read the server wants to
// abort would hang).
func StdioConn() (net.Conn, error) {
	in, err := pollable(os.Stdin, "stdin")
	if err != nil {
		return nil, err
	}
	out, err := pollable(os.Stdout, "stdout")
	if err != nil {
		return nil, err
	}
	return NewPipeConn(in, out), nil
}

func pollable(f *os.File, name string) (*os.File, error) {
	fd := int(f.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("sandboxd --stdio: %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// NewPipeConn is a connection reading from r and writing to w (two pipes, or a process's
// standard streams). Closing it closes both; the deadlines reach whichever side supports
// them.
func NewPipeConn(r io.ReadCloser, w io.WriteCloser) net.Conn {
	return &pipeConn{r: r, w: w}
}

type pipeConn struct {
	r    io.ReadCloser
	w    io.WriteCloser
	once sync.Once
	err  error
}

func (c *pipeConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	return n, netError(err)
}

func (c *pipeConn) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	return n, netError(err)
}

// netError makes a file's deadline error a net.Error that says it is a timeout: http.Server
// aborts its background read with a past deadline and tells that apart from a peer that
// went only by net.Error's Timeout (an *fs.PathError has the method but not the interface,
// so the server would take every such abort for a hang-up and cancel the call).
func netError(err error) error {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return timeoutError{err}
	}
	return err
}

type timeoutError struct{ error }

func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (e timeoutError) Unwrap() error { return e.error }

func (c *pipeConn) Close() error {
	c.once.Do(func() { c.err = errors.Join(c.r.Close(), c.w.Close()) })
	return c.err
}

func (c *pipeConn) LocalAddr() net.Addr  { return pipeAddr{} }
func (c *pipeConn) RemoteAddr() net.Addr { return pipeAddr{} }

type readDeadliner interface{ SetReadDeadline(time.Time) error }
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

func (c *pipeConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

func (c *pipeConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.r.(readDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}

func (c *pipeConn) SetWriteDeadline(t time.Time) error {
	if d, ok := c.w.(writeDeadliner); ok {
		return d.SetWriteDeadline(t)
	}
	return nil
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "stdio" }
