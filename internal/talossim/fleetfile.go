package talossim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

// FleetFile is the YAML document that describes a fleet: a `machines:` list with the fields of
// Machine in lowerCamel case.
type FleetFile struct {
	Machines []Machine `yaml:"machines"`
}

// DecodeFleet decodes a fleet file strictly (unknown fields are errors) and validates every machine.
func DecodeFleet(r io.Reader) ([]Machine, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)

	var file FleetFile

	if err := dec.Decode(&file); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("failed to decode fleet: the document is empty")
		}

		return nil, fmt.Errorf("failed to decode fleet: %w", err)
	}

	if err := ValidateFleet(file.Machines); err != nil {
		return nil, err
	}

	return file.Machines, nil
}

// ValidateFleet validates every machine and checks that names and node IPs are unique.
func ValidateFleet(machines []Machine) error {
	names := make(map[string]int, len(machines))
	ips := make(map[string]int, len(machines))

	for i, m := range machines {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("machine %d (%q): %w", i, m.Name, err)
		}

		if j, ok := names[m.Name]; ok {
			return fmt.Errorf("machine %d (%q): name already used by machine %d", i, m.Name, j)
		}

		names[m.Name] = i

		for _, ip := range m.NodeIPs {
			if j, ok := ips[ip.String()]; ok {
				return fmt.Errorf("machine %d (%q): node IP %s already used by machine %d", i, m.Name, ip, j)
			}

			ips[ip.String()] = i
		}
	}

	return nil
}

// LoadFleet reads and decodes a fleet file.
func LoadFleet(path string) ([]Machine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read fleet file: %w", err)
	}

	machines, err := DecodeFleet(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	return machines, nil
}

// EncodeFleet writes machines as a fleet file.
func EncodeFleet(w io.Writer, machines []Machine) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)

	if err := enc.Encode(FleetFile{Machines: machines}); err != nil {
		return fmt.Errorf("failed to encode fleet: %w", err)
	}

	if err := enc.Close(); err != nil {
		return fmt.Errorf("failed to encode fleet: %w", err)
	}

	return nil
}
