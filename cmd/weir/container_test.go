package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestContainerImage builds the image with deploy/container/build.sh and
// runs weir in it under podman: `weir version --json` reports the build's
// version and the weir_cloud tag, and `weir demo` (small) runs to its end
// as user 65532 with a read-only root filesystem. Set WEIR_CONTAINER_TESTS=1
// (podman with runc; see docs/deploy.md).
func TestContainerImage(t *testing.T) {
	tag := containerImage(t)
	podman := func(args ...string) string {
		t.Helper()
		all := append([]string{"--runtime", "runc", "run", "--rm", "--network", "host", "--read-only"}, append([]string{tag}, args...)...)
		out, err := exec.Command("podman", all...).Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}
	var v struct {
		Version, Commit string
		Tags            []string
	}
	if err := json.Unmarshal([]byte(podman("version", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != "v9.9.9-test" || v.Commit != "c0ffee" || !strings.Contains(strings.Join(v.Tags, ","), "weir_cloud") {
		t.Errorf("weir version in the image: %+v, want v9.9.9-test c0ffee with weir_cloud", v)
	}
	out := podman("demo", "--orders", "2000", "--days", "1", "--customers", "20", "--items", "10", "--json")
	var demo struct{ Produced, Sorted int64 }
	if err := json.Unmarshal([]byte(out), &demo); err != nil || demo.Produced == 0 || demo.Sorted != demo.Produced {
		t.Errorf("weir demo in the image: %v, summary %+v: want every produced record sorted\n%s", err, demo, out)
	}
	if size, err := exec.Command("podman", "image", "inspect", "--format", "{{.Size}}", tag).Output(); err == nil {
		t.Logf("image %s: %s bytes", tag, strings.TrimSpace(string(size)))
	}
}

// containerTag is the image the container tests build (once per test
// binary) and TestMain removes.
const containerTag = "localhost/weir:container-test"

var image struct {
	once  sync.Once
	built bool
	err   error
	out   []byte
}

// containerImage skips t unless WEIR_CONTAINER_TESTS=1 and podman is
// installed, and returns the image built by deploy/container/build.sh (as
// version v9.9.9-test, commit c0ffee), built by the first test that asks.
func containerImage(t *testing.T) string {
	t.Helper()
	if os.Getenv("WEIR_CONTAINER_TESTS") != "1" {
		t.Skip("container test: set WEIR_CONTAINER_TESTS=1 (needs podman and runc)")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("container test: podman not installed (apt-get install podman runc)")
	}
	image.once.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			image.err = err
			return
		}
		build := exec.Command(filepath.Join(root, "deploy/container/build.sh"), containerTag)
		build.Env = append(os.Environ(), "VERSION=v9.9.9-test", "COMMIT=c0ffee", "PODMAN_FLAGS=--runtime runc")
		image.out, image.err = build.CombinedOutput()
		image.built = image.err == nil
	})
	if image.err != nil {
		t.Fatalf("build.sh: %v\n%s", image.err, image.out)
	}
	return containerTag
}

// removeContainerImage removes the image if a test built it.
func removeContainerImage() {
	if image.built {
		exec.Command("podman", "rmi", "-f", containerTag).Run()
	}
}
