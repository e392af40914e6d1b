package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPoolConfigBoundsConnects(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  string
		want time.Duration
	}{
		{"no connect_timeout in the URL", "postgres://u:p@db.example:5432/x", DefaultConnectTimeout},
		{"the URL's connect_timeout wins", "postgres://u:p@db.example:5432/x?connect_timeout=3", 3 * time.Second},
		{"keyword form", "host=db.example user=u dbname=x connect_timeout=7", 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := poolConfig(tc.url)
			require.NoError(t, err)
			require.Equal(t, tc.want, cfg.ConnConfig.ConnectTimeout)
			require.NotNil(t, cfg.ConnConfig.DialFunc, "connections dial with keepalives")
		})
	}
	_, err := poolConfig("postgres://%zz")
	require.ErrorContains(t, err, "parse database url")
}
