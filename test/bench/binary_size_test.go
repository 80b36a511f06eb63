package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadBinarySize(t *testing.T) {
	t.Parallel()

	self, err := os.Executable()
	require.NoError(t, err)

	size, err := readBinarySize(self)
	require.NoError(t, err)

	info, err := os.Stat(self)
	require.NoError(t, err)
	assert.Equal(t, info.Size(), size.file)
	assert.Positive(t, size.code, "a Go test binary has code")
	assert.Positive(t, size.rodata, "and read-only data")
	assert.Less(t, size.code+size.rodata, size.file)

	text := filepath.Join(t.TempDir(), "not-elf")
	require.NoError(t, os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755))

	size, err = readBinarySize(text)
	require.NoError(t, err)
	assert.Equal(t, binarySize{file: 10}, size)

	_, err = readBinarySize(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
}
