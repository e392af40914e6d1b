//go:build integration

package credentials

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/secretbox"
	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestMain(m *testing.M) { pgtest.MainVerifyNoLeaks(m) }

func testKeys(t *testing.T, spec string) *secretbox.Keyring {
	t.Helper()
	kr, err := secretbox.Parse(spec)
	require.NoError(t, err)
	return kr
}

var keyA = "a:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
var keyB = "b:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))

// fixture is a migrated database with a workspace, an agent, an environment and a service
// that seals with keys.
type fixture struct {
	t     *testing.T
	st    *store.Store
	svc   *sessions.Service
	keys  *secretbox.Keyring
	ws    string
	agent string
	env   string
}

func newFixture(t *testing.T, spec string) *fixture {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	st, err := store.Open(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Migrate(ctx, logger))
	keys := testKeys(t, spec)
	svc := sessions.New(st, store.NewNotifier(), logger, sessions.WithVaultKeys(keys))
	ws, err := st.EnsureAPIKey(ctx, store.NewAPIKey{Secret: "sk-test-" + t.Name()}, "test")
	require.NoError(t, err)
	a, err := svc.CreateAgent(ctx, ws, wire.AgentCreateParams{Name: "a", Model: &wire.ModelParam{ID: "claude-sonnet-4-5"}})
	require.NoError(t, err)
	e, err := svc.CreateEnvironment(ctx, ws, wire.EnvironmentCreateParams{Name: "e"})
	require.NoError(t, err)
	return &fixture{t: t, st: st, svc: svc, keys: keys, ws: ws, agent: a.ID, env: e.ID}
}

func (f *fixture) vault(name string) string {
	f.t.Helper()
	v, err := f.svc.CreateVault(context.Background(), f.ws, wire.VaultCreateParams{DisplayName: name})
	require.NoError(f.t, err)
	return v.ID
}

func (f *fixture) credential(vaultID, authJSON string) wire.Credential {
	f.t.Helper()
	var p wire.CredentialCreateParams
	require.NoError(f.t, wire.DecodeStrict([]byte(`{"auth":`+authJSON+`}`), &p))
	c, err := f.svc.CreateCredential(context.Background(), f.ws, vaultID, p)
	require.NoError(f.t, err)
	return c
}

func (f *fixture) session(vaultIDs ...string) string {
	f.t.Helper()
	agent, _ := json.Marshal(f.agent)
	s, err := f.svc.CreateSession(context.Background(), f.ws, wire.SessionCreateParams{Agent: agent, EnvironmentID: f.env, VaultIDs: vaultIDs})
	require.NoError(f.t, err)
	return s.ID
}

func (f *fixture) resolver(now func() time.Time) *Resolver {
	return New(f.st, f.keys, Options{Now: now, HTTPClient: &http.Client{Timeout: 5 * time.Second}})
}

// rawSealed reads a credential's row as stored.
func (f *fixture) credentialAuth(t *testing.T, id string) json.RawMessage {
	t.Helper()
	var auth json.RawMessage
	require.NoError(t, f.st.Pool().QueryRow(context.Background(), `SELECT auth FROM vault_credentials WHERE id = $1`, id).Scan(&auth))
	return auth
}

func (f *fixture) rawRow(id string) string {
	f.t.Helper()
	var auth, sealed []byte
	err := f.st.Pool().QueryRow(context.Background(), `SELECT auth::text, sealed FROM vault_credentials WHERE id = $1`, id).Scan(&auth, &sealed)
	require.NoError(f.t, err)
	return string(auth) + string(sealed)
}

func TestStaticBearerResolvesFirstVaultInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, keyA)
	ctx := context.Background()
	v1, v2, v3 := f.vault("one"), f.vault("two"), f.vault("three")
	f.credential(v1, `{"type":"static_bearer","mcp_server_url":"https://other.example.com/mcp","token":"tok-other"}`)
	c2 := f.credential(v2, `{"type":"static_bearer","mcp_server_url":"https://MCP.example.com:443/mcp/","token":"tok-two"}`)
	c3 := f.credential(v3, `{"type":"static_bearer","mcp_server_url":"https://mcp.example.com/mcp","token":"tok-three"}`)
	r := f.resolver(nil)

	sess := f.session(v1, v2, v3)
	tok, err := r.MCPToken(ctx, sess, "https://mcp.example.com/mcp#x")
	require.NoError(t, err)
	require.Equal(t, Token{Value: "tok-two", CredentialID: c2.ID, VaultID: v2}, tok)

	// vault_ids order decides.
	tok, err = r.MCPToken(ctx, f.session(v3, v2), "https://mcp.example.com/mcp")
	require.NoError(t, err)
	require.Equal(t, c3.ID, tok.CredentialID)

	// An archived credential, then an archived vault, is skipped.
	_, err = f.svc.ArchiveCredential(ctx, f.ws, v2, c2.ID)
	require.NoError(t, err)
	tok, err = r.MCPToken(ctx, sess, "https://mcp.example.com/mcp")
	require.NoError(t, err)
	require.Equal(t, "tok-three", tok.Value)
	_, err = f.svc.ArchiveVault(ctx, f.ws, v3)
	require.NoError(t, err)
	_, err = r.MCPToken(ctx, sess, "https://mcp.example.com/mcp")
	require.ErrorIs(t, err, ErrNoCredential)

	// No vaults, or another server: no credential.
	_, err = r.MCPToken(ctx, f.session(), "https://mcp.example.com/mcp")
	require.ErrorIs(t, err, ErrNoCredential)
	_, err = r.MCPToken(ctx, sess, "https://nowhere.example.com/mcp")
	require.ErrorIs(t, err, ErrNoCredential)

	// A static token cannot be refreshed.
	_, err = r.RefreshMCPToken(ctx, f.session(v1), tokCredential(t, r, f.session(v1), "https://other.example.com/mcp"))
	require.ErrorIs(t, err, ErrNotRefreshable)

	// An environment variable credential is never an MCP token.
	v4 := f.vault("env")
	f.credential(v4, `{"type":"environment_variable","secret_name":"API_KEY","secret_value":"sv","networking":{"type":"unrestricted"}}`)
	_, err = r.MCPToken(ctx, f.session(v4), "https://mcp.example.com/mcp")
	require.ErrorIs(t, err, ErrNoCredential)
}

func tokCredential(t *testing.T, r *Resolver, sess, u string) string {
	t.Helper()
	tok, err := r.MCPToken(context.Background(), sess, u)
	require.NoError(t, err)
	return tok.CredentialID
}

// tokenServer is an OAuth token endpoint on 127.0.0.1 that hands out numbered tokens.
type tokenServer struct {
	*httptest.Server
	calls atomic.Int32
	mu    sync.Mutex
	forms []url.Values
	auths []string
	// refuse answers 400 invalid_grant.
	refuse atomic.Bool
	delay  time.Duration
}

func newTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := ts.calls.Add(1)
		require.Equal(t, http.MethodPost, r.Method)
		require.Equal(t, "application/x-www-form-urlencoded", r.Header.Get("Content-Type"))
		body, _ := io.ReadAll(r.Body)
		form, err := url.ParseQuery(string(body))
		require.NoError(t, err)
		ts.mu.Lock()
		ts.forms = append(ts.forms, form)
		ts.auths = append(ts.auths, r.Header.Get("Authorization"))
		ts.mu.Unlock()
		time.Sleep(ts.delay)
		w.Header().Set("Content-Type", "application/json")
		if ts.refuse.Load() {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"refresh token revoked"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "fresh-" + string(rune('0'+n)), "token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt-" + string(rune('0'+n))})
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) last() (url.Values, string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.forms[len(ts.forms)-1], ts.auths[len(ts.auths)-1]
}

func TestExpiredOAuthTokenIsRefreshedOnceAndStoredSealed(t *testing.T) {
	t.Parallel()
	for _, style := range []string{"none", "client_secret_basic", "client_secret_post"} {
		t.Run(style, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, keyA)
			ctx := context.Background()
			ts := newTokenServer(t)
			v := f.vault("oauth")
			secret := ""
			if style != "none" {
				secret = `,"client_secret":"c&s=cret"`
			}
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			c := f.credential(v, `{"type":"mcp_oauth","mcp_server_url":"https://mcp.example.com/","access_token":"old-access",
				"expires_at":"`+now.Add(10*time.Second).Format(time.RFC3339)+`",
				"refresh":{"client_id":"client:1","refresh_token":"rt-0","token_endpoint":"`+ts.URL+`/token",
				"token_endpoint_auth":{"type":"`+style+`"`+secret+`},"resource":"https://mcp.example.com","scope":"read write"}}`)
			sess := f.session(v)
			r := f.resolver(func() time.Time { return now })

			// Expiring within 30 s: refreshed.
			tok, err := r.MCPToken(ctx, sess, "https://mcp.example.com")
			require.NoError(t, err)
			require.Equal(t, Token{Value: "fresh-1", CredentialID: c.ID, VaultID: v, Refreshable: true}, tok)
			require.EqualValues(t, 1, ts.calls.Load())
			form, authz := ts.last()
			require.Equal(t, "refresh_token", form.Get("grant_type"))
			require.Equal(t, "rt-0", form.Get("refresh_token"))
			require.Equal(t, "client:1", form.Get("client_id"))
			require.Equal(t, "https://mcp.example.com", form.Get("resource"))
			require.Equal(t, "read write", form.Get("scope"))
			switch style {
			case "none":
				require.Empty(t, authz)
				require.False(t, form.Has("client_secret"))
			case "client_secret_basic":
				require.False(t, form.Has("client_secret"))
				// RFC 6749 §2.3.1: both parts form-encoded before Basic.
				require.Equal(t, "Basic "+base64.StdEncoding.EncodeToString([]byte("client%3A1:c%26s%3Dcret")), authz)
			case "client_secret_post":
				require.Empty(t, authz)
				require.Equal(t, "c&s=cret", form.Get("client_secret"))
			}

			// Stored sealed: the new token, refresh token and client secret are not in the row.
			row := f.rawRow(c.ID)
			for _, plain := range []string{"fresh-1", "rt-1", "old-access", "c&s=cret"} {
				require.NotContains(t, row, plain)
			}
			got, err := f.svc.GetCredential(ctx, f.ws, v, c.ID)
			require.NoError(t, err)
			require.Equal(t, now.Add(time.Hour), time.Time(*got.Auth.ExpiresAt))

			// A second resolve does not call the endpoint again.
			tok, err = r.MCPToken(ctx, sess, "https://mcp.example.com/")
			require.NoError(t, err)
			require.Equal(t, "fresh-1", tok.Value)
			require.EqualValues(t, 1, ts.calls.Load())

			// A forced refresh (after a 401) does, with the rotated refresh token.
			tok, err = r.RefreshMCPToken(ctx, sess, c.ID)
			require.NoError(t, err)
			require.Equal(t, "fresh-2", tok.Value)
			form, _ = ts.last()
			require.Equal(t, "rt-1", form.Get("refresh_token"))

			// A worker refused with the token it held before that refresh gets the stored one:
			// someone else refreshed meanwhile, so the endpoint is not called again.
			before := ts.calls.Load()
			tok, err = r.ReplaceRefusedMCPToken(ctx, sess, c.ID, "fresh-1")
			require.NoError(t, err)
			require.Equal(t, "fresh-2", tok.Value)
			require.Equal(t, before, ts.calls.Load())

			// A refused refresh is a RefreshError, and the stored token stays.
			ts.refuse.Store(true)
			_, err = r.RefreshMCPToken(ctx, sess, c.ID)
			var rerr *RefreshError
			require.ErrorAs(t, err, &rerr)
			require.Equal(t, http.StatusBadRequest, rerr.Status)
			require.Equal(t, "invalid_grant", rerr.Code)
			require.NotContains(t, err.Error(), "rt-2")
			tok, err = r.MCPToken(ctx, sess, "https://mcp.example.com")
			require.NoError(t, err)
			require.Equal(t, "fresh-2", tok.Value)
		})
	}
}

func TestConcurrentResolvesRefreshOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, keyA)
	ctx := context.Background()
	ts := newTokenServer(t)
	ts.delay = 100 * time.Millisecond
	v := f.vault("oauth")
	f.credential(v, `{"type":"mcp_oauth","mcp_server_url":"https://mcp.example.com","access_token":"old","expires_at":"2020-01-01T00:00:00Z",
		"refresh":{"client_id":"c","refresh_token":"rt-0","token_endpoint":"`+ts.URL+`","token_endpoint_auth":{"type":"none"}}}`)
	sess := f.session(v)
	// Two resolvers: two workers.
	r1, r2 := f.resolver(nil), f.resolver(nil)
	var wg sync.WaitGroup
	toks := make([]Token, 6)
	errs := make([]error, 6)
	for i := range toks {
		r := r1
		if i%2 == 1 {
			r = r2
		}
		wg.Go(func() { toks[i], errs[i] = r.MCPToken(ctx, sess, "https://mcp.example.com") })
	}
	wg.Wait()
	for i := range toks {
		require.NoError(t, errs[i])
		require.Equal(t, "fresh-1", toks[i].Value)
	}
	require.EqualValues(t, 1, ts.calls.Load())
}

func TestRefreshFailuresAreTyped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, keyA)
	ctx := context.Background()
	// An endpoint that does not answer in time.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	// An endpoint answering without an access token.
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"token_type":"Bearer"}`))
	}))
	t.Cleanup(empty.Close)
	for _, ep := range []string{slow.URL, empty.URL, "http://127.0.0.1:1/token"} {
		v := f.vault("v")
		f.credential(v, `{"type":"mcp_oauth","mcp_server_url":"https://mcp.example.com","access_token":"old","expires_at":"2020-01-01T00:00:00Z",
			"refresh":{"client_id":"c","refresh_token":"rt-secret","token_endpoint":"`+ep+`","token_endpoint_auth":{"type":"none"}}}`)
		r := New(f.st, f.keys, Options{HTTPClient: &http.Client{Timeout: 300 * time.Millisecond}})
		_, err := r.MCPToken(ctx, f.session(v), "https://mcp.example.com")
		var rerr *RefreshError
		require.ErrorAs(t, err, &rerr, ep)
		require.NotContains(t, err.Error(), "rt-secret")
	}
}

// TestTokenEndpointRedirectsAndOddAnswers: a redirect is not followed (the form carries the
// refresh token), a huge expires_in is clamped instead of overflowing into the past, a URL
// with user information matches no credential and is never quoted.
func TestTokenEndpointRedirectsAndOddAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, keyA)
	ctx := context.Background()
	var stolen atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { stolen.Add(1) }))
	t.Cleanup(elsewhere.Close)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/token", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	forever := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"access_token":"fresh","expires_in":1e300}`))
	}))
	t.Cleanup(forever.Close)
	oauth := func(ep string) string {
		return `{"type":"mcp_oauth","mcp_server_url":"https://mcp.example.com","access_token":"old","expires_at":"2020-01-01T00:00:00Z",
			"refresh":{"client_id":"c","refresh_token":"rt-secret","token_endpoint":"` + ep + `","token_endpoint_auth":{"type":"none"}}}`
	}

	v := f.vault("redirect")
	f.credential(v, oauth(redirecting.URL+"/token?key=query-secret"))
	_, err := New(f.st, f.keys, Options{}).MCPToken(ctx, f.session(v), "https://mcp.example.com")
	var rerr *RefreshError
	require.ErrorAs(t, err, &rerr)
	require.Equal(t, http.StatusTemporaryRedirect, rerr.Status)
	require.Zero(t, stolen.Load(), "the refresh token never follows a redirect")
	require.NotContains(t, err.Error(), "query-secret")

	v = f.vault("forever")
	f.credential(v, oauth(forever.URL))
	r := New(f.st, f.keys, Options{})
	tok, err := r.MCPToken(ctx, f.session(v), "https://mcp.example.com")
	require.NoError(t, err)
	require.Equal(t, "fresh", tok.Value)
	var auth struct {
		ExpiresAt time.Time `json:"expires_at"`
	}
	require.NoError(t, json.Unmarshal(f.credentialAuth(t, tok.CredentialID), &auth))
	require.True(t, auth.ExpiresAt.After(time.Now().Add(300*24*time.Hour)), "clamped to about a year, not overflowed: %v", auth.ExpiresAt)

	_, err = r.MCPToken(ctx, f.session(v), "https://alice:pw-secret@mcp.example.com")
	require.ErrorIs(t, err, ErrNoCredential)
	require.NotContains(t, err.Error(), "pw-secret")
}

// TestCredentialSealedUnderALostKey: a credential whose key was removed reads as an error the
// session can report, and a single-secret credential is repaired by sending its secret again.
func TestCredentialSealedUnderALostKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, keyA)
	ctx := context.Background()
	v := f.vault("v")
	bearer := f.credential(v, `{"type":"static_bearer","mcp_server_url":"https://mcp.example.com","token":"t1"}`)
	oauth := f.credential(v, `{"type":"mcp_oauth","mcp_server_url":"https://other.example.com","access_token":"a1"}`)
	sess := f.session(v)

	lost := testKeys(t, keyB) // the deployment lost key a
	_, err := New(f.st, lost, Options{}).MCPToken(ctx, sess, "https://mcp.example.com")
	require.ErrorIs(t, err, secretbox.ErrOpen)
	require.NotContains(t, err.Error(), "t1")

	svc := sessions.New(f.st, store.NewNotifier(), slog.New(slog.DiscardHandler), sessions.WithVaultKeys(lost))
	var up wire.CredentialUpdateParams
	require.NoError(t, wire.DecodeStrict([]byte(`{"auth":{"type":"static_bearer","token":"t2"}}`), &up))
	_, err = svc.UpdateCredential(ctx, f.ws, v, bearer.ID, up)
	require.NoError(t, err, "sending the only secret again repairs the credential")
	tok, err := New(f.st, lost, Options{}).MCPToken(ctx, sess, "https://mcp.example.com")
	require.NoError(t, err)
	require.Equal(t, "t2", tok.Value)

	require.NoError(t, wire.DecodeStrict([]byte(`{"auth":{"type":"mcp_oauth","access_token":"a2"}}`), &up))
	_, err = svc.UpdateCredential(ctx, f.ws, v, oauth.ID, up)
	var apiErr *sessions.Error
	require.ErrorAs(t, err, &apiErr, "a 400 in the API's shape, not a 500")
	require.Contains(t, err.Error(), "cannot be decrypted")
}

func TestRotationRewritesOnRefresh(t *testing.T) {
	t.Parallel()
	f := newFixture(t, keyA)
	ctx := context.Background()
	ts := newTokenServer(t)
	v := f.vault("v")
	static := f.credential(v, `{"type":"static_bearer","mcp_server_url":"https://static.example.com","token":"st"}`)
	oauth := f.credential(v, `{"type":"mcp_oauth","mcp_server_url":"https://mcp.example.com","access_token":"old","expires_at":"2020-01-01T00:00:00Z",
		"refresh":{"client_id":"c","refresh_token":"rt-0","token_endpoint":"`+ts.URL+`","token_endpoint_auth":{"type":"none"}}}`)
	sess := f.session(v)

	// Key b is added first: old ciphertexts (key a) still open; a refresh reseals with b.
	rotated := New(f.st, testKeys(t, keyB+","+keyA), Options{})
	tok, err := rotated.MCPToken(ctx, sess, "https://static.example.com")
	require.NoError(t, err)
	require.Equal(t, "st", tok.Value)
	_, err = rotated.MCPToken(ctx, sess, "https://mcp.example.com")
	require.NoError(t, err)
	keyOf := func(id string) string {
		var sealed []byte
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT sealed FROM vault_credentials WHERE id = $1`, id).Scan(&sealed))
		k, _, err := secretbox.KeyID(sealed)
		require.NoError(t, err)
		return k
	}
	require.Equal(t, "a", keyOf(static.ID))
	require.Equal(t, "b", keyOf(oauth.ID))

	// With key a gone, the refreshed credential still opens and the other does not.
	bOnly := New(f.st, testKeys(t, keyB), Options{})
	tok, err = bOnly.MCPToken(ctx, sess, "https://mcp.example.com")
	require.NoError(t, err)
	require.Equal(t, "fresh-1", tok.Value)
	_, err = bOnly.MCPToken(ctx, sess, "https://static.example.com")
	require.ErrorIs(t, err, secretbox.ErrOpen)

	// A ciphertext copied onto another credential does not open (the AAD binds its id).
	_, err = f.st.Pool().Exec(ctx, `UPDATE vault_credentials SET sealed = (SELECT sealed FROM vault_credentials WHERE id = $1) WHERE id = $2`, oauth.ID, static.ID)
	require.NoError(t, err)
	_, err = bOnly.MCPToken(ctx, sess, "https://static.example.com")
	require.True(t, errors.Is(err, secretbox.ErrOpen), "%v", err)
}

func TestRefreshNeedsTheSessionsVault(t *testing.T) {
	t.Parallel()
	f := newFixture(t, keyA)
	v, other := f.vault("v"), f.vault("other")
	c := f.credential(other, `{"type":"static_bearer","mcp_server_url":"https://mcp.example.com","token":"t"}`)
	_, err := f.resolver(nil).RefreshMCPToken(context.Background(), f.session(v), c.ID)
	require.ErrorIs(t, err, ErrNoCredential)
	_, err = f.resolver(nil).MCPToken(context.Background(), "sesn_missing", "https://mcp.example.com")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.True(t, strings.Contains(err.Error(), "sesn_missing"))
}

func TestRekeyResealsWithThePrimaryKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, keyA)
	ctx := context.Background()
	v := f.vault("v")
	var made []string
	for i := range 3 {
		c := f.credential(v, `{"type":"static_bearer","mcp_server_url":"https://m`+string(rune('0'+i))+`.example.com","token":"tok-`+string(rune('0'+i))+`"}`)
		made = append(made, c.ID)
	}
	sess := f.session(v)
	keyOf := func(id string) string {
		var sealed []byte
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT sealed FROM vault_credentials WHERE id = $1`, id).Scan(&sealed))
		k, _, err := secretbox.KeyID(sealed)
		require.NoError(t, err)
		return k
	}
	before, err := f.svc.GetCredential(ctx, f.ws, v, made[0])
	require.NoError(t, err)

	// The keyring must still hold the old key.
	_, err = Rekey(ctx, f.st, testKeys(t, keyB), slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, secretbox.ErrOpen)

	rotated := testKeys(t, keyB+","+keyA)
	n, err := Rekey(ctx, f.st, rotated, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for _, id := range made {
		require.Equal(t, "b", keyOf(id))
	}
	n, err = Rekey(ctx, f.st, rotated, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Zero(t, n, "a second run has nothing to do")

	// Key a can go: every credential resolves with b alone, and the API object is unchanged.
	r := New(f.st, testKeys(t, keyB), Options{})
	for i := range 3 {
		tok, err := r.MCPToken(ctx, sess, "https://m"+string(rune('0'+i))+".example.com")
		require.NoError(t, err)
		require.Equal(t, "tok-"+string(rune('0'+i)), tok.Value)
	}
	after, err := f.svc.GetCredential(ctx, f.ws, v, made[0])
	require.NoError(t, err)
	require.Equal(t, before, after)
}
