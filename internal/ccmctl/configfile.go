package ccmctl

import (
	"fmt"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
)

// LoadConfigFile reads and validates a config file exactly as talos-ccm does, so that its messages are
// the service's.
func LoadConfigFile(path string) (*specs.ConfigSpec, error) {
	return configfile.Load(path)
}

// ValidateConfigFile validates a config file offline and describes a valid one in one line.
func ValidateConfigFile(path string) (string, error) {
	cfg, err := LoadConfigFile(path)
	if err != nil {
		return "", err
	}

	return fmt.Sprintf("%s: valid: %s", path, summary(cfg)), nil
}
