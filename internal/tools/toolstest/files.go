package toolstest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

func runFiles(t *testing.T, newSandbox NewSandbox) {
	ctx := context.Background()

	t.Run("WriteCreatesParentsAndReadReturnsContent", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "a/b/c.txt", "hello\n")
		require.Equal(t, "hello\n", readFile(t, sb, "a/b/c.txt"))
		require.Equal(t, "hello\n", sh(t, sb, "cat a/b/c.txt"), "a command sees what WriteFile wrote")
		require.Equal(t, "hello\n", readFile(t, sb, "./a/../a/b/c.txt"), "paths are cleaned")
	})

	t.Run("WriteReplacesContent", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "f.txt", "a much longer first version")
		writeFile(t, sb, "f.txt", "short")
		require.Equal(t, "short", readFile(t, sb, "f.txt"))
		writeFile(t, sb, "empty.txt", "")
		require.Empty(t, readFile(t, sb, "empty.txt"))
	})

	t.Run("ReadSeesCommandOutput", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		sh(t, sb, "mkdir -p d && printf 'x\\ny' > d/f")
		require.Equal(t, "x\ny", readFile(t, sb, "d/f"))
	})

	t.Run("MissingFileIsErrNotExist", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		_, err := sb.ReadFile(ctx, "nope.txt")
		require.ErrorIs(t, err, sandbox.ErrNotExist)
		_, err = sb.ReadFile(ctx, "no/such/dir/f")
		require.ErrorIs(t, err, sandbox.ErrNotExist)
	})

	t.Run("DirectoriesAndSpecialFilesAreRefused", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		sh(t, sb, "mkdir d && mkfifo pipe")
		for _, p := range []string{"d", ".", "pipe"} {
			_, err := sb.ReadFile(ctx, p)
			require.Error(t, err, "read %q", p)
			require.NotErrorIs(t, err, sandbox.ErrOutsideWorkspace, "read %q", p)
		}
		// Neither call may block on the FIFO waiting for a peer.
		require.Error(t, sb.WriteFile(ctx, "pipe", []byte("x")))
		require.Error(t, sb.WriteFile(ctx, "d", []byte("x")))
		require.Error(t, sb.WriteFile(ctx, ".", []byte("x")))
	})

	t.Run("WriteUnderAFileFails", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "f", "x")
		require.Error(t, sb.WriteFile(ctx, "f/g", []byte("y")))
		require.Equal(t, "x", readFile(t, sb, "f"))
	})

	t.Run("SymlinkInsideWorkspaceIsFollowed", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "sub/real.txt", "real")
		sh(t, sb, "ln -s sub/real.txt link.txt && ln -s sub subdir")
		require.Equal(t, "real", readFile(t, sb, "link.txt"))
		require.Equal(t, "real", readFile(t, sb, "subdir/real.txt"))
		writeFile(t, sb, "link.txt", "through the link")
		require.Equal(t, "through the link", readFile(t, sb, "sub/real.txt"))
	})

	t.Run("BinaryContentRoundTrips", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		data := make([]byte, 256)
		for i := range data {
			data[i] = byte(i)
		}
		require.NoError(t, sb.WriteFile(ctx, "bin", data))
		got, err := sb.ReadFile(ctx, "bin")
		require.NoError(t, err)
		require.Equal(t, data, got)
		require.Equal(t, "256\n", strings.TrimLeft(sh(t, sb, "wc -c < bin"), " "))
	})
}

func runEscapes(t *testing.T, newSandbox NewSandbox) {
	ctx := context.Background()

	t.Run("LexicalEscapes", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		for _, p := range []string{"..", "../x", "a/../../x", "/etc/passwd", "/", "/tmp/x", "../../../../etc/passwd"} {
			_, err := sb.ReadFile(ctx, p)
			require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace, "read %q", p)
			require.ErrorIs(t, sb.WriteFile(ctx, p, []byte("x")), sandbox.ErrOutsideWorkspace, "write %q", p)
		}
	})

	t.Run("SymlinksLeavingTheWorkspace", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		sh(t, sb, "ln -s /etc etc_link && ln -s /etc/passwd passwd_link && ln -s .. up_link && mkdir d && ln -s ../.. d/up2")
		for _, p := range []string{"etc_link/passwd", "passwd_link", "up_link/x", "d/up2/etc/passwd"} {
			_, err := sb.ReadFile(ctx, p)
			require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace, "read %q", p)
		}
		name := fmt.Sprintf("conformance-%s", strings.TrimSpace(sh(t, sb, "echo $$-$RANDOM")))
		err := sb.WriteFile(ctx, "etc_link/"+name, []byte("x"))
		require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace)
		require.Equal(t, "absent\n", sh(t, sb, "test -e /etc/"+name+" && echo present || echo absent"))
	})

	t.Run("WriteThroughSymlinkToOutsideFile", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		outside := strings.TrimSpace(sh(t, sb, "d=$(mktemp -d /tmp/conformance-XXXXXX) && echo original > $d/target && ln -s $d/target link && ln -s $d dirlink && echo $d"))
		t.Cleanup(func() { _, _ = sb.Exec(ctx, sandbox.ExecRequest{Command: "rm -rf " + outside}) })
		require.ErrorIs(t, sb.WriteFile(ctx, "link", []byte("pwned")), sandbox.ErrOutsideWorkspace)
		require.ErrorIs(t, sb.WriteFile(ctx, "dirlink/new", []byte("pwned")), sandbox.ErrOutsideWorkspace)
		require.Equal(t, "original\n", sh(t, sb, "cat "+outside+"/target"))
		require.Equal(t, "absent\n", sh(t, sb, "test -e "+outside+"/new && echo present || echo absent"))
	})

	t.Run("FileReplacedBySymlinkBetweenCalls", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		writeFile(t, sb, "f.txt", "safe")
		writeFile(t, sb, "d/g.txt", "safe")
		require.Equal(t, "safe", readFile(t, sb, "f.txt"))
		require.Equal(t, "safe", readFile(t, sb, "d/g.txt"))
		// What was checked once is a symlink out of the workspace on the next call.
		sh(t, sb, "rm f.txt && ln -s /etc/passwd f.txt && rm -r d && ln -s /etc d")
		_, err := sb.ReadFile(ctx, "f.txt")
		require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace)
		_, err = sb.ReadFile(ctx, "d/passwd")
		require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace)
		name := fmt.Sprintf("conformance-%s", strings.TrimSpace(sh(t, sb, "echo $$-$RANDOM")))
		require.ErrorIs(t, sb.WriteFile(ctx, "d/"+name, []byte("x")), sandbox.ErrOutsideWorkspace)
		require.Equal(t, "absent\n", sh(t, sb, "test -e /etc/"+name+" && echo present || echo absent"))
	})

	t.Run("ExecDirIsConfined", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t)
		sh(t, sb, "ln -s /etc etc_link && touch plain")
		for _, dir := range []string{"..", "/etc", "etc_link"} {
			_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "pwd", Dir: dir})
			require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace, "dir %q", dir)
		}
		_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "pwd", Dir: "missing"})
		require.ErrorIs(t, err, sandbox.ErrNotExist)
		_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "pwd", Dir: "plain"})
		require.Error(t, err, "a file is not a working directory")
	})
}
