// Package pgtest starts a throwaway PostgreSQL server with the pgvector
// extension for tests (internal/pgtest with the extension "vector"): see
// internal/pgtest for where the binaries are found and how the server runs.
// When PostgreSQL or pgvector is missing, New returns an error wrapping
// ErrNotInstalled: callers skip their tests, saying so (.ci/run installs
// both).
package pgtest

import "github.com/weirproject/weir/internal/pgtest"

// ErrNotInstalled is wrapped by New's error when PostgreSQL's server
// binaries or the pgvector extension are not installed.
var ErrNotInstalled = pgtest.ErrNotInstalled

// Server is a running throwaway server.
type Server struct {
	*pgtest.Server
	// Vector is the pgvector extension's version.
	Vector string
}

// New starts a server with pgvector; the caller must Stop it. It takes a
// few seconds (initdb).
func New() (*Server, error) {
	s, err := pgtest.Start(pgtest.Options{Extensions: []string{"vector"}})
	if err != nil {
		return nil, err
	}
	return &Server{Server: s, Vector: s.Extensions["vector"]}, nil
}
