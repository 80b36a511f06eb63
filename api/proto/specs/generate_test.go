package specs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code from the .proto files and fails when the committed
// files differ: run `make generate` after editing api/proto.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc not installed (Debian package protobuf-compiler): cannot check that the generated code is current")
	}

	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}

	bin := t.TempDir()

	for name, pkg := range map[string]string{
		"protoc-gen-go":         "google.golang.org/protobuf/cmd/protoc-gen-go",
		"protoc-gen-go-vtproto": "github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto",
	} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		build.Dir = root

		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("failed to build %s: %v\n%s", name, err, out)
		}
	}

	out := t.TempDir()
	protos, err := filepath.Glob(filepath.Join(root, "api/proto/specs/*.proto"))
	if err != nil || len(protos) == 0 {
		t.Fatalf("no proto files found: %v", err)
	}

	args := append([]string{
		"--proto_path=" + filepath.Join(root, "api/proto"),
		"--go_out=" + out, "--go_opt=module=github.com/talos-ccm/talos-ccm",
		"--go-vtproto_out=" + out, "--go-vtproto_opt=module=github.com/talos-ccm/talos-ccm,features=clone+equal",
	}, protos...)

	protoc := exec.Command("protoc", args...)
	protoc.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	if msg, err := protoc.CombinedOutput(); err != nil {
		t.Fatalf("protoc failed: %v\n%s", err, msg)
	}

	generated, err := filepath.Glob(filepath.Join(out, "api/proto/specs/*.pb.go"))
	// Two files per .proto: the messages, and their CloneVT and EqualVT methods (_vtproto.pb.go).
	if err != nil || len(generated) != 2*len(protos) {
		t.Fatalf("expected %d generated files, got %v (%v)", 2*len(protos), generated, err)
	}

	for _, g := range generated {
		want, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}

		committed := filepath.Join(root, "api/proto/specs", filepath.Base(g))

		got, err := os.ReadFile(committed)
		if err != nil {
			t.Fatalf("generated file %s is not committed: run make generate", filepath.Base(g))
		}

		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make generate", filepath.Base(g))
		}
	}
}
