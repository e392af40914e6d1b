package pgserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The cluster is initialized with trust authentication, which would let any process of our
// user that finds the socket (a command in the local sandbox, say) in as superuser. So the
// first start sets a generated password for the superuser and switches pg_hba.conf to
// scram-sha-256; later starts find both in place.
const (
	// passwordName is the file in the data directory that keeps the superuser's password
	// (mode 0600); the URLs we hand out carry it.
	passwordName = "managed-agents.password"
	// hbaMarker starts the pg_hba.conf we write, so a start can tell it is in place.
	hbaMarker = "# managed-agents: the superuser's password is in " + passwordName
)

// loadPassword returns the cluster's password, generating and keeping one on first use.
func loadPassword(dataDir string) (string, error) {
	path := filepath.Join(dataDir, passwordName)
	b, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	raw := make([]byte, 24)
	_, _ = rand.Read(raw)
	pw := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return pw, nil
}

// requirePassword sets the superuser's password and switches the cluster to password
// authentication if it is not yet.
func (s *Server) requirePassword(ctx context.Context) error {
	hba := filepath.Join(s.dataDir, "pg_hba.conf")
	b, err := os.ReadFile(hba)
	if err != nil {
		return fmt.Errorf("read %s: %w", hba, err)
	}
	if strings.HasPrefix(string(b), hbaMarker) {
		return nil
	}
	conn, err := pgx.Connect(ctx, s.urlFor("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	// ALTER ROLE takes no parameters; the password is base64url, quoted all the same.
	if _, err := conn.Exec(ctx, "ALTER ROLE "+superuser+" PASSWORD '"+strings.ReplaceAll(s.password, "'", "''")+"'"); err != nil {
		return fmt.Errorf("set the superuser's password: %w", err)
	}
	// Only the Unix socket: the server has no TCP listener. Truncating in place keeps the
	// file's owner (the server user when we run as root).
	conf := hbaMarker + "\nlocal all all scram-sha-256\n"
	if err := os.WriteFile(hba, []byte(conf), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", hba, err)
	}
	var reloaded bool
	if err := conn.QueryRow(ctx, "SELECT pg_reload_conf()").Scan(&reloaded); err != nil || !reloaded {
		return fmt.Errorf("reload the configuration for password authentication: %v", err)
	}
	s.logger.Info("switched the PostgreSQL cluster to password authentication", "data_dir", s.dataDir, "password_file", filepath.Join(s.dataDir, passwordName))
	return nil
}
