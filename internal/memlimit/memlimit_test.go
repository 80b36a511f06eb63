package memlimit

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "max\n", want: 0},
		{in: "536870912\n", want: 512 << 20},
		{in: "9223372036854771712\n", want: 0}, // cgroup v1 without a limit
		{in: "0", want: 0},
		{in: "lots", bad: true},
		{in: "", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseLimit(tc.in)
			if tc.bad {
				require.Error(t, err)

				return
			}

			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestReadCgroupLimit(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(path string) ([]byte, error) {
			if v, ok := m[path]; ok {
				return []byte(v), nil
			}

			return nil, fs.ErrNotExist
		}
	}

	limit, err := readCgroupLimit(files(map[string]string{cgroupFiles[0]: "1073741824\n"}))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<30), limit)

	limit, err = readCgroupLimit(files(map[string]string{cgroupFiles[1]: "268435456\n"}))
	require.NoError(t, err)
	assert.Equal(t, int64(256<<20), limit)

	limit, err = readCgroupLimit(files(nil))
	require.NoError(t, err)
	assert.Zero(t, limit)

	_, err = readCgroupLimit(files(map[string]string{cgroupFiles[0]: "garbage"}))
	require.ErrorContains(t, err, cgroupFiles[0])

	_, err = readCgroupLimit(func(string) ([]byte, error) { return nil, errors.New("permission denied") })
	require.ErrorContains(t, err, "permission denied")

	assert.Equal(t, int64(900<<20), Soft(1000<<20))
}
