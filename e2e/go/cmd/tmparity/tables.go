package main

// The kubelet's own policy merge test tables, read from its source (policy_test.go in the
// k8s.io/kubernetes module this program is built against) with go/ast, so the cases stay
// exactly upstream's: names, providers, hints and expected merged hints. Nothing is
// transcribed by hand except the three policy-none cases (policy_none_test.go uses a
// different table shape) and the pairing of case lists with NUMA layouts and options that
// the Test functions make (see tableSuites).

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// tableSuite mirrors one TestPolicy*Merge function: which NUMA layout, policy, options
// and case lists it runs.
type tableSuite struct {
	test    string // the upstream Test function
	layout  string // commonNUMAInfo* function
	policy  string // kubelet policy name
	options map[string]string
	lists   []string // case-list functions, "Receiver.method" or "function"
}

var tableSuites = []tableSuite{
	{"TestPolicyBestEffortMerge", "commonNUMAInfoFourNodes", "best-effort", nil,
		[]string{"commonPolicyMergeTestCases", "bestEffortPolicy.mergeTestCases", "bestEffortPolicy.mergeTestCasesNoPolicies"}},
	{"TestPolicyBestEffortMergeClosestNUMA", "commonNUMAInfoEightNodes", "best-effort", map[string]string{"prefer-closest-numa-nodes": "true"},
		[]string{"commonPolicyMergeTestCases", "bestEffortPolicy.mergeTestCases", "bestEffortPolicy.mergeTestCasesClosestNUMA"}},
	{"TestPolicyRestrictedMerge", "commonNUMAInfoFourNodes", "restricted", nil,
		[]string{"commonPolicyMergeTestCases", "bestEffortPolicy.mergeTestCases", "bestEffortPolicy.mergeTestCasesNoPolicies"}},
	{"TestPolicyRestrictedMergeClosestNUMA", "commonNUMAInfoEightNodes", "restricted", map[string]string{"prefer-closest-numa-nodes": "true"},
		[]string{"commonPolicyMergeTestCases", "bestEffortPolicy.mergeTestCases", "bestEffortPolicy.mergeTestCasesClosestNUMA"}},
	{"TestPolicySingleNumaNodeMerge", "commonNUMAInfoFourNodes", "single-numa-node", nil,
		[]string{"commonPolicyMergeTestCases", "singleNumaNodePolicy.mergeTestCases"}},
}

// TableCase is a case from the kubelet's tables with the hint its test expects.
type TableCase struct {
	Case
	Expected Hint
}

// topologyManagerDir finds the package source in the module cache.
func topologyManagerDir() (string, error) {
	out, err := exec.Command("go", "list", "-mod=readonly", "-f", "{{.Dir}}", "k8s.io/kubernetes/pkg/kubelet/cm/topologymanager").Output()
	if err != nil {
		return "", fmt.Errorf("go list k8s.io/kubernetes/pkg/kubelet/cm/topologymanager: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// LoadTables reads every suite's cases from policy_test.go in dir.
func LoadTables(dir string) ([]TableCase, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(dir, "policy_test.go"), nil, 0)
	if err != nil {
		return nil, err
	}
	funcs := map[string]*ast.FuncDecl{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			t := fd.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			if id, ok := t.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		funcs[name] = fd
	}
	var out []TableCase
	for _, s := range tableSuites {
		nodes, dist, err := evalLayout(funcs[s.layout])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.layout, err)
		}
		for _, list := range s.lists {
			fd := funcs[list]
			if fd == nil {
				return nil, fmt.Errorf("policy_test.go has no function %s (upstream changed; update tableSuites)", list)
			}
			v, err := evalReturn(fd, map[string]any{"numaNodes": nodes})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", list, err)
			}
			items, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s: return value is not a list", list)
			}
			for i, it := range items {
				tc, err := tableCase(it)
				if err != nil {
					return nil, fmt.Errorf("%s[%d]: %w", list, i, err)
				}
				tc.ID = fmt.Sprintf("table/%s/%s/%d %s", s.test, list, i, tc.ID)
				tc.Policy, tc.Scope, tc.Options = s.policy, "container", s.options
				if tc.Options == nil {
					tc.Options = map[string]string{}
				}
				tc.NUMANodes, tc.Distances = nodes, dist
				out = append(out, tc)
			}
		}
	}
	return append(out, noneTableCases()...), nil
}

// noneTableCases: TestPolicyNoneMerge (policy_none_test.go), transcribed.
func noneTableCases() []TableCase {
	mk := func(i int, name string, providers []Provider) TableCase {
		return TableCase{Case: Case{ID: fmt.Sprintf("table/TestPolicyNoneMerge/%d %s", i, name), Policy: "none", Scope: "container",
			Options: map[string]string{}, NUMANodes: []int{0, 1}, Distances: [][]int{{10, 11}, {11, 10}}, Providers: providers},
			Expected: Hint{Affinity: nil, Preferred: false}}
	}
	one := func(pref bool) []Provider {
		return []Provider{{Resources: []Resource{{Name: "resource", Hints: []Hint{{Affinity: []int{0, 1}, Preferred: pref}}}}}}
	}
	return []TableCase{
		mk(0, "merged empty providers hints", []Provider{}),
		mk(1, "merge with a single provider with a single preferred resource", one(true)),
		mk(2, "merge with a single provider with a single non-preferred resource", one(false)),
	}
}

func evalLayout(fd *ast.FuncDecl) ([]int, [][]int, error) {
	if fd == nil {
		return nil, nil, fmt.Errorf("function not found")
	}
	v, err := evalReturn(fd, nil)
	if err != nil {
		return nil, nil, err
	}
	st, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("not a NUMAInfo literal")
	}
	var nodes []int
	for _, n := range st["Nodes"].([]any) {
		nodes = append(nodes, n.(int))
	}
	rows := map[int][]int{}
	for _, kv := range st["NUMADistances"].(orderedMap) {
		var row []int
		for _, d := range kv.value.([]any) {
			row = append(row, d.(int))
		}
		rows[kv.key.(int)] = row
	}
	dist := make([][]int, len(nodes))
	for i, n := range nodes {
		dist[i] = rows[n]
	}
	return nodes, dist, nil
}

func tableCase(v any) (TableCase, error) {
	st, ok := v.(map[string]any)
	if !ok {
		return TableCase{}, fmt.Errorf("not a struct literal")
	}
	tc := TableCase{}
	tc.ID, _ = st["name"].(string)
	tc.Providers = []Provider{}
	hp, _ := st["hp"].([]any)
	for _, p := range hp {
		prov := Provider{Null: true}
		if ps, ok := p.([]any); ok && len(ps) == 1 { // &mockHintProvider{map...}
			prov = Provider{Resources: []Resource{}}
			m, _ := ps[0].(orderedMap) // an empty map literal evaluates to an empty list
			for _, kv := range m {
				r := Resource{Name: kv.key.(string)}
				if kv.value != nil {
					hs, err := hintList(kv.value)
					if err != nil {
						return tc, err
					}
					r.Hints = hs
				}
				prov.Resources = append(prov.Resources, r)
			}
		}
		tc.Providers = append(tc.Providers, prov)
	}
	exp, err := hintOf(st["expected"])
	tc.Expected = exp
	return tc, err
}

func hintList(v any) ([]Hint, error) {
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("hint list is not a list")
	}
	out := []Hint{}
	for _, it := range items {
		h, err := hintOf(it)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

func hintOf(v any) (Hint, error) {
	switch t := v.(type) {
	case map[string]any:
		h := Hint{}
		if m, ok := t["NUMANodeAffinity"].([]int); ok {
			h.Affinity = m
		}
		h.Preferred, _ = t["Preferred"].(bool)
		return h, nil
	case []any: // positional {mask, preferred}
		if len(t) != 2 {
			return Hint{}, fmt.Errorf("positional hint with %d fields", len(t))
		}
		h := Hint{}
		if m, ok := t[0].([]int); ok {
			h.Affinity = m
		}
		h.Preferred, _ = t[1].(bool)
		return h, nil
	}
	return Hint{}, fmt.Errorf("unexpected hint %T", v)
}

type kv struct{ key, value any }
type orderedMap []kv

func evalReturn(fd *ast.FuncDecl, env map[string]any) (any, error) {
	for _, st := range fd.Body.List {
		if r, ok := st.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
			return eval(r.Results[0], env)
		}
	}
	return nil, fmt.Errorf("%s: no single-value return statement", fd.Name.Name)
}

// eval evaluates the literal subset the tables use: composite literals (struct fields as
// map[string]any, keyed maps as orderedMap, lists as []any), &x, NewTestBitMask(...),
// nil/true/false, string and int literals and the numaNodes parameter.
func eval(e ast.Expr, env map[string]any) (any, error) {
	switch x := e.(type) {
	case *ast.UnaryExpr:
		if x.Op == token.AND {
			return eval(x.X, env)
		}
	case *ast.ParenExpr:
		return eval(x.X, env)
	case *ast.BasicLit:
		switch x.Kind {
		case token.STRING:
			return strconv.Unquote(x.Value)
		case token.INT:
			return strconv.Atoi(x.Value)
		}
	case *ast.Ident:
		switch x.Name {
		case "nil":
			return nil, nil
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		if v, ok := env[x.Name]; ok {
			return v, nil
		}
	case *ast.CallExpr:
		if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "NewTestBitMask" {
			bits := []int{}
			for _, a := range x.Args {
				v, err := eval(a, env)
				if err != nil {
					return nil, err
				}
				switch t := v.(type) {
				case int:
					bits = append(bits, t)
				case []int:
					bits = append(bits, t...)
				default:
					return nil, fmt.Errorf("NewTestBitMask argument %T", v)
				}
			}
			return bits, nil
		}
	case *ast.CompositeLit:
		if len(x.Elts) == 0 {
			return []any{}, nil
		}
		if first, ok := x.Elts[0].(*ast.KeyValueExpr); ok {
			if _, isIdent := first.Key.(*ast.Ident); isIdent {
				st := map[string]any{}
				for _, el := range x.Elts {
					f := el.(*ast.KeyValueExpr)
					v, err := eval(f.Value, env)
					if err != nil {
						return nil, err
					}
					st[f.Key.(*ast.Ident).Name] = v
				}
				return st, nil
			}
			var m orderedMap
			for _, el := range x.Elts {
				f := el.(*ast.KeyValueExpr)
				k, err := eval(f.Key, env)
				if err != nil {
					return nil, err
				}
				v, err := eval(f.Value, env)
				if err != nil {
					return nil, err
				}
				m = append(m, kv{k, v})
			}
			return m, nil
		}
		var l []any
		for _, el := range x.Elts {
			v, err := eval(el, env)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	}
	return nil, fmt.Errorf("unsupported expression %T in test table", e)
}
