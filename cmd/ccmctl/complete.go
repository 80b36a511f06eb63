package main

import (
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// commands are ccmctl's commands, as completed after "ccmctl".
var commands = []string{"get", "explain", "config", "completion", "version", "help"}

// completer lists what talos-ccm holds, for completion; nothing when it cannot be read.
type completer interface {
	// Types are the names of the resource types.
	Types() []string
	// IDs are the IDs of the resources of a type (any name the type answers to).
	IDs(typ string) []string
}

// complete returns the completions of the last of words, the arguments of ccmctl being typed (the last
// one, possibly empty, is under the cursor): commands, subcommands, flags, flag values, resource types
// and IDs. None lets the shell complete file names. The flags are read from the flag sets the commands
// parse, so that completion knows every flag a command takes, and which ones take a value. Connection
// flags among words are applied to conn, so that types and IDs are read from the endpoint typed.
func complete(conn *connection, words []string, c completer) []string {
	if len(words) == 0 {
		words = []string{""}
	}

	cur, typed := words[len(words)-1], words[:len(words)-1]

	var (
		args      []string
		valueFlag *pflag.Flag
	)

	for _, w := range typed {
		fs := flagSet(conn, args)

		switch {
		case valueFlag != nil:
			// A value being typed may be wrong: completion goes on.
			_ = valueFlag.Value.Set(w)
			valueFlag = nil
		case strings.HasPrefix(w, "-") && w != "-":
			valueFlag = takesValue(fs, w)
		default:
			args = append(args, w)
		}
	}

	var candidates []string

	switch {
	case valueFlag != nil:
		candidates = flagValues(valueFlag)
	case strings.HasPrefix(cur, "--") && strings.Contains(cur, "="):
		name, _, _ := strings.Cut(strings.TrimPrefix(cur, "--"), "=")
		if f := flagSet(conn, args).Lookup(name); f != nil {
			for _, v := range flagValues(f) {
				candidates = append(candidates, "--"+name+"="+v)
			}
		}
	case strings.HasPrefix(cur, "-"):
		flagSet(conn, args).VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				candidates = append(candidates, "--"+f.Name)
			}
		})
	default:
		candidates = positionals(args, c)
	}

	// Cloned: candidates may be a shared list, such as commands.
	return slices.DeleteFunc(slices.Clone(candidates), func(s string) bool { return !strings.HasPrefix(s, cur) })
}

// takesValue returns the flag that w names when the next word is its value ("-o" or "--output" but not
// "--output=json", "-ojson" or a boolean flag); nil otherwise. A value given with the flag is applied.
func takesValue(fs *pflag.FlagSet, w string) *pflag.Flag {
	var f *pflag.Flag

	name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")

	switch {
	case strings.HasPrefix(w, "--"):
		f = fs.Lookup(name)
	case name != "":
		f = fs.ShorthandLookup(name[:1])
		if len(name) > 1 {
			value, hasValue = strings.TrimPrefix(name[1:], "="), true
		}
	}

	if f == nil || f.NoOptDefVal != "" {
		return nil
	}

	if hasValue {
		_ = f.Value.Set(value)

		return nil
	}

	return f
}

// flagValues are the values a flag is completed with; none for free values and files.
func flagValues(f *pflag.Flag) []string {
	if f.Name == "output" {
		return []string{ccmctl.OutputTable, ccmctl.OutputYAML, ccmctl.OutputJSON, ccmctl.OutputJSONPath}
	}

	return nil
}

// positionals completes the next argument after args.
func positionals(args []string, c completer) []string {
	if len(args) == 0 {
		return commands
	}

	switch args[0] {
	case "get":
		if len(args) == 1 {
			return c.Types()
		}

		return slices.DeleteFunc(c.IDs(args[1]), func(id string) bool { return slices.Contains(args[2:], id) })
	case "explain":
		switch len(args) {
		case 1:
			return []string{"node"}
		case 2:
			return c.IDs(kube.KubeNodeType)
		}
	case "config":
		if len(args) == 1 {
			return []string{"validate", "test"}
		}
	case "completion":
		if len(args) == 1 {
			return slices.Sorted(maps.Keys(completionScripts))
		}
	}

	return nil
}

// flagSet is the flag set of the command that args start, the connection flags before a command.
func flagSet(conn *connection, args []string) *pflag.FlagSet {
	command := ""
	if len(args) > 0 {
		command = args[0]
	}

	switch command {
	case "get":
		var (
			opts     ccmctl.GetOptions
			selector string
		)

		return getFlags(conn, &opts, &selector)
	case "config":
		if len(args) > 1 && args[1] == "test" {
			var node string

			return configTestFlags(conn, &node)
		}

		return commandFlags(conn, "config")
	case "":
		return conn.flags()
	default:
		return commandFlags(conn, command)
	}
}
