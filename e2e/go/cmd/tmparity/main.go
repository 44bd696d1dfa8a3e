// tmparity: differential test of `topoalign tm merge-cases` against the kubelet's own
// Topology Manager code (k8s.io/kubernetes/pkg/kubelet/cm/topologymanager, v1.37.2).
//
//	tmparity gen --out DIR [--random N] [--seed S]
//	    writes DIR/cases.jsonl (the input of `topoalign tm merge-cases`) and
//	    DIR/kubelet.jsonl (the kubelet's answers, with every answer a resource order can give)
//	tmparity compare --dir DIR --topoalign-out FILE [--topoalign-bin BIN]
//	    compares topoalign's JSON array with the kubelet's answers; prints counts per policy
//	    and, for each difference, a reproducer (shrunk with BIN when given); exit 1 on any
//	tmparity selftest --dir DIR
//	    shows that compare finds differences: the kubelet's own answers give none, the same
//	    answers with N of them altered give exactly N
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// kubeletLine is one line of kubelet.jsonl.
type kubeletLine struct {
	ID           string   `json:"id"`
	Answer       Answer   `json:"answer"`
	Alternatives []Answer `json:"alternatives,omitempty"` // only when a resource order changes the answer
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tmparity gen|compare|selftest ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = cmdGen(os.Args[2:])
	case "compare":
		err = cmdCompare(os.Args[2:])
	case "selftest":
		err = cmdSelftest(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (expected gen, compare or selftest)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tmparity:", err)
		os.Exit(1)
	}
}

func cmdGen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	out := fs.String("out", "", "output directory")
	nRandom := fs.Int("random", 20000, "number of random cases")
	seed := fs.Uint64("seed", 20260101, "random seed")
	_ = fs.Parse(args)
	if *out == "" {
		return fmt.Errorf("gen: --out is required")
	}
	dir, err := topologyManagerDir()
	if err != nil {
		return err
	}
	tables, err := LoadTables(dir)
	if err != nil {
		return fmt.Errorf("reading the kubelet's test tables in %s: %w", dir, err)
	}
	// The harness must reproduce upstream's expected hints before it judges anyone else.
	for _, tc := range tables {
		r := Kubelet(tc.Case, rand.New(rand.NewPCG(*seed, 0)))
		want := Answer{ID: tc.ID, Affinity: tc.Expected.Affinity, Preferred: tc.Expected.Preferred, Admit: r.Primary.Admit}
		if !sameOutcome(r.Primary, want) {
			return fmt.Errorf("table case %q: the kubelet code gives %v, its test expects %v (harness bug)", tc.ID, r.Primary, want)
		}
	}
	fmt.Printf("FIGURE: kubelet test tables: %d cases read from %s, each reproduces upstream's expected hint\n", len(tables), filepath.Join(dir, "policy_test.go"))

	rng := rand.New(rand.NewPCG(*seed, 1))
	var cases []Case
	for _, tc := range tables {
		cases = append(cases, tc.Case)
	}
	grid := ConfigGrid(rng)
	cases = append(cases, grid...)
	for i := 0; i < *nRandom; i++ {
		cases = append(cases, RandomCase(rng, i))
	}
	fmt.Printf("FIGURE: cases: %d table + %d configuration grid + %d random = %d (seed %d)\n", len(tables), len(grid), *nRandom, len(cases), *seed)

	results := make([]KubeletResult, len(cases))
	var wg sync.WaitGroup
	next := make(chan int, 256)
	for w := 0; w < runtime.NumCPU(); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = Kubelet(cases[i], rand.New(rand.NewPCG(*seed, uint64(i)+2)))
			}
		}()
	}
	for i := range cases {
		next <- i
	}
	close(next)
	wg.Wait()

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	orderDependent := 0
	if err := writeJSONL(filepath.Join(*out, "cases.jsonl"), len(cases), func(i int) any { return cases[i] }); err != nil {
		return err
	}
	err = writeJSONL(filepath.Join(*out, "kubelet.jsonl"), len(cases), func(i int) any {
		l := kubeletLine{ID: cases[i].ID, Answer: results[i].Primary}
		if len(results[i].Alternatives) > 1 {
			l.Alternatives = results[i].Alternatives
			orderDependent++
		}
		return l
	})
	if err != nil {
		return err
	}
	fmt.Printf("FIGURE: cases where the kubelet's answer depends on the (random) order of a provider's resources: %d\n", orderDependent)
	return nil
}

func writeJSONL(path string, n int, item func(int) any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := 0; i < n; i++ {
		if err := enc.Encode(item(i)); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	line := 0
	for sc.Scan() {
		line++
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}
