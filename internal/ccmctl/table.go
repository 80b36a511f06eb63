package ccmctl

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"k8s.io/client-go/util/jsonpath"
)

// emptyCell stands for a column without a value, so that columns stay readable.
const emptyCell = "-"

// columnGap is the space between two columns.
const columnGap = 3

// column is a print column of a resource definition with its parsed JSONPath.
type column struct {
	path *jsonpath.JSONPath
	name string
}

// Table writes resources as a table: namespace, type, ID, version and the print columns of their
// definition; in watch mode an event column comes first. Each column is as wide as its widest value among
// the rows of the first Flush, the header's included. Later rows (a watch's events, written one at a time)
// keep those widths, so that they stay under the header: a longer value takes the space before the next
// column, and only its own row moves.
type Table struct {
	out        io.Writer
	displayTyp string
	columns    []column
	rows       [][]string
	widths     []int
	watch      bool
	header     bool
	flushed    bool
}

// NewTable returns a table of resources of the type rd defines.
func NewTable(w io.Writer, rd *meta.ResourceDefinitionSpec, watch bool) (*Table, error) {
	t := &Table{
		out:        w,
		displayTyp: rd.DisplayType,
		watch:      watch,
	}

	if t.displayTyp == "" {
		t.displayTyp = rd.Type
	}

	if watch {
		// The event column is as wide as the longest event from the start, so that a later event does
		// not push its row out of line.
		t.widths = []int{max(len(EventCreated), len(EventUpdated), len(EventDestroyed))}
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

		t.addRow(head)
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

	t.addRow(row)

	return nil
}

// Flush writes the buffered rows.
func (t *Table) Flush() error {
	var buf bytes.Buffer

	for _, row := range t.rows {
		writeRow(&buf, row, t.widths)
	}

	t.rows = nil
	t.flushed = true

	if _, err := t.out.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	return nil
}

func (t *Table) addRow(cells []string) {
	if !t.flushed {
		t.widths = columnWidths(t.widths, cells)
	}

	t.rows = append(t.rows, cells)
}

// columnWidths widens the columns of widths that cells need to. A width is counted in characters (runes),
// not bytes, so that a value with accents does not push its column out of line.
func columnWidths(widths []int, cells []string) []int {
	for i, c := range cells {
		if i == len(widths) {
			widths = append(widths, 0)
		}

		widths[i] = max(widths[i], utf8.RuneCountInString(c))
	}

	return widths
}

// writeRow writes cells in columns of widths, columnGap apart. A cell longer than its column pushes the
// next one right, by at least one space, and the row catches up with the columns where it can; the last
// cell is not padded, so that no line ends in spaces.
func writeRow(buf *bytes.Buffer, cells []string, widths []int) {
	pos, start := 0, 0

	for i, c := range cells {
		if i > 0 {
			pad := max(start-pos, 1)
			buf.WriteString(strings.Repeat(" ", pad))
			pos += pad
		}

		buf.WriteString(c)
		pos += utf8.RuneCountInString(c)

		if i < len(widths) {
			start += widths[i] + columnGap
		} else {
			start = pos + columnGap
		}
	}

	buf.WriteByte('\n')
}

// cell keeps a value on one line and in its column.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return emptyCell
	}

	return s
}
