//go:build integration

package charttest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The images `make postgres-image` and `make temporal-image` tag by default (POSTGRES_IMG,
// TEMPORAL_IMG): the chart's bundled PostgreSQL and Temporal dev server, built offline in
// place of postgres:15 and temporalio/temporal:1.5.1.
const (
	postgresRepository = "managed-agents-postgres"
	postgresTag        = "15"
	temporalRepository = "managed-agents-temporal"
	temporalTag        = "1.5.1"
)

// requireDocker skips without a docker CLI, except in CI, where the image tests must run.
func requireDocker(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no docker CLI: CI runs the image tests (the chart's PostgreSQL and Temporal images)")
		}
		t.Skip("no docker CLI on this machine: the chart's PostgreSQL and Temporal images are tested under docker")
	}
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	require.NoError(t, err, "docker %s:\n%s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// makeImage builds an image as a user does (`make <target>`, a no-op when it is current, as
// after make test's own build).
func makeImage(t *testing.T, target, variable, image string) {
	t.Helper()
	build := exec.Command("make", "--no-print-directory", target, variable+"="+image)
	build.Dir = repoRoot(t)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "make %s:\n%s", target, out)
}

// rendered is the chart's manifest, by kind and name.
type rendered map[string][]byte

func renderChart(t *testing.T, args ...string) rendered {
	t.Helper()
	out, err := helmTemplate(t, args...)
	require.NoError(t, err)
	objects := rendered{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		if meta.Kind != "" {
			objects[meta.Kind+"/"+meta.Metadata.Name] = []byte(doc)
		}
	}
	return objects
}

func (r rendered) get(t *testing.T, kind, name string, into any) {
	t.Helper()
	doc, ok := r[kind+"/"+name]
	require.True(t, ok, "the chart renders no %s %s", kind, name)
	require.NoError(t, yaml.Unmarshal(doc, into))
}

// runPod starts the pod's only container under docker as the kubelet would run it: the pod's
// user, group and fsGroup, the container's env (secretKeyRef read from the rendered Secret),
// command and args, read-only root, dropped capabilities, no privilege gain and memory limit,
// its ports published on loopback. A volume named in volumes (pod volume name → docker
// volume) is that docker volume; any other must be an emptyDir and becomes a tmpfs. It returns
// the container's id.
func runPod(t *testing.T, r rendered, pod corev1.PodSpec, volumes map[string]string) string {
	t.Helper()
	require.Len(t, pod.Containers, 1)
	require.Empty(t, pod.InitContainers)
	c := pod.Containers[0]
	psc, csc := pod.SecurityContext, c.SecurityContext
	require.NotNil(t, psc)
	require.NotNil(t, csc)

	uid, gid := psc.RunAsUser, psc.RunAsGroup
	if csc.RunAsUser != nil {
		uid = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		gid = csc.RunAsGroup
	}
	require.NotNil(t, uid, "the pod names its uid")
	require.NotNil(t, gid, "the pod names its gid")
	require.NotZero(t, *uid, "runAsNonRoot")
	args := []string{"run", "-d", "--user", fmt.Sprintf("%d:%d", *uid, *gid)}
	if psc.FSGroup != nil {
		args = append(args, "--group-add", strconv.FormatInt(*psc.FSGroup, 10))
	}
	if csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem {
		args = append(args, "--read-only")
	}
	if csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	if csc.Capabilities != nil {
		for _, capability := range csc.Capabilities.Drop {
			args = append(args, "--cap-drop", string(capability))
		}
		for _, capability := range csc.Capabilities.Add {
			args = append(args, "--cap-add", string(capability))
		}
	}
	if limit, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		args = append(args, "--memory", strconv.FormatInt(limit.Value(), 10))
	}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			require.NotNil(t, ref, "env %s: only secretKeyRef is supported here", e.Name)
			var secret corev1.Secret
			r.get(t, "Secret", ref.Name, &secret)
			data, ok := secret.Data[ref.Key]
			require.True(t, ok, "Secret %s has no key %s", ref.Name, ref.Key)
			value = string(data)
		}
		args = append(args, "--env", e.Name+"="+value)
	}
	for _, p := range c.Ports {
		args = append(args, "--publish", fmt.Sprintf("127.0.0.1::%d/%s", p.ContainerPort, strings.ToLower(string(p.Protocol))))
	}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		switch {
		case volumes[m.Name] != "":
			args = append(args, "--volume", volumes[m.Name]+":"+m.MountPath)
		case i >= 0 && pod.Volumes[i].EmptyDir != nil:
			// An emptyDir is an empty world-writable directory. (Docker copies the mode of a
			// directory the image has at the path onto the tmpfs; it stays root's.)
			args = append(args, "--mount", "type=tmpfs,destination="+m.MountPath+",tmpfs-mode=0777")
		default:
			t.Fatalf("volume %s (at %s): no emptyDir, and the test gave no docker volume for it", m.Name, m.MountPath)
		}
	}
	if len(c.Command) > 0 {
		require.Len(t, c.Command, 1, "docker --entrypoint takes one word")
		args = append(args, "--entrypoint", c.Command[0])
	}
	args = append(args, c.Image)
	args = append(args, c.Args...)
	id := docker(t, args...)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", "--tail", "60", id).CombinedOutput()
			t.Logf("logs of %s (%s):\n%s", c.Name, c.Image, out)
		}
		_ = exec.Command("docker", "rm", "-f", "-v", id).Run()
	})
	return id
}

// hostAddress is where the container's port is published on loopback.
func hostAddress(t *testing.T, id string, port int32) string {
	t.Helper()
	out := docker(t, "port", id, fmt.Sprintf("%d/tcp", port))
	addr := strings.Fields(out)[0]
	_, _, err := net.SplitHostPort(addr)
	require.NoError(t, err, "docker port: %q", out)
	return addr
}

// eventually retries check until it succeeds or timeout passes, failing with its last error.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitReady runs the container's readiness probe the way the kubelet does until it passes.
func waitReady(t *testing.T, id string, c corev1.Container, timeout time.Duration) {
	t.Helper()
	probe := c.ReadinessProbe
	require.NotNil(t, probe)
	eventually(t, timeout, "readiness probe of "+c.Name, func() error {
		if running := docker(t, "inspect", "--format", "{{.State.Running}}", id); running != "true" {
			t.Fatalf("%s exited before it was ready", c.Name)
		}
		switch {
		case probe.Exec != nil:
			out, err := exec.Command("docker", append([]string{"exec", id}, probe.Exec.Command...)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		case probe.TCPSocket != nil:
			port := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == probe.TCPSocket.Port.StrVal })
			require.GreaterOrEqual(t, port, 0, "probe port %s", probe.TCPSocket.Port.String())
			// The container's own address, as the kubelet dials the pod's: docker's proxy
			// behind a published port accepts before anything listens.
			ip := docker(t, "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id)
			addr := net.JoinHostPort(ip, strconv.Itoa(int(c.Ports[port].ContainerPort)))
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return err
			}
			return conn.Close()
		default:
			t.Fatalf("%s: a readiness probe of a kind the test does not run", c.Name)
			return nil
		}
	})
}

// stopAsKubelet sends SIGTERM (what the kubelet sends, whatever the image's STOPSIGNAL) and
// returns the exit status.
func stopAsKubelet(t *testing.T, id string, timeout time.Duration) string {
	t.Helper()
	docker(t, "kill", "--signal", "TERM", id)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "wait", id).CombinedOutput()
	require.NoError(t, err, "the container did not end within %s of SIGTERM: %s", timeout, out)
	return strings.TrimSpace(string(out))
}

func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestPostgresImage runs the image `make postgres-image` builds as the chart's PostgreSQL
// StatefulSet does (the official image's conventions: uid 999, POSTGRES_USER, _DB, _PASSWORD
// from the Secret, PGDATA a directory in the volume, read-only root with emptyDirs for the
// socket and /tmp) on a volume prepared as a fresh PersistentVolume with fsGroup, and checks
// what the API and the workers rely on: the chart's probe, password authentication over the
// network (and its refusal of a wrong password), the database, and a restart over the same
// data that keeps the data and does not initialise again.
func TestPostgresImage(t *testing.T) {
	requireDocker(t)
	image := postgresRepository + ":" + postgresTag
	makeImage(t, "postgres-image", "POSTGRES_IMG", image)
	const password = "chart-image-test-Pa55word"
	r := renderChart(t, "--set", "postgresql.image.repository="+postgresRepository,
		"--set-string", "postgresql.image.tag="+postgresTag, "--set", "postgresql.password="+password)
	var sts appsv1.StatefulSet
	r.get(t, "StatefulSet", "ma-managed-agents-postgresql", &sts)
	pod := sts.Spec.Template.Spec
	c := pod.Containers[0]
	require.Equal(t, image, c.Image, "the values name the image")
	require.Len(t, sts.Spec.VolumeClaimTemplates, 1, "persistence is on by default")
	user, database := envOf(c, "POSTGRES_USER"), envOf(c, "POSTGRES_DB")
	require.NotEmpty(t, user)
	require.NotEmpty(t, database)

	// A fresh PersistentVolume as the kubelet hands it over with fsGroup: root's, the group
	// fsGroup with setgid, lost+found in it (hence the chart's PGDATA one directory down).
	volume := docker(t, "volume", "create")
	t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", volume).Run() })
	require.NotNil(t, pod.SecurityContext.FSGroup)
	docker(t, "run", "--rm", "--network", "none", "--user", "0:0", "--volume", volume+":/pv", "--entrypoint", "/bin/sh",
		image, "-c", fmt.Sprintf("mkdir /pv/lost+found && chown 0:%d /pv && chmod 2775 /pv", *pod.SecurityContext.FSGroup))
	volumes := map[string]string{sts.Spec.VolumeClaimTemplates[0].Name: volume}

	connect := func(addr, password string) (*pgx.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: addr, Path: "/" + database,
			RawQuery: "sslmode=disable"}
		return pgx.Connect(ctx, u.String())
	}
	queryRow := func(conn *pgx.Conn, sql string, dest ...any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, conn.QueryRow(ctx, sql).Scan(dest...), sql)
	}

	id := runPod(t, r, pod, volumes)
	waitReady(t, id, c, 2*time.Minute)
	addr := hostAddress(t, id, 5432)

	// Connections reach the server through docker's port mapping, from outside loopback: the
	// network rule (scram-sha-256) applies, not initdb's trust for local ones.
	t.Run("a wrong password is refused", func(t *testing.T) {
		_, err := connect(addr, "not-"+password)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "want a server error, got %v", err)
		require.Equal(t, "28P01", pgErr.Code, "invalid_password: %v", pgErr)
	})
	conn, err := connect(addr, password)
	require.NoError(t, err, "connect with the chart's password")
	t.Run("the user, the database and the image's settings", func(t *testing.T) {
		var gotUser, gotDatabase, listen, collate string
		var scram bool
		queryRow(conn, "SELECT current_user, current_database(), current_setting('listen_addresses'), "+
			"(SELECT datcollate FROM pg_database WHERE datname = current_database())", &gotUser, &gotDatabase, &listen, &collate)
		require.Equal(t, user, gotUser)
		require.Equal(t, database, gotDatabase)
		require.Equal(t, "*", listen)
		require.Equal(t, "en_US.utf8", collate, "the official image's locale")
		queryRow(conn, "SELECT rolpassword LIKE 'SCRAM-SHA-256$%' FROM pg_authid WHERE rolname = current_user", &scram)
		require.True(t, scram, "the password is stored as a SCRAM verifier")
		var version int
		queryRow(conn, "SELECT current_setting('server_version_num')::int", &version)
		require.Equal(t, 15, version/10000)
	})
	t.Run("postgres is PID 1, running as the pod's user", func(t *testing.T) {
		require.Equal(t, "postgres", docker(t, "exec", id, "cat", "/proc/1/comm"))
		require.Contains(t, docker(t, "exec", id, "grep", "^Uid:", "/proc/1/status"), "\t999\t")
	})
	t.Run("PGDATA is a directory in the volume", func(t *testing.T) {
		require.Equal(t, "lost+found\npgdata", docker(t, "exec", id, "ls", "/var/lib/postgresql/data"))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('across restarts')")
	cancel()
	require.NoError(t, err)
	require.NoError(t, conn.Close(context.Background()))
	require.Equal(t, "0", stopAsKubelet(t, id, time.Minute), "a clean shutdown on SIGTERM")
	require.Contains(t, docker(t, "logs", id), "initialising a database cluster")

	// The pod again, on the same volume: the database is used as it is.
	id = runPod(t, r, pod, volumes)
	waitReady(t, id, c, 2*time.Minute)
	addr = hostAddress(t, id, 5432)
	conn, err = connect(addr, password)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var v string
	queryRow(conn, "SELECT v FROM kept", &v)
	require.Equal(t, "across restarts", v)
	logs := docker(t, "logs", id)
	require.Contains(t, logs, "holds a database")
	require.NotContains(t, logs, "initialising")
	_, err = connect(addr, "not-"+password)
	require.Error(t, err, "still a password after the restart")

	// docker stop sends the image's STOPSIGNAL (SIGINT, a fast shutdown): it does not wait for
	// the open connection to go, as SIGTERM's smart shutdown would.
	start := time.Now()
	docker(t, "stop", "--time", "30", id)
	require.Equal(t, "0", docker(t, "inspect", "--format", "{{.State.ExitCode}}", id))
	require.Less(t, time.Since(start), 20*time.Second, "docker stop with a client connected")
}

// TestTemporalImage runs the image `make temporal-image` builds as the chart's Temporal dev
// server Deployment does (its args, uid 1000, read-only root with emptyDirs for /data and
// /tmp), with a namespace of the chart's (temporal.namespace), and checks the frontend as a
// Temporal client sees it, the UI port, and that the SQLite file in /data keeps what the
// server stored across a container restart.
func TestTemporalImage(t *testing.T) {
	requireDocker(t)
	image := temporalRepository + ":" + temporalTag
	makeImage(t, "temporal-image", "TEMPORAL_IMG", image)
	const namespace = "chart-image-test"
	r := renderChart(t, "--set", "temporal.devServer.image.repository="+temporalRepository,
		"--set-string", "temporal.devServer.image.tag="+temporalTag, "--set", "temporal.namespace="+namespace)
	var deployment appsv1.Deployment
	r.get(t, "Deployment", "ma-managed-agents-temporal", &deployment)
	pod := deployment.Spec.Template.Spec
	c := pod.Containers[0]
	require.Equal(t, image, c.Image, "the values name the image")
	require.Contains(t, c.Args, "--db-filename=/data/temporal.db")

	dial := func(t *testing.T, addr string) client.Client {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tc, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: namespace,
			Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		require.NoError(t, err, "dial the frontend at %s", addr)
		t.Cleanup(tc.Close)
		return tc
	}
	describe := func(tc client.Client, name string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: name})
		return err
	}

	t.Run("as the chart runs it", func(t *testing.T) {
		id := runPod(t, r, pod, nil)
		waitReady(t, id, c, 2*time.Minute)
		tc := dial(t, hostAddress(t, id, 7233))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
		require.NoError(t, err)
		require.NoError(t, describe(tc, namespace), "the chart's --namespace")
		require.NoError(t, describe(tc, "default"))

		ui := "http://" + hostAddress(t, id, 8233) + "/"
		eventually(t, 30*time.Second, "the UI at "+ui, func() error {
			resp, err := http.Get(ui)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %s", resp.Status)
			}
			return nil
		})
		require.Equal(t, "0", stopAsKubelet(t, id, time.Minute))
	})

	t.Run("the data volume keeps the server's state across a container restart", func(t *testing.T) {
		volume := docker(t, "volume", "create")
		t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", volume).Run() })
		volumes := map[string]string{"data": volume}
		id := runPod(t, r, pod, volumes)
		waitReady(t, id, c, 2*time.Minute)
		tc := dial(t, hostAddress(t, id, 7233))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := tc.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: "kept", WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, "0", stopAsKubelet(t, id, time.Minute))

		id = runPod(t, r, pod, volumes)
		waitReady(t, id, c, 2*time.Minute)
		tc = dial(t, hostAddress(t, id, 7233))
		require.NoError(t, describe(tc, "kept"), "the namespace registered before the restart")
	})
}
