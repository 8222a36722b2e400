// Package pgtest starts throwaway PostgreSQL servers for tests: initdb
// into a new temporary directory (trust authentication, user "weir",
// replication connections allowed), the server listening on a Unix socket
// in that directory only (no TCP port, so parallel test binaries never
// collide), durability off (fsync, full-page writes: a test server needs
// none), plus the settings and extensions the caller asks for (Options).
// Stop ends the server and removes the directory.
//
// PostgreSQL refuses to run as root: when the test runs as root, the
// server runs as the user "postgres" (Debian's packages create it), or
// "nobody".
//
// The binaries are found in $WEIR_PG_BIN, else on $PATH (initdb,
// postgres), else in the newest /usr/lib/postgresql/*/bin. When they, or
// an extension asked for, are missing, Start returns an error wrapping
// ErrNotInstalled: callers skip their tests, saying so (.ci/run installs
// PostgreSQL and pgvector).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled is wrapped by Start's error when PostgreSQL's server
// binaries or an extension asked for are not installed.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL (or an extension asked for) is not installed")

// Server is a running throwaway server.
type Server struct {
	// Dir is the temporary directory: the data directory "data", the
	// socket and the log "log".
	Dir string
	// ConnString connects as the superuser "weir" to the database
	// "postgres".
	ConnString string
	// Version is the server's version.
	Version string
	// Extensions maps each extension created (Options.Extensions) to its
	// version.
	Extensions map[string]string

	cmd  *exec.Cmd
	done chan error
}

// binDir finds the directory of initdb and postgres.
func binDir() (string, error) {
	if d := os.Getenv("WEIR_PG_BIN"); d != "" {
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: no initdb and postgres on $PATH or in /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql; or set WEIR_PG_BIN)", ErrNotInstalled)
}

// Options are what a test needs of its server beyond the defaults.
type Options struct {
	// Settings are passed as -c name=value, after (so overriding) the
	// defaults: e.g. "wal_level": "logical" for logical replication,
	// "max_prepared_transactions": "10" for two-phase commit.
	Settings map[string]string
	// Extensions are created in the database "postgres" (CREATE
	// EXTENSION); one that is not installed fails Start with
	// ErrNotInstalled.
	Extensions []string
}

// Start starts a server; the caller must Stop it. It takes a few seconds
// (initdb).
func Start(o Options) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotInstalled, err)
		}
	}
	dir, err := os.MkdirTemp("", "weir-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	cred, err := runAs(dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "weir", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	if cred != nil {
		logf.Chown(int(cred.Uid), int(cred.Gid))
	}
	args := []string{"-D", data, "-k", dir, "-p", "5432",
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "synchronous_commit=off", "-c", "max_connections=100", "-c", "shared_buffers=128MB"}
	names := make([]string, 0, len(o.Settings))
	for k := range o.Settings {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		args = append(args, "-c", k+"="+o.Settings[k])
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// The server dies with the test binary, even one killed by a signal.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.cmd.Wait() }()
	s.ConnString = fmt.Sprintf("host=%s port=5432 user=weir dbname=postgres sslmode=disable", dir)

	// Wait until it accepts connections (or exits).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var conn *pgx.Conn
	for {
		conn, err = pgx.Connect(ctx, s.ConnString)
		if err == nil {
			break
		}
		select {
		case werr := <-s.done:
			s.done <- werr
			return nil, fmt.Errorf("pgtest: postgres exited (%v) before accepting connections; its log:\n%s", werr, s.Log())
		case <-ctx.Done():
			return nil, fmt.Errorf("pgtest: postgres did not accept connections within 2 minutes (%v); its log:\n%s", err, s.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&s.Version); err != nil {
		return nil, err
	}
	s.Extensions = map[string]string{}
	for _, ext := range o.Extensions {
		if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+pgx.Identifier{ext}.Sanitize()); err != nil {
			return nil, fmt.Errorf("%w: PostgreSQL %s at %s has no extension %s (%v): install postgresql-NN-%s (.ci/run installs pgvector)", ErrNotInstalled, s.Version, bin, ext, err, ext)
		}
		var v string
		if err := conn.QueryRow(ctx, "SELECT extversion FROM pg_extension WHERE extname = $1", ext).Scan(&v); err != nil {
			return nil, err
		}
		s.Extensions[ext] = v
	}
	ok = true
	return s, nil
}

// runAs returns the credential the server must run under when this
// process is root (nil otherwise) and hands dir to that user.
func runAs(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and PostgreSQL refuses to: no user postgres or nobody to run it as (%v)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	// Its parents must be searchable by that user.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Log returns the server's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
	return strings.TrimSpace(string(b))
}

// Stop stops the server (a fast shutdown, then SIGKILL after 30 s) and
// removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	}
	os.RemoveAll(s.Dir)
}
