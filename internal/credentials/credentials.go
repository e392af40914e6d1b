// Package credentials resolves, on the worker's side, the vault credential a session uses for
// an MCP server: it matches the server's normalized URL over the session's vault_ids in
// order, decrypts the secret, and refreshes an expiring OAuth access token at its token
// endpoint under the credential's row lock, so concurrent workers refresh it once.
//
// It imports store, secretbox, mcpurl, wire and net/http; never agent, turns, durable,
// Temporal or Kubernetes. Secrets it handles are never logged.
package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/managed-agents/managed-agents/internal/mcpurl"
	"github.com/managed-agents/managed-agents/internal/secretbox"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Token is the bearer token to send to an MCP server, and where it came from.
type Token struct {
	Value        string
	CredentialID string
	VaultID      string
	// Refreshable: RefreshMCPToken can get a new token (an mcp_oauth credential with refresh).
	Refreshable bool
}

// ErrNoCredential: none of the session's active vaults holds an active credential for the
// MCP server.
var ErrNoCredential = errors.New("no credential for this MCP server in the session's vaults")

// ErrNotRefreshable: the credential has no refresh configuration (a static bearer token, or
// an OAuth credential created without refresh).
var ErrNotRefreshable = errors.New("the credential has no refresh configuration")

// RefreshError is a failed token refresh: the endpoint was unreachable, refused the refresh
// token, or answered without an access token. The stored credential is unchanged. Callers
// report it as an MCP authentication failure (mcp_authentication_failed_error).
type RefreshError struct {
	CredentialID string
	// Status is the token endpoint's HTTP status, 0 when it did not answer.
	Status int
	// Code is the OAuth error code of the answer ("invalid_grant"), if any.
	Code string
	Err  error
}

func (e *RefreshError) Error() string {
	msg := "refresh the access token of credential " + e.CredentialID
	if e.Status != 0 {
		msg += fmt.Sprintf(": token endpoint answered %d", e.Status)
	}
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *RefreshError) Unwrap() error { return e.Err }

// Defaults of the resolver.
const (
	// DefaultRefreshTimeout bounds one call of a token endpoint.
	DefaultRefreshTimeout = 10 * time.Second
	// refreshMargin refreshes a token that expires within it, so it does not expire in flight.
	refreshMargin = 30 * time.Second
	// maxTokenResponse bounds a token endpoint's answer.
	maxTokenResponse = 1 << 20
)

// Options configure a Resolver; zero values are the defaults.
type Options struct {
	// HTTPClient calls token endpoints; default a client with DefaultRefreshTimeout.
	HTTPClient *http.Client
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Resolver resolves MCP credentials of sessions.
type Resolver struct {
	store  *store.Store
	keys   *secretbox.Keyring
	client *http.Client
	now    func() time.Time
	logger *slog.Logger
	// flight joins concurrent refreshes of one credential in this process: one call to the
	// endpoint and one database connection held across it, however many sessions wait.
	flight singleflight.Group
}

// NewHTTPClient is the client token endpoints are called with: bounded, redirects not
// followed, every dial through guard (non-public addresses refused unless it allows them).
func NewHTTPClient(transport http.RoundTripper) *http.Client {
	return &http.Client{
		Timeout:       DefaultRefreshTimeout,
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// New returns a resolver over st that opens secrets with keys.
func New(st *store.Store, keys *secretbox.Keyring, opts Options) *Resolver {
	r := &Resolver{store: st, keys: keys, client: opts.HTTPClient, now: opts.Now, logger: opts.Logger}
	if r.client == nil {
		r.client = NewHTTPClient(nil)
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	return r
}

// MCPToken returns the token for the MCP server at serverURL: the first active credential
// whose normalized mcp_server_url equals serverURL's (mcpurl.Normalize), over the session's
// active vaults in vault_ids order. An mcp_oauth token that has expired or expires within 30 s
// is refreshed first when the credential has a refresh configuration (a *RefreshError if that
// fails). ErrNoCredential if no credential matches.
func (r *Resolver) MCPToken(ctx context.Context, sessionID, serverURL string) (Token, error) {
	ws, vaults, err := r.store.SessionVaults(ctx, sessionID)
	if err != nil {
		return Token{}, err
	}
	if len(vaults) == 0 {
		return Token{}, ErrNoCredential
	}
	match, err := mcpurl.Normalize(serverURL)
	if err != nil {
		// No stored credential can match a URL that does not normalize (stored ones were
		// normalized when made); the URL is not quoted, since it may carry user information.
		return Token{}, ErrNoCredential
	}
	rec, err := r.store.MatchingCredential(ctx, ws, vaults, match, false)
	if errors.Is(err, store.ErrNotFound) {
		return Token{}, ErrNoCredential
	}
	if err != nil {
		return Token{}, err
	}
	auth, err := decodeAuth(rec)
	if err != nil {
		return Token{}, err
	}
	if r.needsRefresh(auth) {
		tok, err := r.refresh(ctx, ws, vaults, rec.ID, false)
		var rerr *RefreshError
		if errors.As(err, &rerr) && r.now().Before(time.Time(*auth.ExpiresAt)) {
			// Refreshed early (within the margin) and refused: the current token still works.
			r.logger.WarnContext(ctx, "MCP token refresh failed; using the token until it expires", "credential_id", rec.ID, "error", err)
			return r.token(rec, auth)
		}
		return tok, err
	}
	return r.token(rec, auth)
}

// RefreshMCPToken refreshes the credential's access token now, whatever its expiry (after
// the MCP server answered 401), and returns the new one. The credential must be active in
// one of the session's active vaults. ErrNotRefreshable (wrapped) if it has no refresh
// configuration; a *RefreshError if the refresh fails.
func (r *Resolver) RefreshMCPToken(ctx context.Context, sessionID, credentialID string) (Token, error) {
	return r.ReplaceRefusedMCPToken(ctx, sessionID, credentialID, "")
}

// ReplaceRefusedMCPToken is RefreshMCPToken after a server refused the token refused: if the
// stored token is no longer that one (another worker refreshed meanwhile), the stored one is
// returned and the endpoint is not called, so workers refused at once rotate the token once.
func (r *Resolver) ReplaceRefusedMCPToken(ctx context.Context, sessionID, credentialID, refused string) (Token, error) {
	ws, vaults, err := r.store.SessionVaults(ctx, sessionID)
	if err != nil {
		return Token{}, err
	}
	return r.refreshRefused(ctx, ws, vaults, credentialID, true, refused)
}

func decodeAuth(rec store.CredentialRecord) (wire.CredentialAuth, error) {
	var auth wire.CredentialAuth
	if err := json.Unmarshal(rec.Auth, &auth); err != nil {
		return auth, fmt.Errorf("decode credential %s auth: %w", rec.ID, err)
	}
	return auth, nil
}

func (r *Resolver) needsRefresh(auth wire.CredentialAuth) bool {
	return auth.Type == wire.AuthMCPOAuth && auth.Refresh != nil && auth.ExpiresAt != nil &&
		!r.now().Add(refreshMargin).Before(time.Time(*auth.ExpiresAt))
}

// token opens the stored secret of an MCP credential.
func (r *Resolver) token(rec store.CredentialRecord, auth wire.CredentialAuth) (Token, error) {
	sec, err := store.OpenSecrets(r.keys, rec.ID, rec.Sealed)
	if err != nil {
		return Token{}, err
	}
	t := Token{CredentialID: rec.ID, VaultID: rec.VaultID, Refreshable: auth.Type == wire.AuthMCPOAuth && auth.Refresh != nil}
	switch auth.Type {
	case wire.AuthStaticBearer:
		t.Value = sec.Token
	case wire.AuthMCPOAuth:
		t.Value = sec.AccessToken
	default:
		return Token{}, fmt.Errorf("credential %s is a %s credential, not an MCP one", rec.ID, auth.Type)
	}
	return t, nil
}

// refresh runs under the credential's row lock: a second caller waits for the first and,
// unless forced, finds the token fresh and does not call the endpoint again.
//
// The transaction runs on a context the caller cannot cancel (bounded by refreshTxTimeout):
// once the endpoint granted a token, the old refresh token may already be void (servers rotate
// them), so the grant must be stored even if the step that asked is being cut short. Only the
// call to the endpoint honours ctx.
func (r *Resolver) refresh(ctx context.Context, ws string, vaults []string, credentialID string, force bool) (Token, error) {
	return r.refreshRefused(ctx, ws, vaults, credentialID, force, "")
}

// refreshRefused joins the refreshes of one credential in this process. The joined work runs
// on a context no caller can cancel (bounded by refreshTxTimeout): one session's interrupt
// must not fail the others waiting on it. A caller whose own ctx ends stops waiting.
func (r *Resolver) refreshRefused(ctx context.Context, ws string, vaults []string, credentialID string, force bool, refused string) (Token, error) {
	key := fmt.Sprintf("%s|%t|%s|%s", credentialID, force, ws, strings.Join(vaults, ","))
	ch := r.flight.DoChan(key, func() (any, error) {
		return r.refreshLocked(context.WithoutCancel(ctx), ws, vaults, credentialID, force, refused)
	})
	select {
	case res := <-ch:
		tok, _ := res.Val.(Token)
		return tok, res.Err
	case <-ctx.Done():
		return Token{}, ctx.Err()
	}
}

func (r *Resolver) refreshLocked(ctx context.Context, ws string, vaults []string, credentialID string, force bool, refused string) (Token, error) {
	var out Token
	txCtx, cancel := context.WithTimeout(ctx, refreshTxTimeout)
	defer cancel()
	err := r.store.InTx(txCtx, func(q *store.Queries) error {
		// A bounded wait for the row lock, so the endpoint is never called with too little of
		// the transaction's time left to store what it grants.
		if err := q.SetLockTimeout(txCtx, refreshLockTimeout); err != nil {
			return err
		}
		rec, err := q.SessionCredential(txCtx, ws, vaults, credentialID, true)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("credential %s: %w", credentialID, ErrNoCredential)
		}
		if err != nil {
			return err
		}
		auth, err := decodeAuth(rec)
		if err != nil {
			return err
		}
		if auth.Type != wire.AuthMCPOAuth || auth.Refresh == nil {
			if force {
				return fmt.Errorf("credential %s: %w", credentialID, ErrNotRefreshable)
			}
			out, err = r.token(rec, auth)
			return err
		}
		if !force && !r.needsRefresh(auth) {
			out, err = r.token(rec, auth)
			return err
		}
		sec, err := store.OpenSecrets(r.keys, rec.ID, rec.Sealed)
		if err != nil {
			return err
		}
		if force && refused != "" && sec.AccessToken != refused {
			out, err = r.token(rec, auth) // refreshed by someone else since it was refused
			return err
		}
		granted, err := r.callTokenEndpoint(ctx, rec.ID, *auth.Refresh, sec)
		if err != nil {
			return err
		}
		now := r.now()
		sec.AccessToken = granted.AccessToken
		if granted.RefreshToken != "" {
			sec.RefreshToken = granted.RefreshToken
		}
		auth.ExpiresAt = nil
		if granted.ExpiresIn > 0 {
			exp := wire.Time(now.Add(time.Duration(granted.ExpiresIn) * time.Second).UTC().Truncate(time.Microsecond))
			auth.ExpiresAt = &exp
		}
		if rec.Auth, err = json.Marshal(auth); err != nil {
			return fmt.Errorf("encode credential auth: %w", err)
		}
		// Sealed again with the primary key: a refresh also moves the secret to a rotated key.
		if rec.Sealed, err = store.SealSecrets(r.keys, rec.ID, sec); err != nil {
			return err
		}
		rec.UpdatedAt = now.UTC().Truncate(time.Microsecond)
		if err := q.UpdateCredential(txCtx, rec); err != nil {
			r.logger.ErrorContext(ctx, "a granted MCP access token could not be stored", "credential_id", rec.ID, "error", err)
			return err
		}
		r.logger.InfoContext(ctx, "refreshed MCP access token", "credential_id", rec.ID, "vault_id", rec.VaultID, "expires_in", granted.ExpiresIn)
		out = Token{Value: sec.AccessToken, CredentialID: rec.ID, VaultID: rec.VaultID, Refreshable: true}
		return nil
	})
	return out, err
}

// refreshTxTimeout bounds a refresh's transaction: the wait for the credential's row lock
// (refreshLockTimeout), the endpoint call (its client's own timeout) and storing the grant.
const (
	refreshLockTimeout = 10 * time.Second
	refreshTxTimeout   = refreshLockTimeout + DefaultRefreshTimeout + 10*time.Second
)

// maxExpiresIn clamps a granted lifetime: a huge or malformed expires_in must not overflow
// into an expiry in the past (which would refresh on every use).
const maxExpiresIn = 366 * 24 * 3600

// tokenResponse is the part of an OAuth 2.0 token response (RFC 6749 §5.1) read here.
type tokenResponse struct {
	AccessToken  string          `json:"access_token"`
	RefreshToken string          `json:"refresh_token"`
	ExpiresIn    int64           `json:"-"`
	RawExpiresIn json.RawMessage `json:"expires_in"`
	Error        string          `json:"error"`
}

// callTokenEndpoint sends a refresh_token grant (RFC 6749 §6) with the client authentication
// the credential names: none (client_id in the body), client_secret_basic (HTTP Basic, both
// parts form-encoded as §2.3.1 says) or client_secret_post (client_secret in the body).
func (r *Resolver) callTokenEndpoint(ctx context.Context, credentialID string, cfg wire.CredentialRefresh, sec store.CredentialSecrets) (tokenResponse, error) {
	fail := func(status int, code string, err error) (tokenResponse, error) {
		return tokenResponse{}, &RefreshError{CredentialID: credentialID, Status: status, Code: code, Err: err}
	}
	if sec.RefreshToken == "" {
		return fail(0, "", errors.New("no refresh token is stored"))
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {sec.RefreshToken}, "client_id": {cfg.ClientID}}
	if cfg.Resource != nil {
		form.Set("resource", *cfg.Resource)
	}
	if cfg.Scope != nil {
		form.Set("scope", *cfg.Scope)
	}
	if cfg.TokenEndpointAuth.Type == "client_secret_post" {
		form.Set("client_secret", sec.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return fail(0, "", fmt.Errorf("token endpoint %s: %w", mcpurl.Origin(cfg.TokenEndpoint), err))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if cfg.TokenEndpointAuth.Type == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(cfg.ClientID), url.QueryEscape(sec.ClientSecret))
	}
	resp, err := r.client.Do(req)
	if err != nil {
		// Only the endpoint and the transport error: the request carried secrets.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fail(0, "", fmt.Errorf("call token endpoint %s: %w", mcpurl.Origin(cfg.TokenEndpoint), err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		// Redirects are not followed (the form carries the refresh token and maybe the
		// client secret, which must go to the configured endpoint only).
		return fail(resp.StatusCode, "", errors.New("the token endpoint redirects; set the final URL as token_endpoint"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return fail(resp.StatusCode, "", fmt.Errorf("read token endpoint answer: %w", err))
	}
	var tr tokenResponse
	jsonErr := json.Unmarshal(body, &tr)
	if resp.StatusCode/100 != 2 {
		return fail(resp.StatusCode, wire.Excerpt(tr.Error, 64), errors.New("refresh refused"))
	}
	if jsonErr != nil {
		return fail(resp.StatusCode, "", errors.New("the answer is not a JSON token response"))
	}
	if tr.AccessToken == "" {
		return fail(resp.StatusCode, wire.Excerpt(tr.Error, 64), errors.New("the answer has no access_token"))
	}
	if len(tr.RawExpiresIn) > 0 && string(tr.RawExpiresIn) != "null" {
		// Some servers send expires_in as a string.
		s := strings.Trim(string(tr.RawExpiresIn), `"`)
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return fail(resp.StatusCode, "", errors.New("expires_in is not a number of seconds"))
		}
		tr.ExpiresIn = int64(min(n, maxExpiresIn))
	}
	return tr, nil
}
