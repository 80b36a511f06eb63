package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/state"

	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
)

// completeCommand is the hidden command that the completion scripts call with the words typed; it prints
// the completions, one a line.
const completeCommand = "__complete"

// completeTimeout bounds the reads of a completion: a shell waits for it.
const completeTimeout = 2 * time.Second

// completionScripts are the completion scripts by shell. Each hands the words typed to ccmctl
// __complete (so the scripts stay small and every shell completes alike) and falls back to file
// names when it prints nothing.
var completionScripts = map[string]string{
	"bash": `# bash completion for ccmctl: source <(ccmctl completion bash)
_ccmctl() {
    local line="${COMP_LINE:0:COMP_POINT}" cur="${COMP_WORDS[COMP_CWORD]}" c
    local -a words
    read -r -a words <<<"$line"
    [[ -z "$line" || "$line" =~ [[:space:]]$ ]] && words+=("")
    local word="${words[${#words[@]}-1]}" prefix=""
    # bash splits the word under the cursor at "=" (COMP_WORDBREAKS): answer from there on.
    if [[ "$cur" == "=" ]]; then
        prefix="${word%=*}"
    elif [[ "$cur" != "$word" && "$word" == *=* ]]; then
        prefix="${word%=*}="
    fi
    COMPREPLY=()
    local IFS=$'\n'
    for c in $("${words[0]}" __complete "${words[@]:1}" 2>/dev/null); do
        COMPREPLY+=("${c#"$prefix"}")
    done
    # A value to go on typing (jsonpath=) takes no space after it.
    [[ ${#COMPREPLY[@]} -eq 1 && "${COMPREPLY[0]}" == *= ]] && compopt -o nospace
}
complete -o default -F _ccmctl ccmctl
`,
	"zsh": `#compdef ccmctl
# zsh completion for ccmctl: source <(ccmctl completion zsh), or save as _ccmctl in $fpath
_ccmctl() {
    local -a candidates
    candidates=("${(@f)$(${words[1]} __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    candidates=(${candidates:#})
    if (( ${#candidates} == 0 )); then
        _files
    else
        compadd -Q -- "${candidates[@]}"
    fi
}
if [[ "$funcstack[1]" == _ccmctl ]]; then
    _ccmctl "$@"
else
    compdef _ccmctl ccmctl
fi
`,
	"fish": `# fish completion for ccmctl: ccmctl completion fish | source
function __ccmctl_complete
    set -l words (commandline -opc)
    set -l cmd $words[1]
    set -e words[1]
    set -l cur (commandline -ct)
    set -l out ($cmd __complete $words "$cur" 2>/dev/null)
    if test (count $out) -eq 0
        __fish_complete_path "$cur"
    else
        printf '%s\n' $out
    end
end
complete -c ccmctl -f -a '(__ccmctl_complete)'
`,
}

// writeCompletionScript writes the completion script of shell.
func writeCompletionScript(w io.Writer, shell string) error {
	script, ok := completionScripts[shell]
	if !ok {
		return usageError{msg: fmt.Sprintf("no completion for shell %q (want %s)", shell, strings.Join(slices.Sorted(maps.Keys(completionScripts)), ", "))}
	}

	if _, err := io.WriteString(w, script); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	return nil
}

// writeCompletions writes the completions of words, one a line. It never fails: a completion that
// cannot read talos-ccm offers less.
func writeCompletions(ctx context.Context, conn *connection, words []string, w io.Writer) error {
	c := &apiCompleter{ctx: ctx, conn: conn}
	defer c.close()

	for _, s := range complete(conn, words, c) {
		fmt.Fprintln(w, s)
	}

	return nil
}

// apiCompleter reads types and IDs from the API, connecting on first use. Without an API, the types are
// those this ccmctl was built with.
type apiCompleter struct {
	ctx     context.Context //nolint:containedctx // one completion, which lives as long as its context.
	conn    *connection
	st      state.State
	closeFn func()
	defs    []*meta.ResourceDefinition
	live    bool
	tried   bool
}

func (c *apiCompleter) state() state.State {
	if !c.tried {
		c.tried = true

		if st, closeFn, err := c.conn.open(); err == nil {
			c.st, c.closeFn = st, closeFn
		}
	}

	return c.st
}

func (c *apiCompleter) close() {
	if c.closeFn != nil {
		c.closeFn()
	}
}

// definitions are the API's resource definitions (live), else the built-in ones.
func (c *apiCompleter) definitions() (defs []*meta.ResourceDefinition, live bool) {
	if c.defs == nil {
		c.defs, c.live = c.readDefinitions()
	}

	return c.defs, c.live
}

func (c *apiCompleter) readDefinitions() ([]*meta.ResourceDefinition, bool) {
	if st := c.state(); st != nil {
		ctx, cancel := context.WithTimeout(c.ctx, completeTimeout)
		defer cancel()

		if defs, err := ccmctl.ListDefinitions(ctx, st); err == nil {
			return defs, true
		}
	}

	defs, err := ccmctl.BuiltinDefinitions()
	if err != nil {
		return nil, false
	}

	return defs, false
}

// Types implements completer: the lower-case plural of each type, as kubectl completes.
func (c *apiCompleter) Types() []string {
	defs, _ := c.definitions()

	out := make([]string, 0, len(defs))
	for _, rd := range defs {
		plural, _, _ := strings.Cut(rd.TypedSpec().Type, ".")
		out = append(out, strings.ToLower(plural))
	}

	slices.Sort(out)

	return slices.Compact(out)
}

// IDs implements completer.
func (c *apiCompleter) IDs(typ string) []string {
	defs, live := c.definitions()
	if !live {
		return nil
	}

	rd, err := ccmctl.ResolveType(defs, typ)
	if err != nil {
		return nil
	}

	ctx, cancel := context.WithTimeout(c.ctx, completeTimeout)
	defer cancel()

	spec := rd.TypedSpec()

	list, err := c.st.List(ctx, resource.NewMetadata(spec.DefaultNamespace, spec.Type, "", resource.VersionUndefined))
	if err != nil {
		return nil
	}

	ids := make([]string, 0, len(list.Items))
	for _, r := range list.Items {
		ids = append(ids, r.Metadata().ID())
	}

	return ids
}
