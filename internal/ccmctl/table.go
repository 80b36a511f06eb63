package ccmctl

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"k8s.io/client-go/util/jsonpath"
)

// emptyCell stands for a column without a value, so that columns stay readable.
const emptyCell = "-"

// column is a print column of a resource definition with its parsed JSONPath.
type column struct {
	path *jsonpath.JSONPath
	name string
}

// Table writes resources as a table: namespace, type, ID, version and the print columns of their
// definition; in watch mode an event column comes first. Rows are aligned among those written between
// two calls of Flush.
type Table struct {
	tw         *tabwriter.Writer
	displayTyp string
	columns    []column
	watch      bool
	header     bool
}

// NewTable returns a table of resources of the type rd defines.
func NewTable(w io.Writer, rd *meta.ResourceDefinitionSpec, watch bool) (*Table, error) {
	t := &Table{
		tw:         tabwriter.NewWriter(w, 0, 8, 3, ' ', 0),
		displayTyp: rd.DisplayType,
		watch:      watch,
	}

	if t.displayTyp == "" {
		t.displayTyp = rd.Type
	}

	for _, pc := range rd.PrintColumns {
		path := jsonpath.New(pc.Name).AllowMissingKeys(true)

		if err := path.Parse(pc.JSONPath); err != nil {
			return nil, fmt.Errorf("failed to parse print column %q of %s: %w", pc.Name, rd.Type, err)
		}

		t.columns = append(t.columns, column{name: pc.Name, path: path})
	}

	return t, nil
}

// Write adds the row of one resource; event is empty outside watch mode.
func (t *Table) Write(event string, r resource.Resource) error {
	if !t.header {
		t.header = true

		head := []string{"NAMESPACE", "TYPE", "ID", "VERSION"}
		if t.watch {
			head = append([]string{"EVENT"}, head...)
		}

		for _, c := range t.columns {
			head = append(head, strings.ToUpper(c.name))
		}

		if err := t.writeRow(head); err != nil {
			return err
		}
	}

	md := r.Metadata()

	row := []string{md.Namespace(), t.displayTyp, md.ID(), md.Version().String()}
	if t.watch {
		row = append([]string{event}, row...)
	}

	if len(t.columns) > 0 {
		spec, err := specValue(r)
		if err != nil {
			return err
		}

		for _, c := range t.columns {
			var buf bytes.Buffer

			if err = c.path.Execute(&buf, spec); err != nil {
				return fmt.Errorf("failed to evaluate column %q of %s %s: %w", c.name, md.Type(), md.ID(), err)
			}

			row = append(row, cell(buf.String()))
		}
	}

	return t.writeRow(row)
}

// Flush writes the buffered rows.
func (t *Table) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	return nil
}

func (t *Table) writeRow(cells []string) error {
	if _, err := fmt.Fprintln(t.tw, strings.Join(cells, "\t")); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	return nil
}

// cell keeps a value on one line and in its column.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return emptyCell
	}

	return s
}
