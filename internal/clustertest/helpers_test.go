//go:build cluster

package clustertest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/stretchr/testify/require"
)

// tools names the programs the tests drive, as a user would: make test-cluster sets them.
var tools = struct{ kubectl, helm string }{kubectl: os.Getenv("KUBECTL"), helm: os.Getenv("HELM")}

func TestMain(m *testing.M) {
	for name, v := range map[string]string{"KUBECONFIG": os.Getenv("KUBECONFIG"), "KUBECTL": tools.kubectl, "HELM": tools.helm} {
		if v == "" {
			fmt.Fprintf(os.Stderr, "clustertest: %s is not set; run these tests with `make test-cluster`\n", name)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// run runs a command and returns its stdout; a failure fails the test with stderr.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := tryRun(name, args...)
	require.NoError(t, err, "%s %s", name, strings.Join(args, " "))
	return out
}

func tryRun(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func kubectl(t testing.TB, args ...string) string {
	t.Helper()
	return run(t, tools.kubectl, args...)
}

func helm(t testing.TB, args ...string) string {
	t.Helper()
	return run(t, tools.helm, args...)
}

// eventually polls check until it reports done, failing the test with check's last word after
// limit.
func eventually(t testing.TB, limit time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for {
		done, state := check()
		if done {
			return
		}
		if state != "" {
			last = state
		}
		if time.Now().After(deadline) {
			require.FailNow(t, what+" did not happen within "+limit.String(), "last seen: %s", last)
		}
		time.Sleep(time.Second)
	}
}

// portForward runs `kubectl port-forward` to target in ns on a free local port, as the docs
// show, and returns the local address. It ends with the test.
func portForward(t testing.TB, ns, target string, port int) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	local := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	cmd := exec.Command(tools.kubectl, "-n", ns, "port-forward", target, fmt.Sprintf("%d:%d", local, port))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(local)
	eventually(t, 30*time.Second, "port-forward to "+target, func() (bool, string) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, out.String()
		}
		_ = c.Close()
		return true, ""
	})
	return addr
}

// release is one installed chart: its namespace, name and the API as a client sees it.
type release struct {
	ns, name string
	key      string
	client   anthropic.Client
	api      string
}

func (r *release) fullname() string { return r.name + "-managed-agents" }

// connect port-forwards the API Service and makes an SDK client with the chart's generated key.
func (r *release) connect(t testing.TB) {
	t.Helper()
	key := kubectl(t, "-n", r.ns, "get", "secret", r.fullname(), "-o", "jsonpath={.data.api-key}")
	dec, err := decodeBase64(key)
	require.NoError(t, err)
	r.key = dec
	r.api = "http://" + portForward(t, r.ns, "svc/"+r.fullname(), 8080)
	r.client = anthropic.NewClient(option.WithBaseURL(r.api), option.WithAPIKey(r.key), option.WithMaxRetries(5))
}

// session makes an agent with the built-in tools, an environment and a session, and opens its
// stream.
type session struct {
	t      testing.TB
	r      *release
	id     string
	stream *ssestream.Stream[anthropic.BetaManagedAgentsStreamSessionEventsUnion]
}

func (r *release) newSession(t testing.TB, envCfg anthropic.BetaEnvironmentNewParamsConfigUnion) *session {
	t.Helper()
	ctx := context.Background()
	agent, err := r.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "cluster", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}}}})
	require.NoError(t, err)
	env, err := r.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{
		Name: fmt.Sprintf("cluster-%d", time.Now().UnixNano()), Config: envCfg})
	require.NoError(t, err)
	sess, err := r.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agent.ID)}, EnvironmentID: env.ID})
	require.NoError(t, err)
	// Deleting the session deletes its sandbox pod, which frees the node for the next test.
	t.Cleanup(func() {
		_, _ = r.client.Beta.Sessions.Delete(context.Background(), sess.ID, anthropic.BetaSessionDeleteParams{})
	})
	s := &session{t: t, r: r, id: sess.ID}
	// A bound on the whole stream, so a turn that never ends fails the test instead of
	// hanging it until go test's timeout.
	streamCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	s.stream = r.client.Beta.Sessions.Events.StreamEvents(streamCtx, sess.ID, anthropic.BetaSessionEventStreamParams{})
	t.Cleanup(func() { _ = s.stream.Close(); cancel() })
	return s
}

// say sends one user.message and returns the text of the turn's agent.message (the fake
// model answers a tool round with "NAME: OUTPUT" lines).
func (s *session) say(text string) string {
	s.t.Helper()
	_, err := s.r.client.Beta.Sessions.Events.Send(context.Background(), s.id, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text}}}}}}})
	require.NoError(s.t, err)
	var answer strings.Builder
	var seen []string
	for {
		require.True(s.t, s.stream.Next(), "stream ended before idle after %v: %v", seen, s.stream.Err())
		ev := s.stream.Current()
		seen = append(seen, ev.Type)
		switch ev.Type {
		case "agent.message":
			for _, b := range ev.AsAgentMessage().Content {
				answer.WriteString(b.Text)
			}
		case "session.error":
			require.FailNow(s.t, "session.error", "%s", ev.RawJSON())
		case "session.status_idle":
			if ev.StopReason.Type != "requires_action" {
				return answer.String()
			}
		}
	}
}

func decodeBase64(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	return string(b), err
}
