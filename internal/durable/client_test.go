package durable

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigCompressesUnlessLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		address, compression string
		want                 bool
	}{
		{"127.0.0.1:7233", "", false},
		{"[::1]:7233", "", false},
		{"localhost:7233", "", false},
		{"temporal-frontend.temporal:7233", "", true},
		{"10.0.0.7:7233", "", true},
		{"127.0.0.1:7233", "gzip", true},
		{"temporal:7233", "none", false},
		{"no port", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.address+"/"+tc.compression, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Config{Address: tc.address, Compression: tc.compression}.compress())
		})
	}
}
