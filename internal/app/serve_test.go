package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testLimits are short enough for a test and in the same proportions as the defaults.
var testLimits = ServerLimits{
	ReadHeaderTimeout: 2 * time.Second,
	BodyTimeout:       300 * time.Millisecond,
	RequestTimeout:    300 * time.Millisecond,
	WriteTimeout:      2 * time.Second,
	IdleTimeout:       300 * time.Millisecond,
	MaxConnections:    2,
}

// serveTest runs Serve with limits on a free port until the test ends, and returns its address.
func serveTest(t *testing.T, h http.Handler, limits ServerLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, slog.New(slog.DiscardHandler), limits) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return ln.Addr().String()
}

// TestServeCutsTricklingBody: a body sent a byte at a time is cut once the body timeout runs
// out, however long the client would go on.
func TestServeCutsTricklingBody(t *testing.T) {
	readErr := make(chan error, 1)
	addr := serveTest(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	}), testLimits)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /v1/agents HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	require.NoError(t, err)
	// 200 bytes 50 ms apart outlast the body timeout many times over.
	for range 200 {
		select {
		case err := <-readErr:
			var ne net.Error
			require.True(t, errors.As(err, &ne) && ne.Timeout(), "the body read ends with a timeout, got %v", err)
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := conn.Write([]byte("x")); err != nil {
			break // the server closed the connection
		}
	}
	select {
	case err := <-readErr:
		var ne net.Error
		require.True(t, errors.As(err, &ne) && ne.Timeout(), "the body read ends with a timeout, got %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the trickled body was never cut")
	}
}

// TestServeRequestDeadline: a non-streaming request's context ends at the request timeout, so
// a stalled database call it makes returns instead of hanging; the body timeout, shorter, does
// not end it early.
func TestServeRequestDeadline(t *testing.T) {
	addr := serveTest(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, r.Context().Err().Error(), http.StatusServiceUnavailable)
		case <-time.After(10 * time.Second):
			w.WriteHeader(http.StatusOK)
		}
	}), testLimits)
	for _, tc := range []struct {
		name, method, body string
	}{
		{"without a body", http.MethodGet, ""},
		{"with a body", http.MethodPost, `{"name":"a"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://"+addr+"/v1/agents", strings.NewReader(tc.body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			require.Contains(t, string(body), context.DeadlineExceeded.Error())
		})
	}
}

// TestServeStreamOutlivesTimeouts: an SSE stream keeps going well past the body and request
// timeouts, with its context alive.
func TestServeStreamOutlivesTimeouts(t *testing.T) {
	const frames = 12 // 100 ms apart: four times the read and request timeouts
	addr := serveTest(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range frames {
			if r.Context().Err() != nil {
				return
			}
			if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}), testLimits)
	resp, err := http.Get("http://" + addr + "/v1/sessions/sesn_1/events/stream")
	require.NoError(t, err)
	defer resp.Body.Close()
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			got = append(got, line)
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, got, frames)
}

// TestServeClosesIdleKeepAlive: a keep-alive connection with no request is closed after the
// idle timeout.
func TestServeClosesIdleKeepAlive(t *testing.T) {
	addr := serveTest(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), testLimits)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	// Bounded by our own deadline: a server that never closes fails with a timeout here.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the server closed the idle connection")
}

// TestServeCapsConnections: with MaxConnections 2, no more than two requests are ever being
// served at once, and the others still get their turn.
func TestServeCapsConnections(t *testing.T) {
	var cur, peak atomic.Int32
	addr := serveTest(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(30 * time.Millisecond)
		cur.Add(-1)
	}), testLimits)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			// A connection per request: the cap counts connections.
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := c.Get("http://" + addr + "/healthz")
			if err == nil {
				err = resp.Body.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, peak.Load(), int32(2))
}
