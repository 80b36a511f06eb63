package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersionCommand(t *testing.T) {
	t.Parallel()

	var stdout, stderr bytes.Buffer

	require.Equal(t, exitOK, run(t.Context(), []string{"version"}, &stdout, &stderr), stderr.String())
	assert.Regexp(t, `^ccmctl \S+ \(commit \S+, go\S+, \S+/\S+\)\n$`, stdout.String())

	stdout.Reset()
	assert.Equal(t, exitUsage, run(t.Context(), []string{"version", "extra"}, &stdout, &stderr))
}
