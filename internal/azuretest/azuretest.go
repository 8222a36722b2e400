// Package azuretest runs Azurite, Microsoft's Azure Storage emulator (npm
// package azurite, its blob service, in memory), for tests of weir's
// azblob:// locations: checkpoints and the Parquet sink. The real client
// (gocloud.dev/blob/azureblob on the Azure SDK) talks to a real Blob
// service implementation, not a mock of it. Importing it links the azblob
// driver of checkpoint locations (package checkpoint/azure). Only tests
// import it.
//
// Azurite is a Node.js program that takes seconds to start, so one
// instance serves every test of a test binary: it is started by the first
// Start, on a free port of 127.0.0.1, and ends with the test binary (it
// exits when its standard input, held by this package, closes, which
// happens even when the test binary is killed), or at Stop. Each Start has its own
// container. When node or the azurite package is missing, Start skips the
// test saying how to install it (.ci/install-npm-tools installs it into
// the tools directory: WEIR_NPM_TOOLS, else the user cache's weir/npm).
package azuretest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/weirproject/weir/internal/blobtest"
	"github.com/weirproject/weir/internal/npmtools"

	_ "github.com/weirproject/weir/checkpoint/azure" // azblob:// locations (and gocloud.dev's azureblob for Keys)
)

const (
	// Package is the npm package (and version) of Azurite that
	// .ci/install-npm-tools installs: the newest whose engines accept
	// Node.js 20 (3.36 and later want 21 or 22).
	Package = "azurite@3.35.0"
	// Account and Key are Azurite's well-known development account
	// (published with Azurite; not a secret).
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// startTimeout bounds Azurite's start (a few seconds on a busy machine).
const startTimeout = 2 * time.Minute

// server is the test binary's Azurite: started once, by the first Start.
var server struct {
	sync.Mutex
	started bool
	host    string        // 127.0.0.1:PORT once it listens
	err     error         // why it is not there (the tests skip with it)
	stdin   io.Closer     // held open until Stop: Azurite exits at its EOF
	exited  chan struct{} // closed once the Azurite process has exited
}

// containers numbers the containers of Start.
var containers atomic.Int64

// watchdog runs Azurite's blob service (argv[1], its main module) in a
// node process that exits when its standard input ends: when the test
// binary exits or is killed, nothing is left listening.
const watchdog = `process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
require(process.argv[1]);`

// listening is Azurite's line once its blob service accepts connections.
var listening = regexp.MustCompile(`successfully listens on https?://([0-9.]+:[0-9]+)`)

// ToolsDir returns the directory of the npm tools the tests use
// (npmtools.Dir).
func ToolsDir() (string, error) { return npmtools.Dir() }

// Start creates an empty container named weir-N (N unique in the process)
// in the test binary's Azurite (starting it if need be), points the Azure
// SDK at Azurite's development account (AZURE_STORAGE_ACCOUNT and
// AZURE_STORAGE_KEY, set for the test, so the test must not be parallel)
// and returns the URL of prefix in the container:
// azblob://weir-N/PREFIX?domain=127.0.0.1:PORT&localemu=true&protocol=http,
// which any checkpoint location and the Parquet sink's Path accept. It
// skips the test, saying why, when Azurite cannot run here.
//
// gocloud.dev's azureblob reads the credentials from the environment once
// per process, at the first azblob:// bucket opened: a test binary using
// this package must open none before Start.
func Start(t testing.TB, prefix string) string {
	t.Helper()
	host, err := ensureServer()
	if err != nil {
		t.Skipf("azuretest: %v", err)
	}
	t.Setenv("AZURE_STORAGE_ACCOUNT", Account)
	t.Setenv("AZURE_STORAGE_KEY", Key)
	name := fmt.Sprintf("weir-%d", containers.Add(1))
	cred, err := container.NewSharedKeyCredential(Account, Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential("http://"+host+"/"+Account+"/"+name, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Create(ctx, nil); err != nil {
		t.Fatalf("azuretest: create container %s: %v", name, err)
	}
	t.Cleanup(func() { c.Delete(context.Background(), nil) })
	q := url.Values{}
	q.Set("domain", host)
	q.Set("protocol", "http")
	q.Set("localemu", "true")
	u := url.URL{Scheme: "azblob", Host: name, Path: "/" + prefix, RawQuery: q.Encode()}
	return u.String()
}

// Available starts the process's Azurite if need be and returns nil, or
// returns why it cannot run here (what Start would skip with).
func Available() error {
	_, err := ensureServer()
	return err
}

// Stop ends the process's Azurite, if it was started, and waits for it
// to exit, which also ends its clients' connections: for a TestMain that
// checks that no goroutine outlives the tests. A later Start starts a new
// one (with empty storage).
func Stop() {
	server.Lock()
	defer server.Unlock()
	if server.stdin != nil {
		server.stdin.Close()
		<-server.exited
	}
	server.started, server.host, server.err, server.stdin, server.exited = false, "", nil, nil, nil
}

// ensureServer starts the process's Azurite once and returns its
// host:port, or why it cannot run (remembered: later tests skip at once).
func ensureServer() (string, error) {
	server.Lock()
	defer server.Unlock()
	if !server.started {
		server.started = true
		server.host, server.err = startAzurite()
	}
	return server.host, server.err
}

func startAzurite() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("node is not installed: Azurite (npm %s) cannot run; install Node.js and run .ci/install-npm-tools", Package)
	}
	dir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	main := filepath.Join(dir, "node_modules", "azurite", "dist", "src", "blob", "main.js")
	if _, err := os.Stat(main); err != nil {
		return "", fmt.Errorf("Azurite is not installed in %s: run .ci/install-npm-tools (npm install --prefix %s %s)", dir, dir, Package)
	}
	cmd := exec.Command(node, "-e", watchdog, main,
		"--blobHost", "127.0.0.1", "--blobPort", "0", // a free port, printed when listening
		"--inMemoryPersistence", "--extentMemoryLimit", "512",
		"--skipApiVersionCheck", // the Go SDK may be newer than the emulator
		"--loose", "--disableTelemetry", "--silent")
	cmd.Dir = os.TempDir() // in memory: nothing is written there
	out, w, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("start Azurite: %w", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", fmt.Errorf("start Azurite: %w", err)
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		out.Close()
		return "", fmt.Errorf("start Azurite: %w", err)
	}
	w.Close()
	exited := make(chan struct{})
	found := make(chan string, 1)
	lines := make(chan string, 64)
	go func() {
		// Reads Azurite's output until it exits, so that it never blocks
		// on a full pipe; the first lines go to the starter.
		defer close(exited)
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil && !sent {
				sent = true
				found <- m[1]
			}
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
		out.Close()
		cmd.Wait()
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	var said []string
	for {
		select {
		case host := <-found:
			server.stdin, server.exited = stdin, exited
			return host, nil
		case l, ok := <-lines:
			if ok {
				said = append(said, l)
				continue
			}
			<-exited
			return "", fmt.Errorf("Azurite (%s) exited before listening: %s", cmd.ProcessState, strings.Join(said, " | "))
		case <-timer.C:
			cmd.Process.Kill()
			<-exited
			return "", errors.New("Azurite did not listen within " + startTimeout.String() + ": " + strings.Join(said, " | "))
		}
	}
}

// Keys returns the keys of every object under loc (a URL Start returned,
// or one joined under it), relative to it, as Azurite lists them.
func Keys(t testing.TB, loc string) []string {
	t.Helper()
	return blobtest.Keys(t, loc)
}
