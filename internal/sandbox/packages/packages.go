// Package packages is the provider-independent part of installing an environment's
// packages (config.packages): which managers exist, what a package spec may look like, the
// commands that install them, and the tail of an installer's output that a failure reports.
// Providers decide where the commands run: docker as root in a build container whose result
// becomes an image (System), kubernetes as the sandbox's own non-root user into a directory
// of the pod (User).
//
// It imports only the standard library; never a provider, sandbox or Kubernetes package.
package packages

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/managed-agents/managed-agents/internal/pkgspec"
	"maps"
	"slices"
	"strings"
)

// Where installed packages go.
type Mode int

const (
	// System installs system-wide as root (docker's build container): /usr/local, the
	// system's site-packages, apt.
	System Mode = iota
	// User installs as the sandbox's own user into DirVar's directory (kubernetes pods run
	// non-root under the restricted profile): UserEnv points the managers and the commands
	// there. apt cannot work this way.
	User
)

// DirVar names, in a User-mode sandbox's command environment, the directory packages are
// installed into.
const DirVar = "MA_PACKAGES_DIR"

// TailMax bounds the installer output a failure reports.
const TailMax = 4 << 10

// systemCommands install one manager's packages, given as "$@" (never through a shell
// string, so a package spec cannot inject a command). Each takes the manager's own pinning
// syntax as is: apt pkg=1.2, cargo crate@1.2, gem name:1.2, go path@v1.2, npm pkg@1.2, pip
// pkg==1.2. Installed programs go where the session's PATH finds them.
var systemCommands = map[string]string{
	"apt": `export DEBIAN_FRONTEND=noninteractive
apt-get update && apt-get install -y --no-install-recommends "$@" && rm -rf /var/lib/apt/lists/*`,
	"cargo": `cargo install --root /usr/local "$@"`,
	"gem":   `gem install --no-document "$@"`,
	"go": `export GOBIN=/usr/local/bin GOPATH=/tmp/ma-gopath GOCACHE=/tmp/ma-gocache
for p in "$@"; do go install "$p" || exit; done; rm -rf /tmp/ma-gopath /tmp/ma-gocache`,
	"npm": `npm install -g "$@"`,
	"pip": `PIP_BREAK_SYSTEM_PACKAGES=1 pip install --no-cache-dir "$@"`,
}

// userCommands are systemCommands for User mode: UserEnv already points each manager's
// install location into $MA_PACKAGES_DIR; caches go to its .cache, never into the
// workspace (HOME) or the small /tmp, and are removed after.
var userCommands = map[string]string{
	"cargo": `export CARGO_HOME="$MA_PACKAGES_DIR/.cache/cargo" CARGO_TARGET_DIR="$MA_PACKAGES_DIR/.cache/cargo-target"
cargo install "$@"; s=$?; rm -rf "$MA_PACKAGES_DIR/.cache"; exit $s`,
	"gem": `gem install --no-document "$@"`,
	"go": `export GOPATH="$MA_PACKAGES_DIR/.cache/gopath" GOCACHE="$MA_PACKAGES_DIR/.cache/gocache"
for p in "$@"; do go install "$p" || { s=$?; chmod -R u+w "$MA_PACKAGES_DIR/.cache"; rm -rf "$MA_PACKAGES_DIR/.cache"; exit $s; }; done
chmod -R u+w "$MA_PACKAGES_DIR/.cache"; rm -rf "$MA_PACKAGES_DIR/.cache"`,
	"npm": `export NPM_CONFIG_CACHE="$MA_PACKAGES_DIR/.cache/npm"
npm install -g "$@"; s=$?; rm -rf "$MA_PACKAGES_DIR/.cache"; exit $s`,
	"pip": `PIP_BREAK_SYSTEM_PACKAGES=1 pip install --user --no-cache-dir "$@"`,
}

// binaries are the programs a manager's command needs in the image.
var binaries = map[string]string{"apt": "apt-get", "cargo": "cargo", "gem": "gem", "go": "go", "npm": "npm", "pip": "pip"}

// installScript runs one manager: $1 is the manager, $2 its command, $3 the program it
// needs, the rest its packages.
const installScript = `m=$1 cmd=$2 bin=$3; shift 3
echo "ma-install: $m $*"
command -v "$bin" >/dev/null 2>&1 || { echo "ma-install: $bin is not installed in the sandbox image, so $m packages cannot be installed"; exit 127; }
eval "$cmd"`

// Check refuses what no manager could be given safely: an unknown manager, or a package
// spec pkgspec refuses (the API refused it already; this guards every other way in). In User mode it also refuses managers that need root (apt).
func Check(packages map[string][]string, mode Mode) error {
	for _, m := range Managers(packages) {
		if _, ok := systemCommands[m]; !ok {
			return fmt.Errorf("unknown package manager %q (one of apt, cargo, gem, go, npm, pip)", m)
		}
		if _, ok := userCommands[m]; mode == User && !ok {
			return fmt.Errorf("%s packages need root, which this sandbox never gets (it runs as a non-root user): build them into the sandbox image", m)
		}
		for _, pkg := range packages[m] {
			if err := pkgspec.Check(pkg); err != nil {
				return fmt.Errorf("%s package %q: %w", m, pkg, err)
			}
		}
	}
	return nil
}

// Managers are the managers of packages in the order they install: alphabetical.
func Managers(packages map[string][]string) []string { return slices.Sorted(maps.Keys(packages)) }

// Key is a stable hash of the package lists: what decides what an install puts in place.
func Key(packages map[string][]string) string {
	h := sha256.New()
	for _, m := range Managers(packages) {
		fmt.Fprintf(h, "packages %q %q\n", m, packages[m])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Command is the argv that installs manager's pkgs in mode (Check them first). It runs
// under any POSIX sh and prints what it installs, then the installer's output.
func Command(mode Mode, manager string, pkgs []string) []string {
	cmd := systemCommands[manager]
	if mode == User {
		cmd = userCommands[manager]
	}
	return append([]string{"sh", "-c", installScript, "ma-install", manager, cmd, binaries[manager]}, pkgs...)
}

// ShellQuote quotes argv for a bash -c command line (providers whose exec takes a string).
func ShellQuote(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}

// UserEnv returns environ (NAME=value entries) with what User mode needs for packages in
// dir: each manager's install location there (over the image's: its root filesystem is
// read-only), and the programs and libraries found by every command: PATH, NODE_PATH and
// GEM_PATH put dir's first and keep what the image had.
func UserEnv(environ []string, dir string) []string {
	vars := map[string]string{
		DirVar:               dir,
		"PYTHONUSERBASE":     dir,
		"NPM_CONFIG_PREFIX":  dir,
		"GEM_HOME":           dir + "/gem",
		"CARGO_INSTALL_ROOT": dir,
		"GOBIN":              dir + "/bin",
		"PATH":               dir + "/bin:" + dir + "/gem/bin",
		"NODE_PATH":          dir + "/lib/node_modules",
		"GEM_PATH":           dir + "/gem",
	}
	had := map[string]string{}
	out := make([]string, 0, len(environ)+len(vars))
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if _, ours := vars[name]; ours {
			had[name] = value
			continue
		}
		out = append(out, kv)
	}
	had["PATH"] = cmp.Or(had["PATH"], "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	// Gems the image installed (ruby images: GEM_HOME=/usr/local/bundle) stay found.
	had["GEM_PATH"] = cmp.Or(had["GEM_PATH"], had["GEM_HOME"])
	for _, k := range []string{"PATH", "NODE_PATH", "GEM_PATH"} {
		if had[k] != "" {
			vars[k] += ":" + had[k]
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, k+"="+vars[k])
	}
	return out
}

// Tail keeps the last TailMax bytes written to it, cut at a line start when it can be:
// what a failed install printed last is what says why.
type Tail struct {
	buf bytes.Buffer
	cut bool
}

func (t *Tail) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if t.buf.Len() > 2*TailMax {
		t.buf.Next(t.buf.Len() - TailMax)
		t.cut = true
	}
	return len(p), nil
}

func (t *Tail) String() string {
	b := t.buf.Bytes()
	if len(b) > TailMax {
		b, t.cut = b[len(b)-TailMax:], true
	}
	if t.cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
		return "[...]\n" + strings.TrimRight(string(b), "\n")
	}
	return strings.TrimRight(string(b), "\n")
}
