// Package kubernetes is the kubernetes sandbox provider (MANAGED_AGENT_SANDBOX=kubernetes): a
// session's sandbox is a SandboxBinding named after the session, whose pod the
// SandboxBinding controller runs (controllers/sandboxbinding_controller.go); the provider
// waits for the binding to be Ready, reads the endpoint from its status and the token from
// its Secret, and talks to the pod's sandboxd over HTTP (sandboxd.Connect).
//
// A pod or binding deleted behind the worker's back is sandbox.ErrGone on the next Attach,
// never a silent replacement: the controller does not recreate pods, and this provider
// creates bindings only in Create. With a persistent workspace (a claim per binding) the idle
// sweep's Stop suspends a binding (its pod deleted, its claim kept) and the next Attach
// resumes it on a new pod with the workspace intact.
//
// It imports sandbox, sandboxd, api/v1alpha1 and the Kubernetes client; never store, turns,
// agent, durable or httpapi.
package kubernetes

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/egress"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/packages"
	"github.com/managed-agents/managed-agents/internal/sandboxd"
)

// Name is the provider name stored in every Ref this provider makes.
const Name = "kubernetes"

// Defaults of Config.
const (
	DefaultPort         = 8090
	DefaultReadyTimeout = 3 * time.Minute
	// DefaultAttachTimeout bounds how long Attach waits for a sandbox that exists but is not
	// ready (sandboxd restarting in its pod).
	DefaultAttachTimeout = 30 * time.Second
)

// Config configures a Provider.
type Config struct {
	// Client reaches the cluster; its scheme must hold v1alpha1 and core/v1. It should not
	// read through a cache: Create and Attach must see what the controller wrote last.
	Client client.Client
	// Namespace holds the bindings and their pods (MANAGED_AGENT_KUBERNETES_NAMESPACE).
	Namespace string
	// Image is the sandbox image of specs that name none (MANAGED_AGENT_KUBERNETES_IMAGE).
	Image string
	// Port is sandboxd's port in the pods (MANAGED_AGENT_KUBERNETES_SANDBOXD_PORT, default 8090).
	Port int32
	// RuntimeClassName, when set, runs every sandbox pod under it (gvisor, kata)
	// (MANAGED_AGENT_KUBERNETES_RUNTIME_CLASS).
	RuntimeClassName string
	// ServiceAccountName the pods run as (MANAGED_AGENT_KUBERNETES_SERVICE_ACCOUNT); its token
	// is never mounted.
	ServiceAccountName string
	// PersistentWorkspace gives every new sandbox a PersistentVolumeClaim for /workspace
	// instead of an emptyDir (MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE), of
	// WorkspaceStorageClass (MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS; empty: the
	// cluster's default). Only such sandboxes are suspended by Stop.
	PersistentWorkspace   bool
	WorkspaceStorageClass string
	// WorkspaceSize is the workspace size of sandboxes whose environment names no disk size
	// (MANAGED_AGENT_KUBERNETES_WORKSPACE_SIZE): the emptyDir's limit or the claim's request;
	// nil is the controller's default (10Gi).
	WorkspaceSize *resource.Quantity
	// ReadyTimeout bounds how long Create waits for a new sandbox to be Ready, and Attach for a
	// suspended one to be resumed on a new pod (default 3m); AttachTimeout how long Attach
	// waits for one that runs (default 30s).
	ReadyTimeout, AttachTimeout time.Duration
	// PackageTimeout bounds the install of a sandbox's packages (default 5m;
	// MANAGED_AGENT_KUBERNETES_PACKAGE_TIMEOUT).
	PackageTimeout time.Duration
	// PollInterval is how often a wait reads the binding (default 200ms).
	PollInterval time.Duration
	// HTTPClient talks to sandboxd; nil is a client without a total timeout (a command may
	// run for an hour; sandboxd bounds it).
	HTTPClient *http.Client
	// Provider is what new bindings name (MANAGED_AGENT_KUBERNETES_PROVIDER): "" or pod for
	// a sandbox pod, or a remote provider the controller creates the sandbox at.
	Provider string
	// Remote are the clients of remote providers, by name, that bindings naming one are
	// attached through (the controller uses the same clients to create and destroy).
	Remote map[string]sandbox.Provider
}

// Provider is the kubernetes sandbox provider.
type Provider struct {
	cfg Config
	// destroyed holds the UIDs of bindings this provider deleted: their clients answer
	// ErrGone at once, even while the pod is still terminating and sandboxd still answers.
	destroyed sync.Map
}

var _ sandbox.Provider = (*Provider)(nil)
var _ sandbox.Lister = (*Provider)(nil)
var _ sandbox.Stopper = (*Provider)(nil)

// New checks c and returns the provider.
func New(c Config) (*Provider, error) {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("kubernetes sandbox provider: no cluster client"))
	}
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_NAMESPACE=%q: must be a namespace name (%s)", c.Namespace, msgs[0]))
	}
	if c.Image == "" {
		errs = append(errs, errors.New("MANAGED_AGENT_KUBERNETES_IMAGE is not set: the sandbox image of environments that name none"))
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_SANDBOXD_PORT=%d: must be a port from 1 to 65535", c.Port))
	}
	if c.RuntimeClassName != "" {
		if msgs := validation.IsDNS1123Subdomain(c.RuntimeClassName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_RUNTIME_CLASS=%q: must be a RuntimeClass name (%s)", c.RuntimeClassName, msgs[0]))
		}
	}
	if c.WorkspaceStorageClass != "" {
		if msgs := validation.IsDNS1123Subdomain(c.WorkspaceStorageClass); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS=%q: must be a StorageClass name (%s)", c.WorkspaceStorageClass, msgs[0]))
		} else if !c.PersistentWorkspace {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS=%q: needs MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE=true (an emptyDir has no storage class)", c.WorkspaceStorageClass))
		}
	}
	if c.WorkspaceSize != nil && c.WorkspaceSize.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_KUBERNETES_WORKSPACE_SIZE=%s: must be a positive quantity such as 10Gi", c.WorkspaceSize.String()))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.Provider = cmp.Or(c.Provider, v1alpha1.ProviderPod)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, DefaultReadyTimeout)
	c.AttachTimeout = cmp.Or(c.AttachTimeout, DefaultAttachTimeout)
	c.PollInterval = cmp.Or(c.PollInterval, 200*time.Millisecond)
	c.PackageTimeout = cmp.Or(c.PackageTimeout, DefaultPackageTimeout)
	if c.HTTPClient == nil {
		// Straight to the pod: never through an HTTP_PROXY the worker has for the model's API
		// (the token and the commands would pass through it).
		c.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}}
	}
	return &Provider{cfg: c}, nil
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return Name }

// checkRef refuses references of other providers and names this provider never makes before
// the apiserver is asked.
func checkRef(ref sandbox.Ref) error {
	return sandbox.CheckRef(ref, Name, "kubernetes sandbox binding name")
}

// binding renders the SandboxBinding of spec.
func (p *Provider) binding(spec sandbox.Spec) *v1alpha1.SandboxBinding {
	b := &v1alpha1.SandboxBinding{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: p.cfg.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "managed-agents"}},
		Spec: v1alpha1.SandboxBindingSpec{
			SessionID:          spec.SessionID,
			Image:              cmp.Or(spec.Image, p.cfg.Image),
			Port:               p.cfg.Port,
			ServiceAccountName: p.cfg.ServiceAccountName,
			Provider:           p.cfg.Provider,
		},
	}
	if len(validation.IsValidLabelValue(spec.SessionID)) == 0 {
		b.Labels[v1alpha1.LabelSessionID] = spec.SessionID
	}
	if p.cfg.RuntimeClassName != "" {
		rc := p.cfg.RuntimeClassName
		b.Spec.RuntimeClassName = &rc
	}
	r := spec.Resources
	list := corev1.ResourceList{}
	if r.MilliCPU > 0 {
		list[corev1.ResourceCPU] = *resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI)
	}
	if r.MemoryBytes > 0 {
		list[corev1.ResourceMemory] = *resource.NewQuantity(r.MemoryBytes, resource.BinarySI)
	}
	if r.DiskBytes > 0 {
		q := *resource.NewQuantity(r.DiskBytes, resource.BinarySI)
		b.Spec.WorkspaceSize = &q
	} else if p.cfg.WorkspaceSize != nil {
		q := p.cfg.WorkspaceSize.DeepCopy()
		b.Spec.WorkspaceSize = &q
	}
	if len(spec.Packages) > 0 {
		// For a resumed pod, whose packages (in an emptyDir) went with the old one.
		if raw, err := json.Marshal(spec.Packages); err == nil {
			b.Annotations = map[string]string{v1alpha1.AnnotationPackages: string(raw)}
		}
	}
	if p.cfg.PersistentWorkspace && !b.Spec.IsRemote() {
		b.Spec.Workspace.Persistent = true
		if p.cfg.WorkspaceStorageClass != "" {
			sc := p.cfg.WorkspaceStorageClass
			b.Spec.Workspace.StorageClassName = &sc
		}
	}
	if len(list) > 0 {
		// Requests equal to limits: a sandbox gets what it is promised (Guaranteed QoS).
		b.Spec.Resources = corev1.ResourceRequirements{Limits: list, Requests: list.DeepCopy()}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		b.Spec.Env = append(b.Spec.Env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
	}
	switch spec.Egress.Mode {
	case sandbox.EgressFull:
		b.Spec.Network.Egress = v1alpha1.EgressFull
	case sandbox.EgressHosts:
		b.Spec.Network = v1alpha1.SandboxNetwork{Egress: v1alpha1.EgressHosts, Hosts: slices.Clone(spec.Egress.Hosts)}
	default:
		b.Spec.Network.Egress = v1alpha1.EgressNone
	}
	return b
}

// Create creates the binding of spec.Name, or adopts the one a lost attempt made, waits
// until its sandbox is Ready and installs spec's packages in it (packages.go; pods only). A
// sandbox that fails or is not Ready within ReadyTimeout is deleted again and the error wraps sandbox.ErrSetup (its reason: an image that cannot be
// pulled, no node to run on), so a failed Create leaves nothing to tear down.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Ref, error) {
	if spec.Name == "" {
		return sandbox.Ref{}, errors.New("kubernetes sandbox: the spec has no name (sandbox.NameFor)")
	}
	ref := sandbox.Ref{Provider: Name, ExternalID: spec.Name}
	if !sandbox.IsName(spec.Name) {
		return sandbox.Ref{}, fmt.Errorf("kubernetes sandbox name %q: not a name sandbox.NameFor makes", spec.Name)
	}
	// What could never work is refused before anything is made.
	if provider := p.cfg.Provider; len(spec.Packages) > 0 && v1alpha1.IsRemoteProvider(provider) {
		return sandbox.Ref{}, fmt.Errorf("kubernetes sandbox %s: %w: packages are installed only in sandbox pods, not at the remote provider %s; build them into its template", spec.Name, ErrPackages, provider)
	}
	if err := packages.Check(spec.Packages, packages.User); err != nil {
		return sandbox.Ref{}, fmt.Errorf("kubernetes sandbox %s: %w: %w", spec.Name, ErrPackages, err)
	}
	if spec.Egress.Mode == sandbox.EgressHosts {
		if err := egress.CheckPolicy(egress.Policy{Sandbox: spec.Name, Hosts: spec.Egress.Hosts}); err != nil {
			return sandbox.Ref{}, fmt.Errorf("kubernetes sandbox %s: %w: %w", spec.Name, sandbox.ErrSetup, err)
		}
	}
	parent := ctx
	ctx, cancel := context.WithTimeoutCause(ctx, p.cfg.ReadyTimeout, errNotReadyInTime)
	defer cancel()
	uid, err := p.ensureBinding(ctx, spec)
	if err != nil {
		return sandbox.Ref{}, err
	}
	// A lost attempt's binding may have been suspended since (an old worker's idle sweep).
	gen, _, err := p.resume(ctx, spec.Name)
	if err != nil {
		return sandbox.Ref{}, err
	}
	if _, err := p.waitReady(ctx, spec.Name, uid, gen); err != nil {
		if parent.Err() != nil {
			// The caller gave up (a worker shutting down, an activity's own deadline): keep
			// the binding for the retried acquisition to adopt.
			return sandbox.Ref{}, fmt.Errorf("kubernetes sandbox %s: %w", spec.Name, err)
		}
		if v1alpha1.IsRemoteProvider(p.cfg.Provider) && !errors.Is(err, errFailed) {
			// The controller is still creating it at the provider (a slow start, an outage it
			// retries through): not a setup failure. The binding stays for the retried
			// acquisition to adopt.
			return sandbox.Ref{}, fmt.Errorf("kubernetes sandbox %s at %s: %w: %w", spec.Name, p.cfg.Provider, sandbox.ErrUnavailable, err)
		}
		if errors.Is(err, errFailed) || errors.Is(context.Cause(ctx), errNotReadyInTime) {
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if derr := p.Destroy(cleanup, ref); derr != nil {
				return sandbox.Ref{}, fmt.Errorf("kubernetes sandbox %s: %w (and deleting it failed: %v)", spec.Name, err, derr)
			}
			return sandbox.Ref{}, fmt.Errorf("kubernetes sandbox %s: %w: %w", spec.Name, sandbox.ErrSetup, err)
		}
		return sandbox.Ref{}, fmt.Errorf("kubernetes sandbox %s: %w", spec.Name, err)
	}
	if len(spec.Packages) > 0 {
		if err := p.setUp(parent, ref, spec); err != nil {
			return sandbox.Ref{}, fmt.Errorf("kubernetes sandbox %s: %w", spec.Name, err)
		}
	}
	return ref, nil
}

// ensureBinding creates the binding or finds the one that exists, and returns its UID. One
// still being deleted (a destroyed sandbox of the same session) is waited out first.
func (p *Provider) ensureBinding(ctx context.Context, spec sandbox.Spec) (types.UID, error) {
	for {
		want := p.binding(spec)
		err := p.cfg.Client.Create(ctx, want)
		if err == nil {
			return want.UID, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create sandbox binding %s: %w", spec.Name, err)
		}
		var have v1alpha1.SandboxBinding
		err = p.cfg.Client.Get(ctx, client.ObjectKey{Namespace: p.cfg.Namespace, Name: spec.Name}, &have)
		switch {
		case apierrors.IsNotFound(err):
			continue // deleted in between: create again
		case err != nil:
			return "", fmt.Errorf("read sandbox binding %s: %w", spec.Name, err)
		case have.Spec.SessionID != spec.SessionID:
			return "", fmt.Errorf("sandbox binding %s belongs to session %s, not %s", spec.Name, have.Spec.SessionID, spec.SessionID)
		case cmp.Or(have.Spec.Provider, v1alpha1.ProviderPod) != want.Spec.Provider:
			// A deployment that switched MANAGED_AGENT_KUBERNETES_PROVIDER: the binding a lost
			// attempt made runs elsewhere than this worker would make it.
			return "", fmt.Errorf("sandbox binding %s names provider %s, but this worker makes %s sandboxes (MANAGED_AGENT_KUBERNETES_PROVIDER): %w",
				spec.Name, cmp.Or(have.Spec.Provider, v1alpha1.ProviderPod), want.Spec.Provider, sandbox.ErrSetup)
		case have.DeletionTimestamp == nil:
			return have.UID, nil
		}
		if err := p.sleep(ctx); err != nil {
			return "", fmt.Errorf("sandbox binding %s is still being deleted: %w", spec.Name, err)
		}
	}
}

func (p *Provider) sleep(ctx context.Context) error {
	t := time.NewTimer(p.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errNotReadyInTime is the cause of a Create's own ReadyTimeout, told apart from the
// caller's deadline.
var errNotReadyInTime = errors.New("not ready within the ready timeout (MANAGED_AGENT_KUBERNETES_READY_TIMEOUT)")

// errFailed marks a binding the controller says will never serve (Failed or Stopped).
var errFailed = errors.New("sandbox failed")

// goneReason says why b can no longer serve, "" if it may.
func goneReason(b *v1alpha1.SandboxBinding, uid types.UID) string {
	ready := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady)
	msg := ""
	if ready != nil {
		msg = ": " + ready.Message
	}
	switch {
	case uid != "" && b.UID != uid:
		return "the sandbox binding was replaced by another"
	case b.DeletionTimestamp != nil:
		return "the sandbox binding is being deleted"
	case b.Status.Phase == v1alpha1.SandboxFailed || b.Status.Phase == v1alpha1.SandboxStopped:
		return "the sandbox is " + b.Status.Phase + msg
	}
	return ""
}

// waitReady polls the binding until it is Ready with an endpoint, as observed by the
// controller at generation minGeneration or later (so a resumed binding's Ready is its new
// pod's, not a stale one): ErrGone if it is missing, errFailed if it can never be, the
// context's error (with the last reason) on timeout.
func (p *Provider) waitReady(ctx context.Context, name string, uid types.UID, minGeneration int64) (*v1alpha1.SandboxBinding, error) {
	last := "no status yet"
	for {
		var b v1alpha1.SandboxBinding
		err := p.cfg.Client.Get(ctx, client.ObjectKey{Namespace: p.cfg.Namespace, Name: name}, &b)
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("sandbox binding %s does not exist: %w", name, sandbox.ErrGone)
		case err != nil:
			// A read that failed (the apiserver busy, or the client's rate limiter refusing a
			// wait that would pass the deadline) is tried again until the wait's own deadline,
			// whose error then says why it ended.
			if last == "no status yet" { // else keep the controller's last word, which says more
				last = "reading it failed: " + err.Error()
			}
		case err == nil:
			if why := goneReason(&b, uid); why != "" {
				return nil, fmt.Errorf("sandbox binding %s: %s: %w", name, why, errFailed)
			}
			if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady); c != nil {
				if c.Status == metav1.ConditionTrue && b.Status.Endpoint != "" && c.ObservedGeneration >= minGeneration &&
					(b.Status.TokenSecret != "" || b.Spec.IsRemote() && b.Status.ExternalID != "") {
					return &b, nil
				}
				last = c.Reason + ": " + c.Message
			}
		}
		if err := p.sleep(ctx); err != nil {
			return nil, fmt.Errorf("sandbox binding %s not ready (%s): %w", name, last, err)
		}
	}
}

// Attach connects to the sandbox of an existing binding, resuming it first if it is
// suspended; sandbox.ErrGone if the binding is missing, being deleted or Failed (its pod or
// claim deleted behind our back). It never creates.
func (p *Provider) Attach(ctx context.Context, ref sandbox.Ref) (sandbox.Sandbox, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	gen, resuming, err := p.resume(ctx, ref.ExternalID)
	if err != nil {
		return nil, err
	}
	timeout := p.cfg.AttachTimeout
	if resuming {
		timeout = p.cfg.ReadyTimeout // a new pod: scheduling, the volume, the init container
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := p.waitReady(wait, ref.ExternalID, "", gen)
	if errors.Is(err, errFailed) {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrGone, err)
	}
	if err != nil {
		return nil, err
	}
	if _, gone := p.destroyed.Load(b.UID); gone {
		return nil, fmt.Errorf("sandbox binding %s was destroyed: %w", ref.ExternalID, sandbox.ErrGone)
	}
	if b.Spec.IsRemote() {
		return p.attachRemote(ctx, b)
	}
	var secret corev1.Secret
	if err := p.cfg.Client.Get(ctx, client.ObjectKey{Namespace: p.cfg.Namespace, Name: b.Status.TokenSecret}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the token secret %s of sandbox binding %s is missing: %w", b.Status.TokenSecret, ref.ExternalID, sandbox.ErrGone)
		}
		return nil, fmt.Errorf("read the token of sandbox binding %s: %w", ref.ExternalID, err)
	}
	sb, err := sandboxd.Connect(ctx, b.Status.Endpoint, string(secret.Data[v1alpha1.TokenSecretKey]), p.cfg.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("connect to sandbox %s at %s: %w", ref.ExternalID, b.Status.Endpoint, p.goneOr(ctx, ref.ExternalID, b.UID, err))
	}
	if raw := b.Annotations[v1alpha1.AnnotationPackages]; resuming && raw != "" {
		// A resumed pod has the workspace (the claim) but not the packages, which lived in
		// the old pod's emptyDir: install them again (the marker there is gone too).
		var pkgs map[string][]string
		if err := json.Unmarshal([]byte(raw), &pkgs); err != nil {
			return nil, fmt.Errorf("sandbox binding %s: the packages annotation: %w", ref.ExternalID, err)
		}
		if err := p.installPackages(ctx, sb, pkgs); err != nil {
			return nil, fmt.Errorf("reinstall the packages of resumed sandbox %s: %w", ref.ExternalID, err)
		}
	}
	bx := &box{inner: sb, p: p, name: ref.ExternalID, uid: b.UID}
	if fs, ok := sb.(sandbox.FileSearcher); ok {
		return &searchBox{box: bx, fs: fs}, nil
	}
	return bx, nil
}

// Stop implements sandbox.Stopper: a binding with a persistent workspace is suspended (the
// controller deletes its pod and keeps its claim); Attach resumes it. One whose workspace is
// an emptyDir is left running: deleting its pod would lose its files. One already suspended
// is left as is; one missing or Failed is ErrGone.
func (p *Provider) Stop(ctx context.Context, ref sandbox.Ref) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	var b v1alpha1.SandboxBinding
	if err := p.cfg.Client.Get(ctx, client.ObjectKey{Namespace: p.cfg.Namespace, Name: ref.ExternalID}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("suspend sandbox binding %s: it does not exist: %w", ref.ExternalID, sandbox.ErrGone)
		}
		return fmt.Errorf("suspend sandbox binding %s: %w", ref.ExternalID, err)
	}
	if why := goneReason(&b, ""); why != "" {
		return fmt.Errorf("suspend sandbox binding %s: %s: %w", ref.ExternalID, why, sandbox.ErrGone)
	}
	if b.Spec.IsRemote() {
		return p.stopRemote(ctx, &b)
	}
	if !b.Spec.Workspace.Persistent || b.Spec.Suspended {
		return nil
	}
	if err := p.setSuspended(ctx, &b, true); err != nil {
		return fmt.Errorf("suspend sandbox binding %s: %w", ref.ExternalID, err)
	}
	return nil
}

// resume unsuspends the binding if it is suspended. It returns the generation whose Ready
// the caller must wait for (0: any) and whether the binding is suspended or resuming, whose
// new pod takes as long as a new sandbox. A missing binding is left to waitReady to report.
func (p *Provider) resume(ctx context.Context, name string) (generation int64, resuming bool, err error) {
	var b v1alpha1.SandboxBinding
	if err := p.cfg.Client.Get(ctx, client.ObjectKey{Namespace: p.cfg.Namespace, Name: name}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("read sandbox binding %s: %w", name, err)
	}
	if b.DeletionTimestamp != nil {
		return 0, false, nil
	}
	if !b.Spec.Suspended {
		if b.Status.Phase == v1alpha1.SandboxSuspended {
			return b.Generation, true, nil // another acquisition resumed it a moment ago
		}
		return 0, false, nil
	}
	if err := p.setSuspended(ctx, &b, false); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("resume sandbox binding %s: %w", name, err)
	}
	return b.Generation, true, nil
}

// setSuspended patches spec.suspended of b, which holds the patched binding afterwards.
func (p *Provider) setSuspended(ctx context.Context, b *v1alpha1.SandboxBinding, suspended bool) error {
	patch := client.MergeFrom(b.DeepCopy())
	b.Spec.Suspended = suspended
	return p.cfg.Client.Patch(ctx, b, patch)
}

// Destroy deletes the binding; the controller's finalizer deletes its pod, Secret,
// NetworkPolicy and workspace claim. A binding already gone is not an error.
func (p *Provider) Destroy(ctx context.Context, ref sandbox.Ref) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	var b v1alpha1.SandboxBinding
	if err := p.cfg.Client.Get(ctx, client.ObjectKey{Namespace: p.cfg.Namespace, Name: ref.ExternalID}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("destroy sandbox binding %s: %w", ref.ExternalID, err)
	}
	p.destroyed.Store(b.UID, struct{}{})
	uid := b.UID
	if err := p.cfg.Client.Delete(ctx, &b, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("destroy sandbox binding %s: %w", ref.ExternalID, err)
	}
	return nil
}

// List returns the bindings in the namespace that this provider made (the orphan sweep).
// The namespace is the deployment's: bindings another deployment made there would be
// removed as orphans.
func (p *Provider) List(ctx context.Context) ([]sandbox.Resource, error) {
	var list v1alpha1.SandboxBindingList
	if err := p.cfg.Client.List(ctx, &list, client.InNamespace(p.cfg.Namespace),
		client.MatchingLabels{"app.kubernetes.io/managed-by": "managed-agents"}); err != nil {
		return nil, fmt.Errorf("list sandbox bindings: %w", err)
	}
	out := make([]sandbox.Resource, 0, len(list.Items))
	for _, b := range list.Items {
		if !sandbox.IsName(b.Name) || b.DeletionTimestamp != nil {
			continue
		}
		out = append(out, sandbox.Resource{Ref: sandbox.Ref{Provider: Name, ExternalID: b.Name}, SessionID: b.Spec.SessionID, Created: b.CreationTimestamp.Time})
	}
	return out, nil
}

// goneOr turns a transport failure into ErrGone when the binding says the sandbox is gone:
// sandboxd cannot tell a deleted pod from a restarting one, the binding can.
func (p *Provider) goneOr(ctx context.Context, name string, uid types.UID, err error) error {
	if _, gone := p.destroyed.Load(uid); gone {
		return fmt.Errorf("sandbox binding %s was destroyed: %w", name, sandbox.ErrGone)
	}
	if !errors.Is(err, sandbox.ErrUnavailable) {
		return err
	}
	check, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var b v1alpha1.SandboxBinding
	gerr := p.cfg.Client.Get(check, client.ObjectKey{Namespace: p.cfg.Namespace, Name: name}, &b)
	if apierrors.IsNotFound(gerr) {
		return fmt.Errorf("sandbox binding %s no longer exists (%w): %w", name, err, sandbox.ErrGone)
	}
	if gerr == nil {
		if why := goneReason(&b, uid); why != "" {
			return fmt.Errorf("sandbox binding %s: %s (%w): %w", name, why, err, sandbox.ErrGone)
		}
	}
	return err
}

// box is the sandboxd client of one binding, which reports ErrGone for a sandbox this
// provider destroyed or the binding says is gone.
type box struct {
	inner sandbox.Sandbox
	p     *Provider
	name  string
	uid   types.UID
}

func (b *box) guard() error {
	if _, gone := b.p.destroyed.Load(b.uid); gone {
		return fmt.Errorf("sandbox binding %s was destroyed: %w", b.name, sandbox.ErrGone)
	}
	return nil
}

func (b *box) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := b.guard(); err != nil {
		return sandbox.ExecResult{}, err
	}
	res, err := b.inner.Exec(ctx, req)
	if err != nil {
		err = b.p.goneOr(ctx, b.name, b.uid, err)
	}
	return res, err
}

func (b *box) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := b.guard(); err != nil {
		return nil, err
	}
	data, err := b.inner.ReadFile(ctx, path)
	if err != nil {
		return nil, b.p.goneOr(ctx, b.name, b.uid, err)
	}
	return data, nil
}

func (b *box) WriteFile(ctx context.Context, path string, data []byte) error {
	if err := b.guard(); err != nil {
		return err
	}
	if err := b.inner.WriteFile(ctx, path, data); err != nil {
		return b.p.goneOr(ctx, b.name, b.uid, err)
	}
	return nil
}

// searchBox is a box whose daemon offers the search capability.
type searchBox struct {
	*box
	fs sandbox.FileSearcher
}

func (b *searchBox) FindFiles(ctx context.Context, req sandbox.FindRequest) (sandbox.FindResult, error) {
	if err := b.guard(); err != nil {
		return sandbox.FindResult{}, err
	}
	res, err := b.fs.FindFiles(ctx, req)
	if err != nil {
		err = b.p.goneOr(ctx, b.name, b.uid, err)
	}
	return res, err
}

func (b *searchBox) GrepFiles(ctx context.Context, req sandbox.GrepRequest) (sandbox.GrepResult, error) {
	if err := b.guard(); err != nil {
		return sandbox.GrepResult{}, err
	}
	res, err := b.fs.GrepFiles(ctx, req)
	if err != nil {
		err = b.p.goneOr(ctx, b.name, b.uid, err)
	}
	return res, err
}
