package sessions

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestKeyHint(t *testing.T) {
	cases := []struct {
		name, key, want string
	}{
		{"configured key", "sk-ma-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef", "sk-ma-…cdef"},
		{"dev key", "sk-ma-dev-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef", "sk-ma-dev-…cdef"},
		{"anthropic-style key", "sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef", "sk-ant-…cdef"},
		{"short key shows no characters", "sk-test-abc", "sk-test-…"},
		{"uuid key shows no leading hex", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "…a427"},
		{"hex-looking words are not a prefix", "abcd-ef01-" + "0123456789abcdef0123456789", "abcd-…6789"},
		{"no prefix, short", "hunter2", "…"},
		{"no prefix, long", "abcdefghijklmnopqrstuvwxyz0123456789", "…6789"},
		{"empty", "", "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := KeyHint(tc.key)
			require.Equal(t, tc.want, got)
			if len(tc.key) > 0 {
				require.NotEqual(t, tc.key, got)
			}
		})
	}
}

func TestNewKeySecretIsRandom(t *testing.T) {
	a, b := NewKeySecret(), NewKeySecret()
	require.Equal(t, "sk-ma-…"+a[len(a)-4:], generatedHint(a), "a generated key's hint never shows its random part's head")
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, "sk-ma-"))
	require.Len(t, a, len("sk-ma-")+43, "256 bits in unpadded base64url")
}

func TestKeyCache(t *testing.T) {
	now := time.Now()
	p := Principal{KeyID: "apikey_1", WorkspaceID: "wrkspc_1", Hint: "sk-ma-…abcd"}

	t.Run("stores and finds by secret", func(t *testing.T) {
		c := newKeyCache()
		c.store("secret", p, c.generation())
		got, ok := c.lookup("secret", now)
		require.True(t, ok)
		require.Equal(t, p, got)
		_, ok = c.lookup("other", now)
		require.False(t, ok)
	})
	t.Run("a notice drops the key", func(t *testing.T) {
		c := newKeyCache()
		c.store("secret", p, c.generation())
		c.Notify(context.Background(), "apikey_1")
		_, ok := c.lookup("secret", now)
		require.False(t, ok)
	})
	t.Run("a notice for another key keeps it", func(t *testing.T) {
		c := newKeyCache()
		c.store("secret", p, c.generation())
		c.Notify(context.Background(), "apikey_2")
		_, ok := c.lookup("secret", now)
		require.True(t, ok)
	})
	t.Run("a lookup that raced a notice does not store what it read", func(t *testing.T) {
		c := newKeyCache()
		gen := c.generation()
		c.Notify(context.Background(), "apikey_1") // the revocation lands mid-lookup
		c.store("secret", p, gen)
		_, ok := c.lookup("secret", now)
		require.False(t, ok)
	})
	t.Run("a reconnect drops everything", func(t *testing.T) {
		c := newKeyCache()
		c.store("secret", p, c.generation())
		c.Connected(context.Background())
		_, ok := c.lookup("secret", now)
		require.False(t, ok)
	})
	t.Run("expired and stale entries are not used", func(t *testing.T) {
		c := newKeyCache()
		soon := now.Add(time.Second)
		expiring := p
		expiring.ExpiresAt = &soon
		c.store("secret", expiring, c.generation())
		_, ok := c.lookup("secret", now)
		require.True(t, ok)
		_, ok = c.lookup("secret", soon)
		require.False(t, ok, "an expired key is never served from the cache")
		c.store("other", p, c.generation())
		_, ok = c.lookup("other", now.Add(keyCacheTTL+time.Second))
		require.False(t, ok, "past the TTL the database is asked again")
	})
	t.Run("bounded", func(t *testing.T) {
		c := newKeyCache()
		for i := range keyCacheMax + 5 {
			c.store(strings.Repeat("k", i+1), p, c.generation())
		}
		require.LessOrEqual(t, len(c.entries), keyCacheMax)
	})
}

func TestKeyCacheWatch(t *testing.T) {
	c := newKeyCache()
	ch1, cancel1 := c.Watch("apikey_1")
	ch2, cancel2 := c.Watch("apikey_2")
	defer cancel2()
	c.Notify(context.Background(), "apikey_1")
	requireClosed(t, ch1)
	requireOpen(t, ch2)
	cancel1() // after the signal: no double close

	ch3, cancel3 := c.Watch("apikey_1")
	defer cancel3()
	c.Connected(context.Background())
	requireClosed(t, ch2)
	requireClosed(t, ch3)

	ch4, cancel4 := c.Watch("apikey_1")
	cancel4()
	c.Notify(context.Background(), "apikey_1")
	requireOpen(t, ch4)
}

func requireClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	default:
		t.Fatal("the watch did not fire")
	}
}

func requireOpen(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
		t.Fatal("the watch fired")
	default:
	}
}
