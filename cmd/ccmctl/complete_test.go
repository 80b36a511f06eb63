package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// fakeCompleter lists fixed types and IDs, and the types whose IDs were asked for.
type fakeCompleter struct {
	asked []string
}

func (f *fakeCompleter) Types() []string {
	return []string{"kubenodes", "nodetransforms", "resourcedefinitions"}
}

func (f *fakeCompleter) IDs(typ string) []string {
	f.asked = append(f.asked, typ)

	return []string{"ctl-0", "ctl-1", "worker-0"}
}

func TestComplete(t *testing.T) {
	t.Parallel()

	allCommands := []string{"get", "explain", "config", "completion", "version", "help"}

	for _, tc := range []struct {
		name     string
		words    []string
		want     []string
		wantIDs  []string // the types whose IDs were read
		endpoint string   // the endpoint the connection flags set
	}{
		{name: "nothing typed", words: nil, want: allCommands},
		{name: "commands", words: []string{""}, want: allCommands},
		{name: "a command prefix", words: []string{"co"}, want: []string{"config", "completion"}},
		{name: "types", words: []string{"get", ""}, want: []string{"kubenodes", "nodetransforms", "resourcedefinitions"}},
		{name: "a type prefix", words: []string{"get", "no"}, want: []string{"nodetransforms"}},
		{name: "types after connection flags", words: []string{"--endpoint", "/run/x.sock", "-e", "/run/y.sock", "get", "n"}, want: []string{"nodetransforms"}, endpoint: "/run/y.sock"},
		{name: "types after a flag with its value attached", words: []string{"--endpoint=/run/z.sock", "get", "k"}, want: []string{"kubenodes"}, endpoint: "/run/z.sock"},
		{name: "IDs", words: []string{"get", "nt", "ctl"}, want: []string{"ctl-0", "ctl-1"}, wantIDs: []string{"nt"}},
		{name: "IDs not given yet", words: []string{"get", "nt", "ctl-0", ""}, want: []string{"ctl-1", "worker-0"}, wantIDs: []string{"nt"}},
		{name: "IDs after flags", words: []string{"get", "-o", "yaml", "--watch", "nt", "w"}, want: []string{"worker-0"}, wantIDs: []string{"nt"}},
		{name: "output formats", words: []string{"get", "nt", "-o", ""}, want: []string{"table", "yaml", "json", "jsonpath="}},
		{name: "output format prefix", words: []string{"get", "nt", "--output", "j"}, want: []string{"json", "jsonpath="}},
		{name: "output format with =", words: []string{"get", "nt", "--output=y"}, want: []string{"--output=yaml"}},
		{name: "a flag's free value", words: []string{"get", "nt", "-l", ""}},
		{name: "a file", words: []string{"--tls-ca", ""}},
		{
			name:  "get flags",
			words: []string{"get", "nt", "--"},
			want: []string{
				"--endpoint", "--namespace", "--output", "--selector", "--timeout",
				"--tls-ca", "--tls-cert", "--tls-key", "--tls-server-name", "--watch",
			},
		},
		{name: "a flag prefix", words: []string{"get", "--s"}, want: []string{"--selector"}},
		{name: "connection flags before a command", words: []string{"--t"}, want: []string{"--timeout", "--tls-ca", "--tls-cert", "--tls-key", "--tls-server-name"}},
		{name: "explain", words: []string{"explain", ""}, want: []string{"node"}},
		{name: "explain node", words: []string{"explain", "node", "c"}, want: []string{"ctl-0", "ctl-1"}, wantIDs: []string{"KubeNodes.kube.tccm.dev"}},
		{name: "config", words: []string{"config", ""}, want: []string{"validate", "test"}},
		{name: "config files", words: []string{"config", "validate", ""}},
		{name: "config test flags", words: []string{"config", "test", "--n"}, want: []string{"--node"}},
		{name: "completion", words: []string{"completion", ""}, want: []string{"bash", "fish", "zsh"}},
		{name: "a boolean flag takes no value", words: []string{"get", "-w", ""}, want: []string{"kubenodes", "nodetransforms", "resourcedefinitions"}},
		{name: "a short flag with its value attached", words: []string{"get", "-ojson", ""}, want: []string{"kubenodes", "nodetransforms", "resourcedefinitions"}},
		{name: "nothing after version", words: []string{"version", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			conn := &connection{}
			f := &fakeCompleter{}

			assert.Equal(t, tc.want, nilIfEmpty(complete(conn, tc.words, f)))
			assert.Equal(t, tc.wantIDs, f.asked)
			assert.Equal(t, tc.endpoint, conn.endpoint)
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}

	return s
}
