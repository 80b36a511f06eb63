package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// ClusterFile is one file of the clusters directory: one cluster, named after the file ("demo.yaml" is the
// cluster "demo"), with where its credentials are, what talos-ccm should do for it, and its machines' facts.
type ClusterFile struct {
	// Kubeconfig is the cluster's kubeconfig, relative to the file's directory; empty means $KUBECONFIG.
	// It is read again whenever talos-ccm asks for credentials (on a 401 answer, or on SIGHUP).
	Kubeconfig string `yaml:"kubeconfig"`
	// Cluster is the Cluster resource's spec, with talos-ccm's field names (controllers, hostFacts,
	// config, nodeLifecycle, nodeIPAM, keepResources).
	Cluster *specs.ClusterSpec `yaml:"cluster"`
	// Machines are the machines' facts, in the facts adapter's v1 shape.
	Machines []factsv1.Machine `yaml:"machines"`
}

// clusterFileSuffix ends the name of every cluster file; other files are ignored.
const clusterFileSuffix = ".yaml"

// readClusterFiles reads every cluster file of dir, by cluster name. A file that cannot be read or parsed
// is reported in the error, and left out: the caller keeps that cluster as it was.
func readClusterFiles(dir string) (map[string]*ClusterFile, map[string]error, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read the clusters directory: %w", err)
	}

	files, broken := map[string]*ClusterFile{}, map[string]error{}

	for _, entry := range entries {
		name, ok := strings.CutSuffix(entry.Name(), clusterFileSuffix)
		if !ok || entry.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}

		file, err := readClusterFile(dir, entry.Name(), name)
		if err != nil {
			broken[name] = err

			continue
		}

		files[name] = file
	}

	return files, broken, nil
}

func readClusterFile(dir, base, name string) (*ClusterFile, error) {
	// The name becomes the cluster's ID and namespace prefix in the host's state.
	if err := clusters.ValidateNamespacePrefix(name + clusters.NamespacePrefixSeparator); err != nil {
		return nil, fmt.Errorf("cluster file %s: the name is no cluster name: %w", base, err)
	}

	data, err := os.ReadFile(filepath.Join(dir, base))
	if err != nil {
		return nil, fmt.Errorf("failed to read cluster file %s: %w", base, err)
	}

	var file ClusterFile

	if err = yaml.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("failed to parse cluster file %s: %w", base, err)
	}

	if file.Cluster == nil {
		return nil, errors.New("cluster file " + base + ": no cluster section")
	}

	if file.Kubeconfig != "" && !filepath.IsAbs(file.Kubeconfig) {
		file.Kubeconfig = filepath.Join(dir, file.Kubeconfig)
	}

	return &file, nil
}
