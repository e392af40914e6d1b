//go:build integration

package kubernetes_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
	"github.com/managed-agents/managed-agents/internal/egress"
	"github.com/managed-agents/managed-agents/internal/sandbox"
)

var proxyKey = []byte("kubernetes egress test key, 32 bytes or more")

// The test's names for what sandboxes reach: the proxy dials both at the test's own server,
// so only its policy decides.
const (
	allowedHost = "allowed.example.test"
	deniedHost  = "denied.example.test"
)

// startEgress runs the real egress proxy on 127.0.0.1 with the key the controller signs
// with, and points pods' Hosts egress at it, as the chart's proxy Deployment and Service are.
func startEgress(t testing.TB, pods *controllers.SandboxPods) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	}))
	t.Cleanup(upstream.Close)
	up := upstream.Listener.Addr().String()
	proxy, err := egress.New(egress.Config{Key: proxyKey, Ports: []int{80},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			if host != allowedHost && host != deniedHost {
				return nil, fmt.Errorf("the test dials only its own names, not %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, up)
		}})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proxy.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	pods.EgressProxy = controllers.PodPeer{Namespace: "agents", Selector: map[string]string{"app.kubernetes.io/component": "egress-proxy"}}
	pods.EgressProxyPort = int32(ln.Addr().(*net.TCPAddr).Port)
	pods.EgressProxyHost = "127.0.0.1"
	pods.EgressProxyKey = proxyKey
}

// testEgressProxy: a command in an allowlisted sandbox reaches an allowed host through the
// proxy, with the credentials the controller signed into the binding's Secret, and is
// refused for another host; the pod spec holds no credentials.
func testEgressProxy(t *testing.T, w *world) {
	ctx := t.Context()
	p := w.provider(t)
	s := spec()
	s.Egress = sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{allowedHost}}
	s.Env = map[string]string{"HTTP_PROXY": "http://127.0.0.1:9", "KEEP": "1"}
	ref, err := p.Create(ctx, s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })

	var pod corev1.Pod
	require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.ExternalID}, &pod))
	for _, e := range pod.Spec.Containers[0].Env {
		require.NotContains(t, e.Value, "ma1.", "%s: no credentials in the pod spec", e.Name)
		if strings.EqualFold(e.Name, "https_proxy") || strings.EqualFold(e.Name, "http_proxy") {
			require.Equal(t, ref.ExternalID+"-token", e.ValueFrom.SecretKeyRef.Name, e.Name)
			require.Equal(t, v1alpha1.ProxyURLSecretKey, e.ValueFrom.SecretKeyRef.Key, e.Name)
		}
	}
	var secret corev1.Secret
	require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.ExternalID + "-token"}, &secret))
	require.Contains(t, string(secret.Data[v1alpha1.ProxyURLSecretKey]), "@127.0.0.1:")

	sb, err := p.Attach(ctx, ref)
	require.NoError(t, err)
	run := func(cmd string) string {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd})
		require.NoError(t, err)
		return string(res.Output)
	}
	require.Equal(t, "1", run(`printf %s "$KEEP"`), "the template's other variables stay")
	require.Equal(t, "hello from "+allowedHost, run("curl -sS --max-time 20 http://"+allowedHost+"/"))
	require.Equal(t, "403", run("curl -sS --max-time 20 -o /dev/null -w '%{http_code}' http://"+deniedHost+"/"), "another host is refused")
	require.Contains(t, run("curl -sS --max-time 20 http://"+deniedHost+"/"), deniedHost, "and the refusal names it")
}
