// Package kubetest plays the kubelet for envtest, which has none: for each sandbox pod it
// runs a real sandboxd (internal/sandboxd over sandbox/workspace in a temporary directory)
// with the pod's token and environment (Secret references resolved, a packages directory
// of its own when the pod names one), and writes the pod's status (Running, IP 127.0.0.1,
// Ready), as a kubelet whose readiness probe passed would. Every pod's endpoint has the same
// port, so one listener on 127.0.0.1 routes each request by its bearer token (each pod has
// its own) to that pod's daemon; a request with no live pod's token has its connection
// closed, as a deleted pod's address would.
//
// A pod whose workspace is a PersistentVolumeClaim serves the claim's directory, which
// outlives the pod (a suspended binding's next pod finds its files) and is removed once the
// claim is deleted; a pod waits for its claim to exist, as a kubelet waits for the volume.
//
// A pod whose image starts with UnpullablePrefix is left Pending with ImagePullBackOff.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sandbox/packages"
	"github.com/managed-agents/managed-agents/internal/sandbox/workspace"
	"github.com/managed-agents/managed-agents/internal/sandboxd"
)

// UnpullablePrefix marks images the kubelet cannot pull.
const UnpullablePrefix = "unpullable.invalid/"

// Kubelet runs the sandbox pods of one namespace.
type Kubelet struct {
	c    client.Client
	ns   string
	root string
	ln   net.Listener

	mu      sync.Mutex
	byToken map[string]*sandboxd.Server
	pods    map[types.UID]*pod
	claims  map[string]string // claim name → its directory
}

type pod struct {
	token string
	dir   string
	srv   *sandboxd.Server
}

// Start runs the kubelet until the test ends.
func Start(t testing.TB, c client.Client, namespace string) *Kubelet {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	k := &Kubelet{c: c, ns: namespace, root: t.TempDir(), ln: ln, byToken: map[string]*sandboxd.Server{}, pods: map[types.UID]*pod{}, claims: map[string]string{}}
	srv := &http.Server{Handler: http.HandlerFunc(k.route), ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	wg.Go(func() { k.run(ctx, t) })
	t.Cleanup(func() {
		cancel()
		_ = srv.Close()
		wg.Wait()
	})
	return k
}

// Port is the port every sandbox pod's endpoint must name (the bindings' spec.port).
func (k *Kubelet) Port() int32 { return int32(k.ln.Addr().(*net.TCPAddr).Port) }

// Serving says whether the daemon of the pod with that UID still runs: a deleted pod's
// daemon stops at the kubelet's next sync, as a real container's does after its grace
// period, not at the moment the controller sees the pod gone.
func (k *Kubelet) Serving(uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.pods[uid]
	return ok
}

// ClaimDir is the directory of the claim of that name, "" before a pod mounted it or once
// the claim is deleted.
func (k *Kubelet) ClaimDir(name string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.claims[name]
}

// Dir is the workspace directory of the pod with uid, "" if the kubelet does not run it.
func (k *Kubelet) Dir(uid types.UID) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.pods[uid]; p != nil {
		return p.dir
	}
	return ""
}

func (k *Kubelet) route(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	k.mu.Lock()
	srv := k.byToken[token]
	k.mu.Unlock()
	if srv == nil {
		// No pod has this address any more: the connection is refused, as far as the client
		// can tell.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		http.Error(w, "no such pod", http.StatusBadGateway)
		return
	}
	srv.ServeHTTP(w, r)
}

func (k *Kubelet) run(ctx context.Context, t testing.TB) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := k.sync(ctx); err != nil && ctx.Err() == nil {
			t.Logf("kubetest kubelet: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sync starts the pods it does not run yet and forgets those that are gone.
func (k *Kubelet) sync(ctx context.Context) error {
	var list corev1.PodList
	// The controller's pods, bindings' and warm pools' alike (a claimed pool pod keeps its
	// UID, so the daemon it runs goes on serving it).
	if err := k.c.List(ctx, &list, client.InNamespace(k.ns), client.MatchingLabels{"app.kubernetes.io/component": "sandbox", "app.kubernetes.io/managed-by": "managed-agents"}); err != nil {
		return err
	}
	live := map[types.UID]bool{}
	var errs []error
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		live[p.UID] = true
		k.mu.Lock()
		_, running := k.pods[p.UID]
		k.mu.Unlock()
		if running && p.Status.Phase == corev1.PodRunning {
			continue
		}
		errs = append(errs, k.start(ctx, p, running))
	}
	k.mu.Lock()
	for uid, p := range k.pods {
		if !live[uid] {
			// A resumed binding's new pod has the same token: its daemon stays.
			if k.byToken[p.token] == p.srv {
				delete(k.byToken, p.token)
			}
			delete(k.pods, uid)
		}
	}
	k.mu.Unlock()
	errs = append(errs, k.syncClaims(ctx))
	return errors.Join(errs...)
}

// syncClaims removes the directories of claims that are deleted (or being deleted: in
// envtest no controller ever removes a claim's protection finalizer).
func (k *Kubelet) syncClaims(ctx context.Context) error {
	var list corev1.PersistentVolumeClaimList
	if err := k.c.List(ctx, &list, client.InNamespace(k.ns)); err != nil {
		return err
	}
	live := map[string]bool{}
	for _, c := range list.Items {
		if c.DeletionTimestamp == nil {
			live[c.Name] = true
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for name, dir := range k.claims {
		if !live[name] {
			errs = append(errs, os.RemoveAll(dir))
			delete(k.claims, name)
		}
	}
	return errors.Join(errs...)
}

// claimDir is the directory of the claim p's workspace mounts, made on first use; "" if the
// workspace is not a claim.
func (k *Kubelet) claimDir(ctx context.Context, p *corev1.Pod) (string, error) {
	name := ""
	for _, v := range p.Spec.Volumes {
		if v.Name == "workspace" && v.PersistentVolumeClaim != nil {
			name = v.PersistentVolumeClaim.ClaimName
		}
	}
	if name == "" {
		return "", nil
	}
	var c corev1.PersistentVolumeClaim
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, &c); err != nil {
		return "", err // a kubelet waits for the claim too
	}
	if c.DeletionTimestamp != nil {
		return "", errors.New("claim " + name + " is being deleted")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if dir := k.claims[name]; dir != "" {
		return dir, nil
	}
	dir := filepath.Join(k.root, "claims", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	k.claims[name] = dir
	return dir, nil
}

func (k *Kubelet) start(ctx context.Context, p *corev1.Pod, running bool) error {
	if len(p.Spec.Containers) == 0 {
		return nil
	}
	main := p.Spec.Containers[0]
	if strings.HasPrefix(main.Image, UnpullablePrefix) {
		if p.Status.Phase == corev1.PodPending && len(p.Status.ContainerStatuses) > 0 {
			return nil
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: main.Name, Image: main.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image " + main.Image}}}}}
		return k.c.Status().Update(ctx, p)
	}
	if !running {
		secretName := ""
		for _, v := range p.Spec.Volumes {
			if v.Secret != nil {
				secretName = v.Secret.SecretName
			}
		}
		var s corev1.Secret
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: secretName}, &s); err != nil {
			return err // the controller makes it first; a kubelet would wait too
		}
		token := string(s.Data[v1alpha1.TokenSecretKey])
		dir, err := k.claimDir(ctx, p)
		if err != nil {
			return err
		}
		if dir == "" {
			dir = filepath.Join(k.root, string(p.UID))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		// The container's environment as sandboxd would pass it on: none of ours, HOME the
		// workspace, PATH the host's (the image's would be), references to the pod's
		// Secrets resolved as a kubelet does, and with a packages directory (a directory of
		// the kubelet's, as the workspace is) what sandboxd adds for it.
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		packagesDir := ""
		for _, e := range main.Env {
			if e.Name == "MANAGED_AGENT_SANDBOXD_PACKAGES_DIR" {
				packagesDir = filepath.Join(k.root, string(p.UID)+"-packages")
				if err := os.MkdirAll(packagesDir, 0o755); err != nil {
					return err
				}
			}
			if strings.HasPrefix(e.Name, "MANAGED_AGENT_") || e.Name == "HOME" || e.Name == "PATH" {
				continue
			}
			value := e.Value
			if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
				var from corev1.Secret
				if err := k.c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.SecretKeyRef.Name}, &from); err != nil {
					return err
				}
				v, ok := from.Data[ref.SecretKeyRef.Key]
				if !ok {
					return fmt.Errorf("pod %s: env %s: secret %s has no key %s (CreateContainerConfigError)", p.Name, e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
				}
				value = string(v)
			}
			env = append(env, e.Name+"="+value)
		}
		if packagesDir != "" {
			env = packages.UserEnv(env, packagesDir)
		}
		ws, err := workspace.New(dir, workspace.Config{Env: env, Timeout: 2 * time.Minute, MaxOutput: 1 << 20})
		if err != nil {
			return err
		}
		srv, err := sandboxd.New(sandboxd.Config{Sandbox: ws, Token: token})
		if err != nil {
			return err
		}
		k.mu.Lock()
		k.pods[p.UID] = &pod{token: token, dir: dir, srv: srv}
		k.byToken[token] = srv
		k.mu.Unlock()
	}
	now := metav1.Now()
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}, HostIP: "127.0.0.1", StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: main.Name, Image: main.Image, Ready: true, Started: ptrTrue(),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
	}
	return k.c.Status().Update(ctx, p)
}

func ptrTrue() *bool { t := true; return &t }
