package main

import (
	"debug/elf"
	"fmt"
	"os"
)

// binarySize is the size of the talos-ccm binary: on disk, and its code and read-only data (its executable
// and read-only loadable segments), which the kernel pages in as the process touches them and counts in
// its resident memory (the "binary's pages" of the report).
type binarySize struct {
	file, code, rodata int64
}

// readBinarySize reads the size of the binary at path; code and rodata are zero for a binary that is not
// ELF.
func readBinarySize(path string) (binarySize, error) {
	info, err := os.Stat(path)
	if err != nil {
		return binarySize{}, fmt.Errorf("failed to read the size of %s: %w", path, err)
	}

	size := binarySize{file: info.Size()}

	f, err := elf.Open(path)
	if err != nil {
		return size, nil //nolint:nilerr // not ELF: its segments are unknown, its size is not
	}

	defer f.Close() //nolint:errcheck

	for _, prog := range f.Progs {
		if prog.Type != elf.PT_LOAD {
			continue
		}

		switch {
		case prog.Flags&elf.PF_X != 0:
			size.code += int64(prog.Filesz)
		case prog.Flags&elf.PF_W == 0:
			size.rodata += int64(prog.Filesz)
		}
	}

	return size, nil
}

// String implements fmt.Stringer.
func (s binarySize) String() string {
	return fmt.Sprintf("%s / %s / %s", mib(float64(s.file)), mib(float64(s.code)), mib(float64(s.rodata)))
}
