package dockertest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// File is a file of a build context besides the binary BuildStaticImage puts there:
// Name is its path in the context, Mode 0o644 when zero.
type File struct {
	Name string
	Mode int64
	Body []byte
}

// BuildStaticImage builds the Go command in the folder pkgDir as a static Linux binary,
// named after the folder, and builds it with dockerfile and files into an image
// repo:test-<random> of its own on cli's engine. It uses the engine's classic builder,
// so a FROM scratch image needs no registry and no BuildKit. It returns the image's
// name; the image is removed when the test ends.
func BuildStaticImage(tb testing.TB, cli *client.Client, repo, pkgDir, dockerfile string, files ...File) string {
	tb.Helper()
	name := filepath.Base(pkgDir)
	bin := filepath.Join(tb.TempDir(), name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build %s: %v\n%s", pkgDir, err, out)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		tb.Fatal(err)
	}
	files = append([]File{{Name: "Dockerfile", Body: []byte(dockerfile)}, {Name: name, Mode: 0o755, Body: binary}}, files...)
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	for _, f := range files {
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.Name, Mode: mode, Size: int64(len(f.Body))}); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write(f.Body); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	ref := repo + ":test-" + RandomHex(tb, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := cli.ImageBuild(ctx, &ctxTar, build.ImageBuildOptions{Tags: []string{ref}, Version: build.BuilderV1, Remove: true, ForceRemove: true})
	if err != nil {
		tb.Fatalf("build image %s: %v", ref, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) == nil && msg.Error != "" {
			tb.Fatalf("build image %s: %s", ref, msg.Error)
		}
	}
	tb.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return ref
}
