package pgserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrBinariesNotFound is returned (wrapped) by FindBinaries and Start when no PostgreSQL
// server binaries are installed, so callers can add their own advice to the message.
var ErrBinariesNotFound = errors.New("PostgreSQL server binaries (initdb, postgres) not found")

// libRoot is where Debian and Ubuntu install the server binaries, one directory per major
// version; they are not on PATH there. A variable so tests can point it at an empty tree.
var libRoot = "/usr/lib/postgresql"

// requiredBinaries are the programs Start executes. pg_ctl is not needed: the server runs
// as a child process so that it dies with us (see startProcess).
var requiredBinaries = []string{"initdb", "postgres"}

// FindBinaries returns the directory holding initdb and postgres: the directory of initdb on
// PATH if postgres sits beside it, else the newest /usr/lib/postgresql/<version>/bin.
func FindBinaries() (dir string, err error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(p); hasBinaries(dir) {
			return dir, nil
		}
	}
	candidates, _ := filepath.Glob(filepath.Join(libRoot, "*", "bin"))
	// Newest first by numeric major version: "10" must sort above "9.6".
	slices.SortFunc(candidates, func(a, b string) int {
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	for _, dir := range candidates {
		if hasBinaries(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w: not on PATH and not under %s/*/bin; "+
		"install them with `apt-get install postgresql` (Debian/Ubuntu), "+
		"or set MANAGED_AGENT_DATABASE_URL to use an existing PostgreSQL server",
		ErrBinariesNotFound, libRoot)
}

func hasBinaries(dir string) bool {
	for _, name := range requiredBinaries {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// compareVersions orders dotted numeric versions; a non-numeric part sorts as 0.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}
