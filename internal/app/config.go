// Package app reads configuration and wires the parts of each subcommand together. It is the
// only package that knows every other one.
package app

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Config is the process configuration. Every field has a MANAGED_AGENT_* variable; flags
// override variables.
type Config struct {
	// DatabaseURL is the PostgreSQL connection string (MANAGED_AGENT_DATABASE_URL).
	DatabaseURL string
	// Addr is the HTTP listen address (MANAGED_AGENT_ADDR).
	Addr string
	// APIKey, if set, is accepted and bound to a workspace at start (MANAGED_AGENT_API_KEY).
	APIKey string
	// LogLevel is debug, info, warn or error (MANAGED_AGENT_LOG_LEVEL).
	LogLevel string
	// LogFormat is json or text (MANAGED_AGENT_LOG_FORMAT).
	LogFormat string
	// DataDir is where dev keeps its private PostgreSQL and generated key (MANAGED_AGENT_DATA_DIR).
	DataDir string
}

// FromEnv reads the variables over the given defaults.
func FromEnv(def Config) Config {
	c := def
	set := func(dst *string, name string) {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			*dst = v
		}
	}
	set(&c.DatabaseURL, "MANAGED_AGENT_DATABASE_URL")
	set(&c.Addr, "MANAGED_AGENT_ADDR")
	set(&c.APIKey, "MANAGED_AGENT_API_KEY")
	set(&c.LogLevel, "MANAGED_AGENT_LOG_LEVEL")
	set(&c.LogFormat, "MANAGED_AGENT_LOG_FORMAT")
	set(&c.DataDir, "MANAGED_AGENT_DATA_DIR")
	return c
}

// Logger builds the process logger; an invalid setting is an error naming the variable.
func (c Config) Logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(orDefault(c.LogLevel, "info"))); err != nil {
		return nil, fmt.Errorf("MANAGED_AGENT_LOG_LEVEL=%q: must be debug, info, warn or error", c.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(orDefault(c.LogFormat, "json")) {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("MANAGED_AGENT_LOG_FORMAT=%q: must be json or text", c.LogFormat)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
