// Package runnertest builds the binary the docker sandbox's containers run (its runner), for
// tests: a test's own executable is a test binary, which cannot serve `sandboxd --stdio`.
// It builds the module's managed-agents command once per process, static, as `make build`
// does (the build cache makes every later build a link), into a directory under the
// system's temporary directory named by the binary's digest: test processes running side by
// side agree on the file, and only one copy per version of the code stays behind.
package runnertest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var built struct {
	once sync.Once
	path string
	err  error
}

// Path builds the runner once per process and returns its path.
func Path() (string, error) {
	built.once.Do(func() {
		built.path, built.err = build()
	})
	return built.path, built.err
}

func build() (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	dir := filepath.Join(os.TempDir(), "managed-agents-test-runner")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	_ = tmp.Close()
	defer func() { _ = os.Remove(tmp.Name()) }()
	cmd := exec.Command("go", "build", "-o", tmp.Name(), ".")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the docker sandbox runner: %w\n%s", err, out)
	}
	f, err := os.Open(tmp.Name())
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "managed-agents-"+hex.EncodeToString(h.Sum(nil))[:16])
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", fmt.Errorf("keep the docker sandbox runner: %w", err)
	}
	return bin, nil
}
