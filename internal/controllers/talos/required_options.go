package talos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// requireDurations names the options (by field name) that are not set. The Talos sources have no defaults
// of their own: pkg/ccm's DefaultOptions is the one place they are written, so a zero here is a caller that
// forgot one, which a source would otherwise turn into a busy loop or a call without a deadline.
func requireDurations(named map[string]time.Duration) error {
	var unset []string

	for _, name := range slices.Sorted(maps.Keys(named)) {
		if named[name] <= 0 {
			unset = append(unset, name)
		}
	}

	if len(unset) > 0 {
		return fmt.Errorf("options not set: %s", strings.Join(unset, ", "))
	}

	return nil
}
