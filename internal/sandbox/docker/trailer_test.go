package docker

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCutTrailer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stderr string
		code   int
		rest   string
		ok     bool
	}{
		{name: "alone", stderr: "ma-exit 3\n", code: 3, ok: true},
		{name: "after other stderr", stderr: "size 12\nma-exit 94\n", code: 94, rest: "size 12\n", ok: true},
		{name: "without newline", stderr: "ma-exit 0", code: 0, ok: true},
		{name: "missing: the script was killed", stderr: "", rest: "", ok: false},
		{name: "not last", stderr: "ma-exit 0\nmore\n", rest: "ma-exit 0\nmore\n", ok: false},
		{name: "not a number", stderr: "ma-exit x\n", rest: "ma-exit x\n", ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, rest, ok := cutTrailer([]byte(tc.stderr))
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.code, code)
			require.Equal(t, tc.rest, string(rest))
		})
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	var buf bytes.Buffer
	w := &tailBuffer{buf: &buf}
	for range 3 * tailSize {
		_, err := w.Write([]byte("x"))
		require.NoError(t, err)
	}
	_, err := w.Write([]byte("\nma-exit 7\n"))
	require.NoError(t, err)
	require.LessOrEqual(t, buf.Len(), 2*tailSize)
	code, _, ok := cutTrailer(buf.Bytes())
	require.True(t, ok)
	require.Equal(t, 7, code)
}
