package app

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is gpufleet's module path.
const module = "github.com/gpufleet/gpufleet"

// thirdParty maps the short names the table of docs/ARCHITECTURE.md gives
// modules outside gpufleet to their import paths; a table name that has a
// dot in its first element (k8s.io/client-go, sigs.k8s.io/yaml) is a path
// already. A path allows its packages and those below it.
var thirdParty = map[string]string{
	"SQLite driver":           "modernc.org/sqlite",
	"pgx":                     "github.com/jackc/pgx/v5",
	"x/sys":                   "golang.org/x/sys",
	"x/time/rate":             "golang.org/x/time/rate",
	"go-landlock":             "github.com/landlock-lsm/go-landlock",
	"apimachinery":            "k8s.io/apimachinery",
	"prometheus/common":       "github.com/prometheus/common",
	"prometheus/client_model": "github.com/prometheus/client_model",
	"client_golang":           "github.com/prometheus/client_golang",
	"gonum/plot":              "gonum.org/v1/plot",
	"cobra":                   "github.com/spf13/cobra",
	"pflag":                   "github.com/spf13/pflag",
	"purego":                  "github.com/ebitengine/purego",
	"netlink":                 "github.com/vishvananda/netlink",
	"netns":                   "github.com/vishvananda/netns",
	"nftables":                "github.com/google/nftables",
	"coder/websocket":         "github.com/coder/websocket",
}

// rule is one row of the table: the package and what it may import.
type rule struct {
	pkg string // import path
	// internal are the gpufleet packages it may import (exactly those;
	// "everything above" is every package of the rows above); external the
	// third-party paths (and what is below them).
	internal, external []string
	above              bool // "everything above"
}

// TestArchitectureImports checks that every package of the module imports
// (outside its tests) only the standard library and what its row of the
// table "Packages and what they may import" in docs/ARCHITECTURE.md allows,
// that the table has a row for every package and names only packages and
// modules that exist, and that a row names nothing its package does not
// import (but for "everything above").
func TestArchitectureImports(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseImportTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := listPackages(t, root)
	for _, r := range rules {
		if _, ok := pkgs[r.pkg]; !ok {
			t.Errorf("docs/ARCHITECTURE.md has a row for %s, which is no package of the module", short(r.pkg))
		}
		for _, p := range r.internal {
			if _, ok := pkgs[p]; !ok {
				t.Errorf("docs/ARCHITECTURE.md: %s may import %s, which is no package of the module", short(r.pkg), short(p))
			}
		}
	}
	byPkg := map[string]rule{}
	for _, r := range rules {
		byPkg[r.pkg] = r
	}
	for _, path := range sortedKeys(pkgs) {
		r, ok := byPkg[path]
		if !ok {
			t.Errorf("%s has no row in the table of docs/ARCHITECTURE.md", short(path))
			continue
		}
		for _, imp := range pkgs[path] {
			if why := r.refuses(imp); why != "" {
				t.Errorf("%s imports %s, %s; fix the code or the row of docs/ARCHITECTURE.md", short(path), short(imp), why)
			}
		}
		// Both ways: a row names only what its package imports.
		if r.above {
			continue
		}
		for _, p := range slices.Concat(r.internal, r.external) {
			if !slices.ContainsFunc(pkgs[path], func(imp string) bool { return imp == p || strings.HasPrefix(imp, p+"/") }) {
				t.Errorf("docs/ARCHITECTURE.md: %s may import %s, which it does not import; drop it from the row", short(path), short(p))
			}
		}
	}
}

// refuses says why the rule does not allow imp, or "" when it does.
func (r rule) refuses(imp string) string {
	switch {
	case isStd(imp):
		return ""
	case imp == module || strings.HasPrefix(imp, module+"/"):
		if slices.Contains(r.internal, imp) {
			return ""
		}
		return "which its row does not list"
	}
	for _, p := range r.external {
		if imp == p || strings.HasPrefix(imp, p+"/") {
			return ""
		}
	}
	return "a third-party package its row does not name"
}

// TestParseImportTable checks the parser on rows of each kind, and that it
// refuses names it cannot place, so that the check above cannot pass by
// reading nothing.
func TestParseImportTable(t *testing.T) {
	doc := []byte("# x\n\n## Packages and what they may import\n\n" +
		"| package | owns | may import |\n| --- | --- | --- |\n" +
		"| `api` | wire types | stdlib |\n" +
		"| `internal/sched` | one cycle, pure: a, b | core, sched/fairshare |\n" +
		"| `internal/usage` | samplers | core, prometheus/common (text parsing), k8s.io/client-go |\n" +
		"| `internal/app` | wiring | everything above |\n" +
		"| `cmd/gpufleet` | main | cli |\n\nafter the table\n| `internal/x` | not read | y |\n")
	got, err := parseImportTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []rule{
		{pkg: module + "/api"},
		{pkg: module + "/internal/sched", internal: []string{module + "/internal/core", module + "/internal/sched/fairshare"}},
		{pkg: module + "/internal/usage", internal: []string{module + "/internal/core"}, external: []string{"github.com/prometheus/common", "k8s.io/client-go"}},
		{pkg: module + "/internal/app", internal: []string{module + "/api", module + "/internal/sched", module + "/internal/usage"}, above: true},
		{pkg: module + "/cmd/gpufleet", internal: []string{module + "/internal/cli"}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d rules, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.pkg != w.pkg || g.above != w.above || !slices.Equal(g.internal, w.internal) || !slices.Equal(g.external, w.external) {
			t.Errorf("rule %d: %+v, want %+v", i, g, w)
		}
	}
	if why := got[1].refuses(module + "/internal/store"); why == "" {
		t.Error("sched may import the store")
	}
	if why := got[2].refuses("k8s.io/client-go/kubernetes"); why != "" {
		t.Errorf("usage may not import below k8s.io/client-go: %s", why)
	}
	if why := got[2].refuses("github.com/prometheus/client_golang/prometheus"); why == "" {
		t.Error("usage may import client_golang")
	}
	if why := got[0].refuses("net/http"); why != "" {
		t.Errorf("api may not import the standard library: %s", why)
	}
	if _, err := parseImportTable([]byte("## Packages and what they may import\n\n| `api` | x | SQLite drivers |\n")); err == nil {
		t.Error("an unknown third-party name was accepted")
	}
	if _, err := parseImportTable([]byte("## Packages and what they may import\n\nno table\n")); err == nil {
		t.Error("a section without a table was accepted")
	}
}

var parenthesised = regexp.MustCompile(`\s*\([^)]*\)`)

// parseImportTable reads the rows of the table under the heading "Packages
// and what they may import": the package in backquotes in the first column,
// what it may import, comma-separated, in the last.
func parseImportTable(doc []byte) ([]rule, error) {
	var rules []rule
	var seen []string // gpufleet packages of the rows so far
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			if in {
				break
			}
			in = strings.Contains(line, "Packages and what they may import")
			continue
		}
		if !in {
			continue
		}
		if len(rules) > 0 && !strings.HasPrefix(line, "|") {
			break // the end of the table
		}
		if !strings.HasPrefix(line, "| `") {
			continue // the header, the rule under it, text before the table
		}
		cols := strings.Split(strings.Trim(line, "|"), "|")
		pkg := strings.Trim(strings.TrimSpace(cols[0]), "`")
		r := rule{pkg: module + "/" + pkg}
		mayImport := parenthesised.ReplaceAllString(cols[len(cols)-1], "")
		for _, name := range strings.Split(mayImport, ",") {
			name = strings.TrimSpace(name)
			switch {
			case name == "stdlib" || name == "":
			case name == "everything above":
				r.internal, r.above = append(r.internal, seen...), true
			case strings.Contains(strings.Split(name, "/")[0], "."):
				r.external = append(r.external, name)
			case thirdParty[name] != "":
				r.external = append(r.external, thirdParty[name])
			case strings.ContainsAny(name, " _") || strings.ToLower(name) != name:
				return nil, errors.New("docs/ARCHITECTURE.md: " + pkg + " may import " + strconv.Quote(name) +
					": no gpufleet package is named so, and the test's thirdParty map does not know it")
			case name == "api":
				r.internal = append(r.internal, module+"/api")
			default:
				r.internal = append(r.internal, module+"/internal/"+name)
			}
		}
		seen = append(seen, r.pkg)
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		return nil, errors.New("docs/ARCHITECTURE.md: no table under \"Packages and what they may import\"")
	}
	return rules, nil
}

// listPackages returns each package of the module with its imports, tests
// left out, as go list sees them.
func listPackages(t *testing.T, root string) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to list the imports: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p.Imports
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages, want the module's: %s", len(pkgs), out)
	}
	return pkgs
}

// moduleRoot is the directory of go.mod, above this package's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// isStd reports whether an import path is the standard library's: its
// first element has no dot.
func isStd(path string) bool {
	return !strings.Contains(strings.Split(path, "/")[0], ".")
}

func short(path string) string { return strings.TrimPrefix(path, module+"/") }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
