package workspace

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The escape check depends on capturing an unexported standard-library error; if a Go release
// changes how os.Root reports escapes, this fails first and says why.
func TestRootEscapeErrorIsRecognised(t *testing.T) {
	t.Parallel()
	require.NotNil(t, rootEscapeErr())
	root, err := os.OpenRoot(t.TempDir())
	require.NoError(t, err)
	defer root.Close()
	require.NoError(t, os.Symlink("/etc", root.Name()+"/out"))
	_, err = root.Open("out/passwd")
	require.True(t, isEscape(err), "%v", err)
	_, err = root.Open("missing")
	require.False(t, isEscape(err), "%v", err)
}
