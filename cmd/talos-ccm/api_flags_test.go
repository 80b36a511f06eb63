package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/api"
)

func TestAPIListenDefault(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "default state directory", want: "state/ccm.sock"},
		{name: "state directory", args: []string{"--state-dir=/var/lib/talos-ccm"}, want: "/var/lib/talos-ccm/ccm.sock"},
		{name: "no state directory", args: []string{"--state-dir="}, want: api.DefaultSocket("")},
		{name: "explicit socket", args: []string{"--api-listen=/run/ccm.sock"}, want: "/run/ccm.sock"},
		{name: "tcp", args: []string{"--api-listen=tcp://:50100"}, want: "tcp://:50100"},
		{name: "disabled", args: []string{"--api-listen="}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			opts, _, err := parseFlags(tc.args)
			require.NoError(t, err)
			assert.Equal(t, tc.want, opts.APIListen)
		})
	}
}
