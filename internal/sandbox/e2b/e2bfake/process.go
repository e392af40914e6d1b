package e2bfake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
)

// chunk is envd's read size of a process's pipes.
const chunk = 32 << 10

// drainGrace is how long the pipes are read after the process ended, for a background
// process that keeps them open.
const drainGrace = time.Second

// start is process.Process/Start: the process runs until it ends or is signaled, whatever
// happens to the stream (envd keeps it when the client goes away); every process gets a
// session of its own so that the fake can kill all a sandbox ran when it is killed.
func (f *Fake) start(ctx context.Context, req *connect.Request[startRequest], stream *connect.ServerStream[startResponse]) error {
	s := ctx.Value(sandboxKey{}).(*sbox)
	msg := req.Msg
	if msg.Pty != nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("the fake has no pty"))
	}
	if !filepath.IsAbs(msg.Process.Cmd) {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cmd %q is not an absolute path", msg.Process.Cmd))
	}
	cwd := f.opts.Workspace
	if msg.Process.Cwd != nil {
		cwd = *msg.Process.Cwd
	}
	dir, ok := f.hostPath(s, cwd)
	if !ok {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd %q is outside the fake's file system", cwd))
	}
	if _, err := os.Stat(dir); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s' does not exist", cwd))
	}
	interval := 0
	if v := req.Header().Get("Keepalive-Ping-Interval"); v != "" {
		interval, _ = strconv.Atoi(v)
	}

	cmd := exec.Command(msg.Process.Cmd, msg.Process.Args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir, "USER=user", "LOGNAME=user"}
	for k, v := range s.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range msg.Process.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	outR, outW, err := os.Pipe()
	if err != nil {
		return connect.NewError(connect.CodeInternal, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return connect.NewError(connect.CodeInternal, err)
	}
	// envd gives a process a stdin pipe unless told otherwise, open until CloseStdin.
	inR, inW, err := os.Pipe()
	if err != nil {
		return connect.NewError(connect.CodeInternal, err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		for _, p := range []*os.File{outR, outW, errR, errW, inR, inW} {
			_ = p.Close()
		}
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("start %s: %w", msg.Process.Cmd, err))
	}
	_ = outW.Close()
	_ = errW.Close()
	_ = inR.Close()
	pid := uint32(cmd.Process.Pid)
	f.mu.Lock()
	s.procs[pid] = cmd
	s.sessions = append(s.sessions, cmd.Process.Pid)
	drop := f.dropExec > 0
	if drop {
		f.dropExec--
	}
	f.mu.Unlock()

	events := make(chan dataEvent, 64)
	readersDone := make(chan struct{}, 2)
	read := func(r *os.File, stderr bool) {
		defer func() { readersDone <- struct{}{} }()
		for {
			buf := make([]byte, chunk)
			n, err := r.Read(buf)
			if n > 0 {
				if stderr {
					events <- dataEvent{Stderr: buf[:n]}
				} else {
					events <- dataEvent{Stdout: buf[:n]}
				}
			}
			if err != nil {
				return
			}
		}
	}
	go read(outR, false)
	go read(errR, true)
	ended := make(chan endEvent, 1)
	go func() {
		werr := cmd.Wait()
		_ = inW.Close()
		// A background process may hold the pipes open: the readers get a grace to read what
		// is buffered (a reader whose deadline passed before it read would drop it), then
		// stop, as envd's do when its Wait closes them. Without such a process they end at
		// EOF at once.
		deadline := time.Now().Add(drainGrace)
		_ = outR.SetReadDeadline(deadline)
		_ = errR.SetReadDeadline(deadline)
		<-readersDone
		<-readersDone
		_ = outR.Close()
		_ = errR.Close()
		close(events)
		f.mu.Lock()
		delete(s.procs, pid)
		f.mu.Unlock()
		end := endEvent{ExitCode: int32(cmd.ProcessState.ExitCode()), Exited: cmd.ProcessState.Exited(), Status: cmd.ProcessState.String()}
		if werr != nil {
			m := werr.Error()
			end.Error = &m
		}
		ended <- end
	}()

	if err := stream.Send(&startResponse{Event: processEvent{Start: &startEvent{Pid: pid}}}); err != nil {
		return err
	}
	if drop {
		// The connection goes down mid-stream, the process runs on.
		panic(http.ErrAbortHandler)
	}
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(time.Duration(interval) * time.Second)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			if err := stream.Send(&startResponse{Event: processEvent{Keepalive: &struct{}{}}}); err != nil {
				return err
			}
		case ev, ok := <-events:
			if !ok {
				end := <-ended
				return stream.Send(&startResponse{Event: processEvent{End: &end}})
			}
			if err := stream.Send(&startResponse{Event: processEvent{Data: &ev}}); err != nil {
				return err
			}
		}
	}
}

// sendSignal is process.Process/SendSignal: like envd, it signals the process only, not its
// group.
func (f *Fake) sendSignal(ctx context.Context, req *connect.Request[sendSignalRequest]) (*connect.Response[sendSignalResponse], error) {
	s := ctx.Value(sandboxKey{}).(*sbox)
	sig, ok := signalNumber(req.Msg.Signal)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("invalid signal: %s", req.Msg.Signal))
	}
	if req.Msg.Process.Pid == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no pid"))
	}
	f.mu.Lock()
	cmd := s.procs[*req.Msg.Process.Pid]
	f.mu.Unlock()
	if cmd == nil {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", *req.Msg.Process.Pid))
	}
	if err := cmd.Process.Signal(syscall.Signal(sig)); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error sending signal: %w", err))
	}
	return connect.NewResponse(&sendSignalResponse{}), nil
}

// killAll kills every process of the sessions the sandbox's commands started (their job
// groups included), as a killed VM would.
func (s *sbox) killAll() {
	if len(s.sessions) == 0 {
		return
	}
	sessions := map[int]bool{}
	for _, sid := range s.sessions {
		sessions[sid] = true
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may hold spaces.
		rest := string(data)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) < 4 {
			continue
		}
		if sid, err := strconv.Atoi(fields[3]); err == nil && sessions[sid] {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	s.sessions = nil
}
