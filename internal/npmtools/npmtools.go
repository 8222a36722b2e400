// Package npmtools finds the npm packages weir's interoperability tests
// run under Node.js (DuckDB, Confluent's Schema Registry clients with
// kafkajs, Azurite): they live in one tools directory, WEIR_NPM_TOOLS, else
// the user cache directory's weir/npm, where .ci/install-npm-tools installs
// them. A test whose tools cannot be found or installed skips, saying why
// and how to install them; it never fails for that reason.
package npmtools

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Dir returns the tools directory: WEIR_NPM_TOOLS, else the user cache
// directory's weir/npm.
func Dir() (string, error) {
	if dir := os.Getenv("WEIR_NPM_TOOLS"); dir != "" {
		return dir, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for npm tools (%v); set WEIR_NPM_TOOLS and run .ci/install-npm-tools", err)
	}
	return filepath.Join(cache, "weir", "npm"), nil
}

// Require returns node and the node_modules directory holding packages
// (each "name@version"), installing the missing ones with npm into Dir,
// or skips t saying why. what names what the packages are for, in the
// skip messages.
func Require(t testing.TB, what string, packages ...string) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node is not installed: %s cannot run; install Node.js and run .ci/install-npm-tools", what)
	}
	dir, err := Dir()
	if err != nil {
		t.Skip(err)
	}
	modules = filepath.Join(dir, "node_modules")
	installed := func() bool {
		for _, p := range packages {
			name := p
			if i := strings.LastIndex(p, "@"); i > 0 {
				name = p[:i]
			}
			if _, err := os.Stat(filepath.Join(modules, name, "package.json")); err != nil {
				return false
			}
		}
		return true
	}
	if installed() {
		return node, modules
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("%s (%s) not installed in %s and npm is missing: run .ci/install-npm-tools", what, strings.Join(packages, ", "), dir)
	}
	args := append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund"}, packages...)
	if out, err := exec.Command(npm, args...).CombinedOutput(); err != nil || !installed() {
		t.Skipf("npm %s failed (%v): %s", strings.Join(args, " "), err, out)
	}
	return node, modules
}
