package main

// Comparing topoalign's answers with the kubelet's, and shrinking a differing case to a
// small reproducer by re-running both sides on smaller inputs.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
)

// maxReproducers: differences shown in full (and shrunk); the rest are counted.
const maxReproducers = 10

type policyStats struct{ cases, diffs int }

func bucket(c Case) string { return c.Policy }

// accepted: topoalign's answer equals one the kubelet can give for this case.
func accepted(got Answer, k kubeletLine) bool {
	if sameOutcome(got, k.Answer) {
		return true
	}
	for _, a := range k.Alternatives {
		if sameOutcome(got, a) {
			return true
		}
	}
	return false
}

type diff struct {
	c    Case
	k    kubeletLine
	got  Answer
	note string
}

// compareAll returns the differences and per-policy counts; an error when the answer
// list does not line up with the cases.
func compareAll(cases []Case, kubelet []kubeletLine, got []Answer) ([]diff, map[string]*policyStats, error) {
	if len(kubelet) != len(cases) {
		return nil, nil, fmt.Errorf("kubelet.jsonl has %d lines for %d cases", len(kubelet), len(cases))
	}
	if len(got) != len(cases) {
		return nil, nil, fmt.Errorf("topoalign answered %d cases of %d", len(got), len(cases))
	}
	stats := map[string]*policyStats{}
	var diffs []diff
	for i, c := range cases {
		b := bucket(c)
		if stats[b] == nil {
			stats[b] = &policyStats{}
		}
		stats[b].cases++
		if got[i].ID != c.ID {
			return nil, nil, fmt.Errorf("answer %d has id %q, expected %q (answers must be in input order)", i, got[i].ID, c.ID)
		}
		if !accepted(got[i], kubelet[i]) {
			stats[b].diffs++
			diffs = append(diffs, diff{c: c, k: kubelet[i], got: got[i]})
		}
	}
	return diffs, stats, nil
}

func printStats(stats map[string]*policyStats) (cases, diffs int) {
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := stats[n]
		fmt.Printf("FIGURE: policy %-16s %6d cases, %d differences\n", n, s.cases, s.diffs)
		cases += s.cases
		diffs += s.diffs
	}
	return cases, diffs
}

func cmdCompare(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	dir := fs.String("dir", "", "directory written by gen")
	out := fs.String("topoalign-out", "", "topoalign tm merge-cases -o json output")
	bin := fs.String("topoalign-bin", "", "topoalign binary, to shrink differing cases (optional)")
	_ = fs.Parse(args)
	cases, err := readJSONL[Case](filepath.Join(*dir, "cases.jsonl"))
	if err != nil {
		return err
	}
	kubelet, err := readJSONL[kubeletLine](filepath.Join(*dir, "kubelet.jsonl"))
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(*out)
	if err != nil {
		return err
	}
	var got []Answer
	if err := json.Unmarshal(raw, &got); err != nil {
		return fmt.Errorf("%s: topoalign's output is not a JSON array of answers: %w", *out, err)
	}
	diffs, stats, err := compareAll(cases, kubelet, got)
	if err != nil {
		return err
	}
	total, nd := printStats(stats)
	fmt.Printf("FIGURE: topoalign tm merge-cases vs kubelet topologymanager: %d cases, %d differences\n", total, nd)
	for i, d := range diffs {
		if i == maxReproducers {
			fmt.Printf("... and %d more differences\n", len(diffs)-maxReproducers)
			break
		}
		if *bin != "" {
			d = shrink(*bin, d)
		}
		printDiff(d)
	}
	if nd > 0 {
		return fmt.Errorf("%d differences", nd)
	}
	return nil
}

func printDiff(d diff) {
	line, _ := json.Marshal(d.c)
	fmt.Printf("DIFFERENCE %s%s\n  case:      %s\n  kubelet:   %v\n", d.c.ID, d.note, line, d.k.Answer)
	for _, a := range d.k.Alternatives[min(1, len(d.k.Alternatives)):] {
		fmt.Printf("  kubelet (other resource order): %v\n", a)
	}
	fmt.Printf("  topoalign: %v\n", d.got)
}

// runTopoalign answers one case with the topoalign binary.
func runTopoalign(bin string, c Case) (Answer, error) {
	f, err := os.CreateTemp("", "tmparity-*.jsonl")
	if err != nil {
		return Answer{}, err
	}
	defer os.Remove(f.Name())
	if err := json.NewEncoder(f).Encode(c); err != nil {
		f.Close()
		return Answer{}, err
	}
	f.Close()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "tm", "merge-cases", "--input", f.Name(), "-o", "json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Answer{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	var got []Answer
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got) != 1 {
		return Answer{}, fmt.Errorf("unexpected output %q", stdout.String())
	}
	return got[0], nil
}

// shrink removes providers, resources, hints and options while both sides still differ.
func shrink(bin string, d diff) diff {
	differs := func(c Case) (diff, bool) {
		k := Kubelet(c, rand.New(rand.NewPCG(1, 1)))
		got, err := runTopoalign(bin, c)
		if err != nil {
			return diff{}, false
		}
		kl := kubeletLine{ID: c.ID, Answer: k.Primary}
		if len(k.Alternatives) > 1 {
			kl.Alternatives = k.Alternatives
		}
		return diff{c: c, k: kl, got: got}, !accepted(got, kl)
	}
	cur := d
	for changed, steps := true, 0; changed && steps < 200; {
		changed = false
		for _, cand := range smaller(cur.c) {
			steps++
			if nd, ok := differs(cand); ok {
				cur, changed = nd, true
				break
			}
		}
	}
	if len(cur.c.Providers) != len(d.c.Providers) || len(cur.c.Options) != len(d.c.Options) || permutations(cur.c) != permutations(d.c) {
		cur.note = " (shrunk)"
	}
	return cur
}

// smaller lists cases one step smaller than c.
func smaller(c Case) []Case {
	var out []Case
	clone := func() Case {
		var n Case
		b, _ := json.Marshal(c)
		_ = json.Unmarshal(b, &n)
		return n
	}
	for i := range c.Providers {
		n := clone()
		n.Providers = append(n.Providers[:i], n.Providers[i+1:]...)
		out = append(out, n)
	}
	for i, p := range c.Providers {
		for j, r := range p.Resources {
			n := clone()
			rs := n.Providers[i].Resources
			n.Providers[i].Resources = append(rs[:j], rs[j+1:]...)
			out = append(out, n)
			for h := range r.Hints {
				n := clone()
				hs := n.Providers[i].Resources[j].Hints
				n.Providers[i].Resources[j].Hints = append(hs[:h], hs[h+1:]...)
				out = append(out, n)
			}
		}
	}
	for k := range c.Options {
		n := clone()
		delete(n.Options, k)
		out = append(out, n)
	}
	return out
}

func cmdSelftest(args []string) error {
	fs := flag.NewFlagSet("selftest", flag.ExitOnError)
	dir := fs.String("dir", "", "directory written by gen")
	_ = fs.Parse(args)
	cases, err := readJSONL[Case](filepath.Join(*dir, "cases.jsonl"))
	if err != nil {
		return err
	}
	kubelet, err := readJSONL[kubeletLine](filepath.Join(*dir, "kubelet.jsonl"))
	if err != nil {
		return err
	}
	same := make([]Answer, len(kubelet))
	for i, k := range kubelet {
		same[i] = k.Answer
	}
	diffs, _, err := compareAll(cases, kubelet, same)
	if err != nil {
		return err
	}
	if len(diffs) != 0 {
		return fmt.Errorf("selftest: the kubelet's own answers gave %d differences, expected 0", len(diffs))
	}
	// Alter 10 answers: preferred flipped, affinity changed, an error invented, an error dropped.
	altered := append([]Answer(nil), same...)
	want, seen := 10, 0
	for i := 0; i < len(altered) && seen < want; i += len(altered)/(2*want) + 1 {
		if len(kubelet[i].Alternatives) > 0 {
			continue // an altered answer could equal another order's answer
		}
		a := &altered[i]
		switch {
		case a.Error != nil:
			a.Error = nil
		case seen%3 == 0:
			msg := "invented"
			a.Error = &msg
		case seen%3 == 1:
			a.Preferred = !a.Preferred
		default:
			if a.Affinity == nil {
				a.Affinity = []int{0}
			} else {
				a.Affinity = nil
			}
		}
		seen++
	}
	diffs, _, err = compareAll(cases, kubelet, altered)
	if err != nil {
		return err
	}
	if seen != want || len(diffs) != want {
		return fmt.Errorf("selftest: %d altered answers gave %d differences", want, len(diffs))
	}
	fmt.Printf("PASS: tm-parity comparison self-test: own answers 0 differences, %d altered answers %d differences\n", want, len(diffs))
	return nil
}
