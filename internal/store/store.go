// Package store owns PostgreSQL: the embedded migrations, every query, the event log and the
// LISTEN/NOTIFY notifier.
//
// It holds no business rules (those are in package sessions) and must never import HTTP,
// Temporal or Kubernetes packages.
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Errors callers branch on.
var (
	ErrNotFound = errors.New("not found")
	// ErrDuplicate is a unique-constraint violation (e.g. an environment name in use).
	ErrDuplicate = errors.New("duplicate")
	// ErrReferenced is a foreign-key violation: a row is still referenced.
	ErrReferenced = errors.New("still referenced")
)

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error)
}

// Store is the database handle.
type Store struct {
	pool *pgxpool.Pool
	obs  Observer
	// Queries run outside any explicit transaction.
	*Queries
}

// Queries runs the project's queries against the pool or a transaction.
type Queries struct {
	db querier
	// tx is the transaction db is, nil outside one (InTx).
	tx  *pipelinedTx
	obs Observer
	// appended collects the types of the events a transaction appends, reported when it
	// commits (a rolled-back append appended nothing); nil outside a transaction.
	appended *[]string
}

// Observer records what the store commits and how its LISTEN connections fare (metrics).
// Event types and topics are fixed sets, never ids.
type Observer interface {
	EventsAppended(types []string)
	ListenerReconnecting(topic string)
}

type nopObserver struct{}

func (nopObserver) EventsAppended([]string)     {}
func (nopObserver) ListenerReconnecting(string) {}

// Option configures Open.
type Option func(*Store)

// WithObserver records committed events through o (default: nothing is recorded).
func WithObserver(o Observer) Option { return func(s *Store) { s.obs = o } }

// recordAppended reports appended event types now, or at the commit of the transaction q runs in.
func (q *Queries) recordAppended(types []string) {
	if q.appended != nil {
		*q.appended = append(*q.appended, types...)
		return
	}
	q.obs.EventsAppended(types)
}

// DefaultConnectTimeout bounds one connection attempt when the database URL names no
// connect_timeout. Without a bound, a connect that races a PostgreSQL failover on Kubernetes
// (the Service still routing to the old pod, whose address no longer answers) waits out the
// kernel's SYN retries, about two minutes, and every step that needs a connection waits with
// it; the real cluster's pod-kill test saw exactly that.
const DefaultConnectTimeout = 10 * time.Second

// poolConfig parses url and bounds what a lost server costs: connects time out
// (DefaultConnectTimeout unless the URL names a connect_timeout; connect_timeout=0 counts as
// unnamed), and TCP keepalives find an idle connection to a vanished server within about 30
// seconds instead of Go's default of about two and a half minutes. A query in flight to a
// vanished server still waits for the kernel's retransmissions; the steps' own deadlines
// bound that.
func poolConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	dialer := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}}
	cfg.ConnConfig.DialFunc = dialer.DialContext
	return cfg, nil
}

// Open connects to PostgreSQL. It does not migrate.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := poolConfig(url)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	s := &Store{pool: pool, obs: nopObserver{}}
	for _, o := range opts {
		o(s)
	}
	s.Queries = &Queries{db: pool, obs: s.obs}
	return s, nil
}

// Close releases every connection.
func (s *Store) Close() { s.pool.Close() }

// Pool exposes the pool for the notifier and health checks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks the database is reachable.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Migrate applies the embedded migrations. A session-level advisory lock makes concurrent
// runs from several replicas safe: one applies, the others wait and find nothing to do.
func (s *Store) Migrate(ctx context.Context, logger *slog.Logger) error {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("create migration lock: %w", err)
	}
	provider, closeDB, err := s.migrations(goose.WithSessionLocker(locker))
	if err != nil {
		return err
	}
	defer closeDB()
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	for _, r := range results {
		logger.InfoContext(ctx, "applied migration", "version", r.Source.Version, "duration", r.Duration)
	}
	return nil
}

// ErrSchemaNotCurrent reports a database that lacks migrations this build embeds.
var ErrSchemaNotCurrent = errors.New("the database schema is not current")

// CheckMigrated returns ErrSchemaNotCurrent unless every embedded migration is applied; a
// process that does not migrate (a worker) checks this before it starts.
func (s *Store) CheckMigrated(ctx context.Context) error {
	provider, closeDB, err := s.migrations()
	if err != nil {
		return err
	}
	defer closeDB()
	pending, err := provider.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("check migrations: %w", err)
	}
	if pending {
		return ErrSchemaNotCurrent
	}
	return nil
}

func (s *Store) migrations(opts ...goose.ProviderOption) (*goose.Provider, func(), error) {
	sub, err := fsSub(migrations, "migrations")
	if err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDBFromPool(s.pool)
	provider, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		append(opts, goose.WithDisableGlobalRegistry(true))...)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("prepare migrations: %w", err)
	}
	return provider, func() { db.Close() }, nil
}

// classify maps PostgreSQL errors to the package's sentinel errors.
func classify(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			if pgErr.ConstraintName == mcpResultIndex {
				return fmt.Errorf("%w: %w", ErrCallAnswered, ErrDuplicate)
			}
			return fmt.Errorf("%w: %s", ErrDuplicate, pgErr.ConstraintName)
		case "23503":
			return fmt.Errorf("%w: %s", ErrReferenced, pgErr.ConstraintName)
		}
	}
	return err
}
