//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"
)

func createEnvironment(t *testing.T, c anthropic.Client, p anthropic.BetaEnvironmentNewParams) *anthropic.BetaEnvironment {
	t.Helper()
	env, err := c.Beta.Environments.New(context.Background(), p)
	require.NoError(t, err)
	return env
}

func environmentIDs(envs []anthropic.BetaEnvironment) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = e.ID
	}
	return out
}

func newSession(t *testing.T, c anthropic.Client, agentID, environmentID string) (*anthropic.BetaManagedAgentsSession, error) {
	t.Helper()
	return c.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agentID)},
		EnvironmentID: environmentID,
	})
}

var emptyPackages = map[string]any{"type": "packages", "apt": []any{}, "cargo": []any{}, "gem": []any{}, "go": []any{}, "npm": []any{}, "pip": []any{}}

func TestEnvironmentCreateCloudDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "defaults"})

	obj := objectOf(t, env.RawJSON())
	requireKeys(t, obj, "id", "type", "name", "description", "config", "scope", "metadata", "created_at", "updated_at", "archived_at")
	require.Regexp(t, `^env_\w+$`, obj["id"])
	require.Equal(t, "environment", obj["type"])
	require.Equal(t, "defaults", obj["name"])
	require.Nil(t, obj["description"])
	require.Nil(t, obj["archived_at"])
	require.Equal(t, "organization", obj["scope"])
	require.Equal(t, map[string]any{}, obj["metadata"])
	require.Equal(t, obj["created_at"], obj["updated_at"])
	require.Equal(t, map[string]any{"type": "cloud", "networking": map[string]any{"type": "unrestricted"}, "packages": emptyPackages}, obj["config"])

	// The SDK reads the same config.
	require.Equal(t, "cloud", env.Config.Type)
	require.Equal(t, "unrestricted", env.Config.Networking.Type)
	require.Equal(t, []string{}, env.Config.Packages.Pip)

	got, err := e.client.Beta.Environments.Get(context.Background(), env.ID, anthropic.BetaEnvironmentGetParams{})
	require.NoError(t, err)
	require.JSONEq(t, env.RawJSON(), got.RawJSON())
}

func TestEnvironmentCreateLimitedAndPackages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{
		Name: "limited", Description: param.NewOpt("locked down"), Scope: anthropic.BetaEnvironmentNewParamsScopeAccount,
		Metadata: map[string]string{"owner": "qa"},
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
			Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{
				AllowedHosts: []string{"api.example.com", "*.pypi.org"}, AllowPackageManagers: param.NewOpt(true)}},
			Packages: anthropic.BetaPackagesParams{Pip: []string{"pandas", "sqlalchemy==2.0.30"}, Npm: []string{"express@4.18.0"}},
		}},
	})
	obj := objectOf(t, env.RawJSON())
	require.Equal(t, "locked down", obj["description"])
	require.Equal(t, "account", obj["scope"])
	require.Equal(t, map[string]any{"owner": "qa"}, obj["metadata"])
	require.Equal(t, map[string]any{"type": "cloud",
		"networking": map[string]any{"type": "limited", "allowed_hosts": []any{"api.example.com", "*.pypi.org"},
			"allow_mcp_servers": false, "allow_package_managers": true},
		"packages": map[string]any{"type": "packages", "apt": []any{}, "cargo": []any{}, "gem": []any{}, "go": []any{},
			"npm": []any{"express@4.18.0"}, "pip": []any{"pandas", "sqlalchemy==2.0.30"}},
	}, obj["config"])
}

func TestEnvironmentCreateSelfHosted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "self",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	require.Equal(t, map[string]any{"type": "self_hosted"}, objectOf(t, env.RawJSON())["config"])
	require.Equal(t, "self_hosted", env.Config.Type)
}

func TestEnvironmentCreateValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	limited := func(n anthropic.BetaLimitedNetworkParams) anthropic.BetaEnvironmentNewParamsConfigUnion {
		return anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
			Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &n}}}
	}
	cases := []struct {
		name string
		p    anthropic.BetaEnvironmentNewParams
		opts []option.RequestOption
		msg  string
	}{
		{"empty name", anthropic.BetaEnvironmentNewParams{}, nil, "name"},
		{"host with scheme", anthropic.BetaEnvironmentNewParams{Name: "h", Config: limited(anthropic.BetaLimitedNetworkParams{AllowedHosts: []string{"https://a.com"}})},
			nil, "config.networking.allowed_hosts[0]"},
		{"host with port", anthropic.BetaEnvironmentNewParams{Name: "h", Config: limited(anthropic.BetaLimitedNetworkParams{AllowedHosts: []string{"ok.com", "a.com:443"}})},
			nil, "config.networking.allowed_hosts[1]"},
		{"packages need package managers", anthropic.BetaEnvironmentNewParams{Name: "p", Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
			Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{}},
			Packages:   anthropic.BetaPackagesParams{Apt: []string{"curl"}}}}}, nil, "allow_package_managers"},
		{"unknown config type", anthropic.BetaEnvironmentNewParams{Name: "t"},
			[]option.RequestOption{option.WithJSONSet("config", map[string]any{"type": "moon"})}, "config.type"},
		{"unknown config field", anthropic.BetaEnvironmentNewParams{Name: "f"},
			[]option.RequestOption{option.WithJSONSet("config", map[string]any{"type": "cloud", "gpu": true})}, "gpu"},
		{"self_hosted with networking", anthropic.BetaEnvironmentNewParams{Name: "s"},
			[]option.RequestOption{option.WithJSONSet("config", map[string]any{"type": "self_hosted", "networking": map[string]any{"type": "unrestricted"}})}, "self_hosted"},
		{"bad scope", anthropic.BetaEnvironmentNewParams{Name: "sc", Scope: "galaxy"}, nil, "scope"},
		{"too much metadata", anthropic.BetaEnvironmentNewParams{Name: "md", Metadata: manyMetadata(17)}, nil, "metadata"},
		{"null metadata value", anthropic.BetaEnvironmentNewParams{Name: "mdn"},
			[]option.RequestOption{option.WithJSONSet("metadata.k", nil)}, "metadata.k: must be a string"},
	}
	for _, tc := range cases {
		_, err := e.client.Beta.Environments.New(ctx, tc.p, tc.opts...)
		requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", tc.msg)
	}
	page, err := e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.Empty(t, page.Data, "rejected creates write nothing")
}

func manyMetadata(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

func TestEnvironmentDuplicateName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	first := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "shared"})
	second := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "other"})

	_, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "shared"})
	apiErr := requireAPIErr(t, err, http.StatusConflict, "conflict_error", `"shared"`)
	require.Equal(t, "false", apiErr.Response.Header.Get("x-should-retry"))

	// Renaming onto a taken name is the same conflict and changes nothing.
	_, err = e.client.Beta.Environments.Update(ctx, second.ID, anthropic.BetaEnvironmentUpdateParams{Name: param.NewOpt("shared")})
	apiErr = requireAPIErr(t, err, http.StatusConflict, "conflict_error", `"shared"`)
	require.Equal(t, "false", apiErr.Response.Header.Get("x-should-retry"))
	got, err := e.client.Beta.Environments.Get(ctx, second.ID, anthropic.BetaEnvironmentGetParams{})
	require.NoError(t, err)
	require.Equal(t, "other", got.Name)

	// Another workspace may use the name.
	otherWorkspace := e.clientFor(e.newKey())
	_, err = otherWorkspace.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "shared"})
	require.NoError(t, err)

	page, err := e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{})
	require.NoError(t, err)
	require.Equal(t, []string{second.ID, first.ID}, environmentIDs(page.Data))
}

func TestEnvironmentUpdate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	env := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "upd", Description: param.NewOpt("first"),
		Metadata: map[string]string{"a": "1", "b": "2", "c": "3"},
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
			Packages: anthropic.BetaPackagesParams{Pip: []string{"numpy"}}}}})
	update := func(p anthropic.BetaEnvironmentUpdateParams, opts ...option.RequestOption) map[string]any {
		t.Helper()
		got, err := e.client.Beta.Environments.Update(ctx, env.ID, p, opts...)
		require.NoError(t, err)
		return objectOf(t, got.RawJSON())
	}

	obj := update(anthropic.BetaEnvironmentUpdateParams{Name: param.NewOpt("renamed")})
	require.Equal(t, "renamed", obj["name"])
	require.Equal(t, "first", obj["description"])
	require.Equal(t, map[string]any{"a": "1", "b": "2", "c": "3"}, obj["metadata"])
	require.Equal(t, objectOf(t, env.RawJSON())["config"], obj["config"])
	require.Equal(t, objectOf(t, env.RawJSON())["created_at"], obj["created_at"])
	require.NotEqual(t, objectOf(t, env.RawJSON())["updated_at"], obj["updated_at"])

	// Metadata is a patch: null and "" both delete, a value upserts, omitted keys stay.
	obj = update(anthropic.BetaEnvironmentUpdateParams{Metadata: map[string]string{"b": "", "d": "4"}}, option.WithJSONSet("metadata.a", nil))
	require.Equal(t, map[string]any{"c": "3", "d": "4"}, obj["metadata"])

	// description: "" is stored as empty, null clears.
	obj = update(anthropic.BetaEnvironmentUpdateParams{Description: param.NewOpt("")})
	require.Equal(t, "", obj["description"])
	obj = update(anthropic.BetaEnvironmentUpdateParams{Description: param.Null[string]()})
	require.Contains(t, obj, "description")
	require.Nil(t, obj["description"])
	require.Equal(t, "renamed", obj["name"])

	// A config of the same type merges: networking alone keeps the packages ...
	obj = update(anthropic.BetaEnvironmentUpdateParams{Config: anthropic.BetaEnvironmentUpdateParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
		Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{
			AllowedHosts: []string{"example.com"}, AllowPackageManagers: param.NewOpt(true)}}}}})
	cfg := obj["config"].(map[string]any)
	require.Equal(t, map[string]any{"type": "limited", "allowed_hosts": []any{"example.com"}, "allow_mcp_servers": false, "allow_package_managers": true}, cfg["networking"])
	require.Equal(t, []any{"numpy"}, cfg["packages"].(map[string]any)["pip"])

	// ... and packages alone keep the networking.
	obj = update(anthropic.BetaEnvironmentUpdateParams{Config: anthropic.BetaEnvironmentUpdateParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
		Packages: anthropic.BetaPackagesParams{Apt: []string{"ripgrep"}}}}})
	cfg = obj["config"].(map[string]any)
	require.Equal(t, "limited", cfg["networking"].(map[string]any)["type"])
	require.Equal(t, []any{"ripgrep"}, cfg["packages"].(map[string]any)["apt"])

	// Dropping package-manager access while packages remain is refused and writes nothing.
	_, err := e.client.Beta.Environments.Update(ctx, env.ID, anthropic.BetaEnvironmentUpdateParams{Config: anthropic.BetaEnvironmentUpdateParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
		Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{AllowedHosts: []string{"example.com"}}}}}})
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "allow_package_managers")

	// The config type cannot change.
	_, err = e.client.Beta.Environments.Update(ctx, env.ID, anthropic.BetaEnvironmentUpdateParams{
		Config: anthropic.BetaEnvironmentUpdateParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	apiErr := requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "config.type")
	require.Equal(t, anthropic.ErrorCode("invalid_config_type_change"), apiErr.ErrorCode())

	// name cannot be cleared.
	_, err = e.client.Beta.Environments.Update(ctx, env.ID, anthropic.BetaEnvironmentUpdateParams{}, option.WithJSONSet("name", nil))
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "name")

	got, err := e.client.Beta.Environments.Get(ctx, env.ID, anthropic.BetaEnvironmentGetParams{})
	require.NoError(t, err)
	require.Equal(t, obj, objectOf(t, got.RawJSON()), "rejected updates wrote nothing")

	_, err = e.client.Beta.Environments.Update(ctx, "env_missing", anthropic.BetaEnvironmentUpdateParams{Name: param.NewOpt("x")})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", "env_missing")
}

func TestEnvironmentArchive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	agent := createAgent(t, e.client, agentParams("agent"))
	env := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "arch"})
	live := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "live"})
	before, err := newSession(t, e.client, agent.ID, env.ID)
	require.NoError(t, err)

	arch, err := e.client.Beta.Environments.Archive(ctx, env.ID, anthropic.BetaEnvironmentArchiveParams{})
	require.NoError(t, err)
	require.NotEmpty(t, arch.ArchivedAt)
	again, err := e.client.Beta.Environments.Archive(ctx, env.ID, anthropic.BetaEnvironmentArchiveParams{})
	require.NoError(t, err)
	require.Equal(t, arch.ArchivedAt, again.ArchivedAt)

	_, err = e.client.Beta.Environments.Update(ctx, env.ID, anthropic.BetaEnvironmentUpdateParams{Name: param.NewOpt("renamed")})
	apiErr := requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "archived")
	require.Equal(t, anthropic.ErrorCode("environment_archived"), apiErr.ErrorCode())

	_, err = newSession(t, e.client, agent.ID, env.ID)
	apiErr = requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", env.ID)
	require.Equal(t, anthropic.ErrorCode("environment_archived"), apiErr.ErrorCode())

	// Existing sessions keep working against it.
	s, err := e.client.Beta.Sessions.Get(ctx, before.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, env.ID, s.EnvironmentID)

	got, err := e.client.Beta.Environments.Get(ctx, env.ID, anthropic.BetaEnvironmentGetParams{})
	require.NoError(t, err)
	require.Equal(t, arch.ArchivedAt, got.ArchivedAt)
	require.Equal(t, "arch", got.Name)

	page, err := e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{})
	require.NoError(t, err)
	require.Equal(t, []string{live.ID}, environmentIDs(page.Data))
	page, err = e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.Equal(t, []string{live.ID, env.ID}, environmentIDs(page.Data))
}

func TestEnvironmentDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	agent := createAgent(t, e.client, agentParams("agent"))
	env := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "doomed"})
	sess, err := newSession(t, e.client, agent.ID, env.ID)
	require.NoError(t, err)

	_, err = e.client.Beta.Environments.Delete(ctx, env.ID, anthropic.BetaEnvironmentDeleteParams{})
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "referenced by sessions")
	_, err = e.client.Beta.Environments.Get(ctx, env.ID, anthropic.BetaEnvironmentGetParams{})
	require.NoError(t, err, "the refused delete kept the environment")

	_, err = e.client.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)

	del, err := e.client.Beta.Environments.Delete(ctx, env.ID, anthropic.BetaEnvironmentDeleteParams{})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"id": env.ID, "type": "environment_deleted"}, objectOf(t, del.RawJSON()))

	_, err = e.client.Beta.Environments.Get(ctx, env.ID, anthropic.BetaEnvironmentGetParams{})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", env.ID)
	_, err = e.client.Beta.Environments.Delete(ctx, env.ID, anthropic.BetaEnvironmentDeleteParams{})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", env.ID)
	// The name is free again.
	_, err = e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "doomed"})
	require.NoError(t, err)

	// An archived environment without sessions can be deleted too.
	arch := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "archived then deleted"})
	_, err = e.client.Beta.Environments.Archive(ctx, arch.ID, anthropic.BetaEnvironmentArchiveParams{})
	require.NoError(t, err)
	_, err = e.client.Beta.Environments.Delete(ctx, arch.ID, anthropic.BetaEnvironmentDeleteParams{})
	require.NoError(t, err)
}

func TestEnvironmentListPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var newestFirst []string
	for i := range 5 {
		env := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: fmt.Sprintf("env %d", i)})
		newestFirst = append([]string{env.ID}, newestFirst...)
	}

	var ids []string
	iter := e.client.Beta.Environments.ListAutoPaging(ctx, anthropic.BetaEnvironmentListParams{Limit: param.NewOpt(int64(2))})
	for iter.Next() {
		ids = append(ids, iter.Current().ID)
	}
	require.NoError(t, iter.Err())
	require.Equal(t, newestFirst, ids)

	var pages [][]string
	params := anthropic.BetaEnvironmentListParams{Limit: param.NewOpt(int64(2))}
	for {
		page, err := e.client.Beta.Environments.List(ctx, params)
		require.NoError(t, err)
		pages = append(pages, environmentIDs(page.Data))
		if page.NextPage == "" {
			require.NotContains(t, objectOf(t, page.RawJSON()), "next_page")
			break
		}
		params.Page = param.NewOpt(page.NextPage)
	}
	require.Equal(t, [][]string{newestFirst[:2], newestFirst[2:4], newestFirst[4:]}, pages)

	for _, limit := range []int64{0, 101} {
		_, err := e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{Limit: param.NewOpt(limit)})
		requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "limit")
	}
	_, err := e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{Page: param.NewOpt("page_garbage")})
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "invalid page cursor")
}

// TestEnvironmentConcurrentDuplicateNames: of parallel creates with one name exactly one wins.
func TestEnvironmentConcurrentDuplicateNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const writers = 6
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			_, errs[i] = e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "contended"})
		})
	}
	wg.Wait()
	winners := 0
	for _, err := range errs {
		if err == nil {
			winners++
			continue
		}
		requireAPIErr(t, err, http.StatusConflict, "conflict_error", `"contended"`)
	}
	require.Equal(t, 1, winners)
	page, err := e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{})
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
}
