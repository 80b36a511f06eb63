package dirty_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/dirty"
)

func TestSet(t *testing.T) {
	t.Parallel()

	s := dirty.New()

	s.Add("a", "b")
	s.Add("a")

	<-s.Ready()

	got := s.Take()
	slices.Sort(got)
	require.Equal(t, []string{"a", "b"}, got)
	require.Empty(t, s.Take())

	select {
	case <-s.Ready():
		t.Fatal("no notification expected after a drain without adds")
	default:
	}
}
