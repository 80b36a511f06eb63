package ccm_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The exported API of the embedding packages, and the change log that names it (see the policy in doc.go).
const (
	modulePath    = "github.com/talos-ccm/talos-ccm"
	apiGolden     = "testdata/api.txt"
	apiChangeLog  = "API_CHANGES.md"
	apiHashPrefix = "API sha256: "
	// apiUpdate is the command that writes apiGolden again.
	apiUpdate = "go test ./pkg/ccm -run TestExportedAPI -update"
)

// apiPackages are the packages whose exported API apiGolden records, as directories relative to this one.
var apiPackages = []string{".", "clusters", "factsv1"}

var updateAPI = flag.Bool("update", false, "write "+apiGolden+" from the exported API of pkg/ccm and its subpackages")

// TestExportedAPI: the exported API of pkg/ccm, pkg/ccm/clusters and pkg/ccm/factsv1 is the one recorded in
// testdata/api.txt, and the newest entry of API_CHANGES.md names it by its hash, so that no change of the
// API goes without a note that says what changed and whether it keeps the promise of the policy.
func TestExportedAPI(t *testing.T) {
	t.Parallel()

	api, err := renderAPI(apiPackages)
	if err != nil {
		t.Fatalf("failed to render the exported API: %v", err)
	}

	if *updateAPI {
		if err = os.WriteFile(apiGolden, api, 0o644); err != nil {
			t.Fatalf("failed to write %s: %v", apiGolden, err)
		}
	}

	golden, err := os.ReadFile(apiGolden)
	if err != nil {
		t.Fatalf("failed to read %s (write it with `%s`): %v", apiGolden, apiUpdate, err)
	}

	if !bytes.Equal(api, golden) {
		t.Fatalf("the exported API of pkg/ccm changed:\n%s\n"+
			"If the change is intended, run `%s`, then write the change in pkg/ccm/%s (see the policy in "+
			"pkg/ccm/doc.go) with the line the test then asks for.",
			lineDiff(string(golden), string(api)), apiUpdate, apiChangeLog)
	}

	hash := apiHash(golden)

	named, err := newestAPIHash(apiChangeLog)
	if err != nil {
		t.Fatalf("failed to read %s: %v", apiChangeLog, err)
	}

	if named != hash {
		t.Fatalf("the newest entry of pkg/ccm/%s names the API %q, but pkg/ccm/%s is %q: say in it what changed in "+
			"the exported API and whether it is compatible (the policy in pkg/ccm/doc.go), and end its API line "+
			"with the new hash:\n\n%s%s\n\n(add to the newest entry if it is not released yet, else start a new one)",
			apiChangeLog, named, apiGolden, hash, apiHashPrefix, hash)
	}
}

// TestExamplesNeedNoInternalPackage: the examples are what a host in another module can write: they import
// no internal package of the module.
func TestExamplesNeedNoInternalPackage(t *testing.T) {
	t.Parallel()

	public := []string{"pkg/ccm", "pkg/ccm/clusters", "pkg/ccm/factsv1", "api/proto/specs"}

	for _, dir := range apiPackages {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "example_test.go"), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("failed to parse the examples of %s: %v", dir, err)
		}

		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value) // The parser checked the quotes.
			if rel, ok := strings.CutPrefix(p, modulePath+"/"); ok && !slices.Contains(public, rel) {
				t.Errorf("the examples of %s import %s: a host outside the module cannot", dir, p)
			}
		}
	}
}

// apiHash names a rendering of the API: the first 12 hex digits of its SHA-256.
func apiHash(api []byte) string {
	sum := sha256.Sum256(api)

	return hex.EncodeToString(sum[:])[:12]
}

// newestAPIHash returns the hash that the newest entry (the first "## " section) of the change log names.
func newestAPIHash(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close() //nolint:errcheck // Read only.

	sections := 0

	for s := bufio.NewScanner(f); s.Scan(); {
		line := strings.TrimSpace(s.Text())

		if strings.HasPrefix(line, "## ") {
			if sections++; sections > 1 {
				break
			}
		}

		if hash, ok := strings.CutPrefix(line, apiHashPrefix); ok && sections == 1 {
			return strings.TrimSpace(hash), nil
		}
	}

	return "", fmt.Errorf("no line %q in its newest entry (the first ## section)", apiHashPrefix+"...")
}

// lineDiff lists the lines only in want (-) and only in got (+): the rendering is sorted, one declaration a
// line, so that is the change.
func lineDiff(want, got string) string {
	wantLines, gotLines := strings.Split(want, "\n"), strings.Split(got, "\n")

	var b strings.Builder

	for _, l := range wantLines {
		if !slices.Contains(gotLines, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}

	for _, l := range gotLines {
		if !slices.Contains(wantLines, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}

	return b.String()
}

// renderAPI renders the exported declarations of the packages in dirs (relative to this package), one a
// line, sorted within each package: constants (with the string or number they stand for when they name another constant of
// the module), variables, functions and methods with their signatures (parameter names left out: renaming
// one changes nothing for a caller), types, their exported fields with their tags (factsv1's JSON and YAML
// names are its schema) and the methods of their interfaces.
func renderAPI(dirs []string) ([]byte, error) {
	var lines []string

	for _, dir := range dirs {
		pkg, err := parseAPIPackage(dir)
		if err != nil {
			return nil, err
		}

		rendered := pkg.render()
		slices.Sort(rendered)
		lines = append(lines, rendered...)
	}

	header := "# The exported API of pkg/ccm, pkg/ccm/clusters and pkg/ccm/factsv1, as TestExportedAPI renders it.\n" +
		"# Do not edit: `" + apiUpdate + "` writes it; name its new hash in API_CHANGES.md.\n"

	return []byte(header + strings.Join(lines, "\n") + "\n"), nil
}

// apiPackage is one parsed package of the API.
type apiPackage struct {
	fset *token.FileSet
	// name is the package's import path below the module ("pkg/ccm/clusters").
	name  string
	files []*ast.File
	// consts resolves the values of constants across the module's packages.
	consts *constResolver
}

func parseAPIPackage(dir string) (*apiPackage, error) {
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, fmt.Errorf("failed to find the Go files of %s: %w", dir, err)
	}

	p := &apiPackage{fset: token.NewFileSet(), name: path.Join("pkg/ccm", filepath.ToSlash(dir))}

	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(p.fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("failed to parse %s: %w", name, err)
		}

		p.files = append(p.files, f)
	}

	p.consts = &constResolver{root: filepath.Join("..", ".."), packages: map[string]map[string]constDecl{}}
	p.consts.packages[p.name] = constsOf(p.files)

	return p, nil
}

func (p *apiPackage) render() []string {
	var lines []string

	add := func(format string, args ...any) {
		lines = append(lines, p.name+": "+fmt.Sprintf(format, args...))
	}

	for _, f := range p.files {
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if !decl.Name.IsExported() {
					continue
				}

				if decl.Recv == nil {
					add("func %s%s", decl.Name.Name, p.signature(decl.Type))

					continue
				}

				recv := decl.Recv.List[0].Type
				if base := receiverName(recv); ast.IsExported(base) {
					add("func (%s) %s%s", p.expr(recv), decl.Name.Name, p.signature(decl.Type))
				}
			case *ast.GenDecl:
				lines = append(lines, p.renderGenDecl(f, decl)...)
			}
		}
	}

	return lines
}

func (p *apiPackage) renderGenDecl(f *ast.File, decl *ast.GenDecl) []string {
	var (
		lines []string
		// An implicit repetition of a constant group repeats the last type and values given.
		lastType   ast.Expr
		lastValues []ast.Expr
	)

	add := func(format string, args ...any) {
		lines = append(lines, p.name+": "+fmt.Sprintf(format, args...))
	}

	for i, spec := range decl.Specs {
		switch spec := spec.(type) {
		case *ast.TypeSpec:
			if spec.Name.IsExported() {
				lines = append(lines, p.renderType(spec)...)
			}
		case *ast.ValueSpec:
			typ, values := spec.Type, spec.Values
			if decl.Tok == token.CONST && typ == nil && values == nil {
				typ, values = lastType, lastValues
			}

			lastType, lastValues = typ, values

			for j, name := range spec.Names {
				if !name.IsExported() {
					continue
				}

				line := decl.Tok.String() + " " + name.Name
				if typ != nil {
					line += " " + p.expr(typ)
				}

				if j < len(values) {
					line += " = " + p.value(values[j])

					if decl.Tok == token.CONST {
						if resolved, ok := p.consts.resolve(p.name, f, values[j], 0); ok && resolved != p.expr(values[j]) {
							line += " // " + resolved
						}

						if usesIota(values[j]) {
							line += " // iota " + strconv.Itoa(i)
						}
					}
				}

				add("%s", line)
			}
		}
	}

	return lines
}

// renderType renders a type, and its exported fields or its interface's methods each on a line of its own.
func (p *apiPackage) renderType(spec *ast.TypeSpec) []string {
	name := spec.Name.Name
	if spec.TypeParams != nil {
		name += "[" + p.fieldList(spec.TypeParams, ", ", true) + "]"
	}

	var lines []string

	add := func(format string, args ...any) {
		lines = append(lines, p.name+": "+fmt.Sprintf(format, args...))
	}

	if spec.Assign.IsValid() {
		add("type %s = %s", name, p.expr(spec.Type))

		return lines
	}

	switch t := spec.Type.(type) {
	case *ast.StructType:
		add("type %s struct", name)

		for _, field := range t.Fields.List {
			tag := ""
			if field.Tag != nil {
				tag = " " + field.Tag.Value
			}

			if len(field.Names) == 0 {
				if ast.IsExported(receiverName(field.Type)) {
					add("field %s.%s (embedded)%s", spec.Name.Name, p.expr(field.Type), tag)
				}

				continue
			}

			for _, n := range field.Names {
				if n.IsExported() {
					add("field %s.%s %s%s", spec.Name.Name, n.Name, p.expr(field.Type), tag)
				}
			}
		}
	case *ast.InterfaceType:
		add("type %s interface", name)

		for _, method := range t.Methods.List {
			if len(method.Names) == 0 {
				add("interface %s embeds %s", spec.Name.Name, p.expr(method.Type))

				continue
			}

			for _, n := range method.Names {
				if ft, ok := method.Type.(*ast.FuncType); ok && n.IsExported() {
					add("interface %s.%s%s", spec.Name.Name, n.Name, p.signature(ft))
				}
			}
		}
	default:
		add("type %s %s", name, p.expr(spec.Type))
	}

	return lines
}

// signature renders a function type without "func" and without parameter names (type parameters keep
// theirs: the constraints name them).
func (p *apiPackage) signature(ft *ast.FuncType) string {
	return strings.TrimPrefix(p.expr(ft), "func")
}

// expr prints an expression on one line, with the parameter names of every function type in it left out.
func (p *apiPackage) expr(e ast.Expr) string {
	ast.Inspect(e, func(n ast.Node) bool {
		if ft, ok := n.(*ast.FuncType); ok {
			ft.Params = unnamed(ft.Params)
			ft.Results = unnamed(ft.Results)
		}

		return true
	})

	var b bytes.Buffer
	if err := printer.Fprint(&b, p.fset, e); err != nil {
		return fmt.Sprintf("<%v>", err)
	}

	return oneLine(b.String())
}

// value prints a variable's or constant's value: a function literal by its type alone.
func (p *apiPackage) value(e ast.Expr) string {
	if fl, ok := e.(*ast.FuncLit); ok {
		return p.expr(fl.Type) + " {...}"
	}

	return p.expr(e)
}

// fieldList prints a field list (type parameters) with its names.
func (p *apiPackage) fieldList(fl *ast.FieldList, sep string, names bool) string {
	var parts []string

	for _, field := range fl.List {
		part := p.expr(field.Type)
		if names && len(field.Names) > 0 {
			var ns []string
			for _, n := range field.Names {
				ns = append(ns, n.Name)
			}

			part = strings.Join(ns, ", ") + " " + part
		}

		parts = append(parts, part)
	}

	return strings.Join(parts, sep)
}

// unnamed returns the field list with one unnamed field for every named one.
func unnamed(fl *ast.FieldList) *ast.FieldList {
	if fl == nil {
		return nil
	}

	out := &ast.FieldList{Opening: fl.Opening, Closing: fl.Closing}

	for _, field := range fl.List {
		for range max(1, len(field.Names)) {
			out.List = append(out.List, &ast.Field{Type: field.Type})
		}
	}

	return out
}

// oneLine joins a printed expression's lines.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "{ ", "{")
	s = strings.ReplaceAll(s, ", }", "}")
	s = strings.ReplaceAll(s, "; }", "}")

	return s
}

// receiverName returns the name of a receiver's or embedded field's type: T of *T, T[K], pkg.T.
func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	default:
		return ""
	}
}

func usesIota(e ast.Expr) bool {
	found := false

	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == "iota" {
			found = true
		}

		return !found
	})

	return found
}

// constDecl is a constant's value expression and the file it is declared in (for its imports).
type constDecl struct {
	value ast.Expr
	file  *ast.File
}

// constResolver finds what a constant of the API stands for when it names another constant of the module,
// as pkg/ccm re-exports the resource types and namespaces of its internal packages: they are stored, so a
// change of their strings is a change of the API.
type constResolver struct {
	// root is the module's directory.
	root string
	// packages are the constants of the packages read so far, by import path below the module.
	packages map[string]map[string]constDecl
}

// constsOf returns the constants of a package's files that have a value.
func constsOf(files []*ast.File) map[string]constDecl {
	consts := map[string]constDecl{}

	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}

			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec) //nolint:forcetypeassert // A const declaration holds value specs.
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						consts[n.Name] = constDecl{value: vs.Values[i], file: f}
					}
				}
			}
		}
	}

	return consts
}

// resolve returns the literal that e, a constant expression of file f of the package pkg, stands for: a
// literal itself, a constant of the package or of another package of the module, or a conversion of one
// (resource.Type("...")). It gives up on anything else, and after a few steps.
func (r *constResolver) resolve(pkg string, f *ast.File, e ast.Expr, depth int) (string, bool) {
	if depth > 8 {
		return "", false
	}

	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Value, true
	case *ast.ParenExpr:
		return r.resolve(pkg, f, e.X, depth+1)
	case *ast.CallExpr:
		if len(e.Args) == 1 {
			return r.resolve(pkg, f, e.Args[0], depth+1)
		}
	case *ast.Ident:
		if c, ok := r.lookup(pkg, e.Name); ok {
			return r.resolve(pkg, c.file, c.value, depth+1)
		}
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return "", false
		}

		other, ok := importedModulePackage(f, x.Name)
		if !ok {
			return "", false
		}

		if c, ok := r.lookup(other, e.Sel.Name); ok {
			return r.resolve(other, c.file, c.value, depth+1)
		}
	}

	return "", false
}

// lookup finds a constant of a package of the module, by its import path below the module.
func (r *constResolver) lookup(pkg, name string) (constDecl, bool) {
	consts, ok := r.packages[pkg]
	if !ok {
		consts = map[string]constDecl{}

		if bp, err := build.ImportDir(filepath.Join(r.root, filepath.FromSlash(pkg)), 0); err == nil {
			fset := token.NewFileSet()

			var files []*ast.File

			for _, name := range bp.GoFiles {
				if f, err := parser.ParseFile(fset, filepath.Join(bp.Dir, name), nil, parser.SkipObjectResolution); err == nil {
					files = append(files, f)
				}
			}

			consts = constsOf(files)
		}

		r.packages[pkg] = consts
	}

	c, ok := consts[name]

	return c, ok
}

// importName is the name a file refers to an import by.
func importName(imp *ast.ImportSpec) string {
	if imp.Name != nil {
		return imp.Name.Name
	}

	p, _ := strconv.Unquote(imp.Path.Value) // The parser checked the quotes.

	return path.Base(p)
}

// importedModulePackage returns the import path below the module of the package f imports as name, if it
// is one of the module's.
func importedModulePackage(f *ast.File, name string) (string, bool) {
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}

		if importName(imp) != name {
			continue
		}

		return strings.CutPrefix(p, modulePath+"/")
	}

	return "", false
}
