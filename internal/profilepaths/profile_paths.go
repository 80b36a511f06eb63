// Package profilepaths rewrites the file paths a Go profile names, so that profiles and goroutine dumps
// kept in the repository name no directory of the machine that made them.
//
// A profile served by net/http/pprof names the binary it was taken of by its path on that machine (its
// mappings), and the source files of a binary built without -trimpath by theirs. The benches build their
// binaries with -trimpath and keep their profiles through Rewrite, which gives every absolute path in the
// profile's string table the name the rewrite function returns (Base: the file's name alone).
package profilepaths

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// stringTable is the field number of the profile's string table (perftools.profiles.Profile).
const stringTable = 6

// Base names an absolute path by its file name alone.
func Base(path string) string {
	return filepath.Base(path)
}

// Rewrite returns the profile (gzip-compressed protobuf, as net/http/pprof serves it) with every absolute
// path of its string table replaced by name(path); every other field is kept byte for byte.
func Rewrite(profile []byte, name func(string) string) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(profile))
	if err != nil {
		return nil, fmt.Errorf("failed to read the profile: %w", err)
	}

	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("failed to read the profile: %w", err)
	}

	var out []byte

	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return nil, fmt.Errorf("failed to read the profile: %w", protowire.ParseError(n))
		}

		m := protowire.ConsumeFieldValue(num, typ, raw[n:])
		if m < 0 {
			return nil, fmt.Errorf("failed to read the profile: %w", protowire.ParseError(m))
		}

		field := raw[:n+m]
		raw = raw[n+m:]

		if num == stringTable && typ == protowire.BytesType {
			s, _ := protowire.ConsumeString(field[n:])
			if strings.HasPrefix(s, "/") {
				out = protowire.AppendTag(out, num, typ)
				out = protowire.AppendString(out, name(s))

				continue
			}
		}

		out = append(out, field...)
	}

	var buf bytes.Buffer

	zw := gzip.NewWriter(&buf)
	if _, err = zw.Write(out); err != nil {
		return nil, fmt.Errorf("failed to write the profile: %w", err)
	}

	if err = zw.Close(); err != nil {
		return nil, fmt.Errorf("failed to write the profile: %w", err)
	}

	return buf.Bytes(), nil
}
