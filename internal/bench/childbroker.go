package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/kafkasec"
)

// A child broker is an embedded broker in a process of its own, so that a
// benchmark can tell the client's CPU (its own process, getrusage) from
// the broker's (the child's, which it reports when asked), as against a
// remote cluster, where only the client runs on weir's cores.
//
// The child is this very executable (the test binary, or weir for `weir
// bench`) started with childBrokerEnv set: init below serves the broker
// instead of running the program. The protocol, over the child's stdin and
// stdout, one line each:
//
//	child -> parent  "addrs <addr>,<addr>..."   once the broker listens
//	parent -> child  "cpu"                      child -> parent "<ns>" (its user+system CPU)
//	parent closes stdin                         the child closes the broker and exits 0
//
// A parent that dies closes the child's stdin with it, so no child
// outlives its benchmark.
const (
	childBrokerEnv = "WEIR_BENCH_CHILD_BROKER" // "plaintext" or "sasl_ssl"
	childDirEnv    = "WEIR_BENCH_CHILD_DIR"    // where a sasl_ssl child writes ca.pem
)

func init() {
	if mode := os.Getenv(childBrokerEnv); mode != "" {
		if err := serveChildBroker(mode, os.Getenv(childDirEnv), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench: child broker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// serveChildBroker runs the child's side of the protocol: a broker with
// kafkaTopic, over plaintext or over SASL_SSL (a self-signed CA written to
// dir/ca.pem, the SCRAM-SHA-512 user "bench").
func serveChildBroker(mode, dir string, in io.Reader, out io.Writer) error {
	opts := broker.Options{Topics: map[string]int32{kafkaTopic: kafkaPartitions}}
	switch mode {
	case "plaintext":
	case "sasl_ssl":
		ca, err := broker.SelfSignedCA("bench CA")
		if err != nil {
			return err
		}
		if err := ca.WriteCAFile(filepath.Join(dir, "ca.pem")); err != nil {
			return err
		}
		if opts.TLS, err = ca.ServerTLS(nil, false); err != nil {
			return err
		}
		opts.Users = []broker.User{{Mechanism: kafkasec.ScramSHA512, Name: "bench", Password: benchPassword}}
	default:
		return fmt.Errorf("%s=%q: want plaintext or sasl_ssl", childBrokerEnv, mode)
	}
	b, err := broker.Start(opts)
	if err != nil {
		return err
	}
	defer b.Close()
	if _, err := fmt.Fprintf(out, "addrs %s\n", strings.Join(b.Addrs(), ",")); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() != "cpu" {
			return fmt.Errorf("unknown request %q", sc.Text())
		}
		if _, err := fmt.Fprintf(out, "%d\n", cpuNanos()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// childBroker is the parent's handle on a child broker.
type childBroker struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	addrs []string
	dir   string
	sec   kafkasec.Security // how to reach it
}

// startChildBroker starts a child broker over plaintext or sasl_ssl and
// waits until it listens.
func startChildBroker(mode string) (*childBroker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: child broker: %w", err)
	}
	dir, err := os.MkdirTemp("", "weir-bench-broker")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childBrokerEnv+"="+mode, childDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: child broker: %w", err)
	}
	c := &childBroker{cmd: cmd, in: in, out: bufio.NewReader(outp), dir: dir}
	line, err := c.out.ReadString('\n')
	addrs, ok := strings.CutPrefix(strings.TrimSpace(line), "addrs ")
	if err != nil || !ok {
		c.close()
		return nil, fmt.Errorf("bench: child broker (%s) did not start: %q %v", mode, line, err)
	}
	c.addrs = strings.Split(addrs, ",")
	if mode == "sasl_ssl" {
		c.sec = kafkasec.Security{TLS: &kafkasec.TLS{CAFile: filepath.Join(dir, "ca.pem")},
			SASL: &kafkasec.SASL{Mechanism: kafkasec.ScramSHA512, Username: "bench", Password: benchPassword}}
	}
	return c, nil
}

// cpu is the CPU time the child has used so far.
func (c *childBroker) cpu() (time.Duration, error) {
	if _, err := io.WriteString(c.in, "cpu\n"); err != nil {
		return 0, fmt.Errorf("bench: child broker: %w", err)
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("bench: child broker: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: child broker: cpu %q: %w", line, err)
	}
	return time.Duration(ns), nil
}

// close stops the child (it closes its broker on the end of its stdin) and
// removes its directory.
func (c *childBroker) close() error {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		err = errors.Join(errors.New("bench: child broker did not exit in 10 s; killed"), <-done)
	}
	os.RemoveAll(c.dir)
	return err
}
