package sessions

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
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
	t.Run("the TTL is the cache's own", func(t *testing.T) {
		c := newKeyCache()
		c.ttl = time.Second
		c.store("secret", p, c.generation())
		_, ok := c.lookup("secret", time.Now().Add(2*time.Second))
		require.False(t, ok)
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

// A lost notice must not keep a key's streams open past the TTL: the watch fires when the
// key's confirmation by the database goes stale, and the key is then read again.
func TestKeyCacheWatchFiresWhenStale(t *testing.T) {
	const ttl = 100 * time.Millisecond
	// deadline bounds waiting for the timer on a loaded machine; it is not a measurement.
	const deadline = 10 * time.Second
	p := Principal{KeyID: "apikey_1", WorkspaceID: "wrkspc_1"}
	newCache := func() *KeyCache {
		c := newKeyCache()
		c.ttl = ttl
		return c
	}
	requireFires := func(t *testing.T, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(deadline):
			t.Fatal("the watch did not fire when the key went stale")
		}
	}

	t.Run("at the confirmation's TTL, and the key is read again", func(t *testing.T) {
		c := newCache()
		c.store("secret", p, c.generation())
		confirmed := time.Now()
		ch, cancel := c.Watch("apikey_1")
		defer cancel()
		_, ok := c.lookup("secret", time.Now())
		require.True(t, ok)
		requireFires(t, ch)
		require.GreaterOrEqual(t, time.Since(confirmed), ttl, "not before the confirmation is stale")
		_, ok = c.lookup("secret", time.Now())
		require.False(t, ok, "a stale key is read from the database")
	})
	t.Run("a newer confirmation moves the timer and spares the watchers", func(t *testing.T) {
		c := newCache()
		c.store("secret", p, c.generation())
		ch, cancel := c.Watch("apikey_1")
		defer cancel()
		time.Sleep(ttl / 2)
		c.store("secret", p, c.generation()) // a request read the key again
		reconfirmed := time.Now()
		requireFires(t, ch)
		require.GreaterOrEqual(t, time.Since(reconfirmed), ttl, "the watchers were told only when the newer confirmation went stale")
	})
	t.Run("a key without a confirmation is watched from now", func(t *testing.T) {
		c := newCache()
		ch, cancel := c.Watch("apikey_1")
		defer cancel()
		requireFires(t, ch)
	})
	t.Run("one timer per key, gone with its last watcher", func(t *testing.T) {
		c := newCache()
		_, cancel1 := c.Watch("apikey_1")
		_, cancel2 := c.Watch("apikey_1")
		c.mu.Lock()
		require.Len(t, c.stale, 1)
		c.mu.Unlock()
		cancel1()
		cancel2()
		c.mu.Lock()
		require.Empty(t, c.stale)
		c.mu.Unlock()
	})
	t.Run("a notice stops the timer; watching again arms a new one", func(t *testing.T) {
		c := newCache()
		ch, cancel := c.Watch("apikey_1")
		defer cancel()
		c.Notify(context.Background(), "apikey_1")
		requireClosed(t, ch)
		c.mu.Lock()
		require.Empty(t, c.stale)
		c.mu.Unlock()
		again, cancelAgain := c.Watch("apikey_1")
		defer cancelAgain()
		requireFires(t, again)
	})
}

// The streams of a key check it together when it goes stale: one read answers them all,
// a caller that leaves does not fail the others, and a caller after an invalidation
// reads for itself.
func TestKeyCacheFetchSharesReads(t *testing.T) {
	p := Principal{KeyID: "apikey_1", WorkspaceID: "wrkspc_1"}
	c := newKeyCache()
	var reads atomic.Int32
	release := make(chan struct{})
	read := func(ctx context.Context) (Principal, error) {
		reads.Add(1)
		select {
		case <-release:
			return p, nil
		case <-ctx.Done():
			return Principal{}, ctx.Err()
		}
	}

	gen := c.generation()
	gone, leave := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := c.fetch(gone, "secret", gen, read)
		left <- err
	}()
	require.Eventually(t, func() bool { return reads.Load() == 1 }, 10*time.Second, time.Millisecond)
	const waiters = 50
	var (
		wg      sync.WaitGroup
		entered atomic.Int32
	)
	got := make([]Principal, waiters)
	errs := make([]error, waiters)
	for i := range waiters {
		wg.Go(func() {
			entered.Add(1)
			got[i], errs[i] = c.fetch(context.Background(), "secret", gen, read)
		})
	}
	leave()
	require.ErrorIs(t, <-left, context.Canceled, "the caller that left stops waiting")
	require.Eventually(t, func() bool { return entered.Load() == waiters }, 10*time.Second, time.Millisecond)
	// From entered to joining the read is a few instructions; this leaves them time to run.
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	for i := range waiters {
		require.NoError(t, errs[i])
		require.Equal(t, p, got[i])
	}
	require.EqualValues(t, 1, reads.Load(), "one read for every caller of the key")

	// After an invalidation a caller never joins a read that started before it.
	blocked := make(chan struct{})
	c2 := newKeyCache()
	before := c2.generation()
	go func() {
		_, _ = c2.fetch(context.Background(), "secret", before, func(context.Context) (Principal, error) {
			<-blocked
			return p, nil
		})
	}()
	c2.Notify(context.Background(), "apikey_1")
	fresh := errors.New("revoked")
	_, err := c2.fetch(context.Background(), "secret", c2.generation(), func(context.Context) (Principal, error) { return Principal{}, fresh })
	require.ErrorIs(t, err, fresh)
	close(blocked)
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
