// Package controllers_test checks the layering of the controller packages.
package controllers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/talos-ccm/talos-ccm/"

// assemblers may import the controllers of every group: they wire the pipeline together. The talos-ccm
// service (internal/app) assembles itself through pkg/ccm, as a host does, and the CLI (internal/ccmctl)
// imports what it shares with the controllers (the NodeTransform decision, the config merge, the Kubernetes
// keys) from leaf packages: neither imports a controller package.
var assemblers = []string{module + "pkg/ccm"}

// shared are packages under internal/controllers that are not a group: test helpers and internal helpers
// every group may use.
var shared = []string{module + "internal/controllers/ctest", module + "internal/controllers/internal"}

// reachesUp lists, for the packages of the embedding layers, the packages they must not import, in their
// code or their tests (a path ending in "/" stands for everything under it): the COSI state wrappers sit
// below every controller and every assembler; pkg/ccm, the embedding API, sits below the management of
// many clusters, which builds every cluster's pipeline through pkg/ccm alone, never from controllers.
var reachesUp = map[string][]string{
	module + "internal/cosistate": {
		module + "internal/controllers/", module + "internal/k8ssink", module + "internal/app", module + "pkg/",
	},
	module + "pkg/ccm":          {module + "pkg/ccm/clusters"},
	module + "pkg/ccm/clusters": {module + "internal/controllers/", module + "internal/k8ssink", module + "internal/app"},
}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// controllerGroup returns the group of a controller package ("node" for internal/controllers/node), or "".
func controllerGroup(path string) string {
	rest, ok := strings.CutPrefix(path, module+"internal/controllers/")
	if !ok {
		return ""
	}

	for _, s := range shared {
		if path == s || strings.HasPrefix(path, s+"/") {
			return ""
		}
	}

	group, _, _ := strings.Cut(rest, "/")

	return group
}

// layerViolations lists the imports of controller packages of another group by packages that are not
// assemblers: the vocabulary a layer shares belongs in internal/resources/<group> or a leaf package.
func layerViolations(pkgs []listedPackage) []string {
	var out []string

	for _, p := range pkgs {
		if slices.Contains(assemblers, p.ImportPath) {
			continue
		}

		own := controllerGroup(p.ImportPath)

		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if g := controllerGroup(imp); g != "" && g != own {
				out = append(out, p.ImportPath+" imports "+imp)
			}
		}
	}

	slices.Sort(out)

	return slices.Compact(out)
}

// upwardImports lists the imports that reachesUp forbids.
func upwardImports(pkgs []listedPackage) []string {
	var out []string

	for _, p := range pkgs {
		forbidden := reachesUp[p.ImportPath]

		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			for _, f := range forbidden {
				if imp == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(imp, f)) {
					out = append(out, p.ImportPath+" imports "+imp)
				}
			}
		}
	}

	slices.Sort(out)

	return slices.Compact(out)
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()

	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command lists the packages")

	cmd := exec.CommandContext(t.Context(), goBin, "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = filepath.Join("..", "..")

	var stderr bytes.Buffer

	cmd.Stderr = &stderr

	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())

	var pkgs []listedPackage

	dec := json.NewDecoder(bytes.NewReader(out))

	for {
		var p listedPackage

		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}

		require.NoError(t, err)

		pkgs = append(pkgs, p)
	}

	return pkgs
}

// TestLayers keeps the layers: no package outside the assemblers imports a controller package of another
// group, in its code or its tests.
func TestLayers(t *testing.T) {
	t.Parallel()

	pkgs := listPackages(t)

	var paths []string
	for _, p := range pkgs {
		paths = append(paths, p.ImportPath)
	}

	// The listing covers the module: a wrong directory would list nothing and pass.
	require.Contains(t, paths, module+"internal/k8ssink")
	require.Contains(t, paths, module+"internal/controllers/node")

	for path := range reachesUp {
		require.Contains(t, paths, path)
	}

	assert.Empty(t, layerViolations(pkgs))
	assert.Empty(t, upwardImports(pkgs))
}

// TestLayerViolations shows that the check finds what it is there to find.
func TestLayerViolations(t *testing.T) {
	t.Parallel()

	pkgs := []listedPackage{
		{ImportPath: module + "internal/k8ssink", Imports: []string{module + "internal/controllers/csr", module + "internal/resources/csr"}},
		{ImportPath: module + "internal/configfile", XTestImports: []string{module + "internal/controllers/node"}},
		{ImportPath: module + "internal/controllers/ipam", Imports: []string{module + "internal/controllers/node/sub"}},
		{ImportPath: module + "internal/controllers/node", TestImports: []string{module + "internal/controllers/node", module + "internal/controllers/ctest"}},
		{ImportPath: module + "internal/controllers/kube", Imports: []string{module + "internal/controllers/internal/dirty"}},
		{ImportPath: module + "pkg/ccm", Imports: []string{module + "internal/controllers/talos"}},
		{ImportPath: module + "internal/ccmctl", Imports: []string{module + "internal/nodetransform", module + "internal/controllers/node"}},
		{ImportPath: module + "internal/app", Imports: []string{module + "pkg/ccm"}, TestImports: []string{module + "internal/controllers/config"}},
	}

	assert.Equal(t, []string{
		module + "internal/app imports " + module + "internal/controllers/config",
		module + "internal/ccmctl imports " + module + "internal/controllers/node",
		module + "internal/configfile imports " + module + "internal/controllers/node",
		module + "internal/controllers/ipam imports " + module + "internal/controllers/node/sub",
		module + "internal/k8ssink imports " + module + "internal/controllers/csr",
	}, layerViolations(pkgs))
}

// TestUpwardImports shows that the check of the embedding layers finds what it is there to find.
func TestUpwardImports(t *testing.T) {
	t.Parallel()

	pkgs := []listedPackage{
		{ImportPath: module + "internal/cosistate", XTestImports: []string{module + "internal/controllers/node", module + "internal/resources/node"}},
		{ImportPath: module + "pkg/ccm", Imports: []string{module + "internal/controllers/talos", module + "pkg/ccm/factsv1"}, TestImports: []string{module + "pkg/ccm/clusters"}},
		{ImportPath: module + "pkg/ccm/clusters", Imports: []string{module + "pkg/ccm", module + "internal/cosistate", module + "internal/k8ssink"}},
		{ImportPath: module + "internal/app", Imports: []string{module + "pkg/ccm/clusters"}},
	}

	assert.Equal(t, []string{
		module + "internal/cosistate imports " + module + "internal/controllers/node",
		module + "pkg/ccm imports " + module + "pkg/ccm/clusters",
		module + "pkg/ccm/clusters imports " + module + "internal/k8ssink",
	}, upwardImports(pkgs))
}
