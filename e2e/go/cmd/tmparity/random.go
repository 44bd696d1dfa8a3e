package main

// Generated cases: a grid of configurations (policy × scope × options × NUMA size) that
// exercises the kubelet's start-up validation, and random merge cases.

import (
	"fmt"
	"math/rand/v2"
)

var resourcePool = []string{"cpu", "memory", "hugepages-1Gi", "nvidia.com/gpu", "amd.com/gpu",
	"rdma/hca_shared_devices_a", "example.com/nic", "topoalign.dev/pair"}

// optionSets are the policy options the configuration grid tries: valid, odd and invalid
// values of both options the kubelet knows, and unknown names.
var optionSets = []map[string]string{
	{},
	{"prefer-closest-numa-nodes": "true"},
	{"prefer-closest-numa-nodes": "false"},
	{"prefer-closest-numa-nodes": "1"},
	{"prefer-closest-numa-nodes": "T"},
	{"prefer-closest-numa-nodes": "yes"},
	{"prefer-closest-numa-nodes": " true"},
	{"prefer-closest-numa-nodes": ""},
	{"max-allowable-numa-nodes": "8"},
	{"max-allowable-numa-nodes": "16"},
	{"max-allowable-numa-nodes": "7"},
	{"max-allowable-numa-nodes": "0"},
	{"max-allowable-numa-nodes": "-1"},
	{"max-allowable-numa-nodes": "abc"},
	{"max-allowable-numa-nodes": " 16"},
	{"max-allowable-numa-nodes": "16 "},
	{"max-allowable-numa-nodes": "+16"},
	{"max-allowable-numa-nodes": "08"},
	{"max-allowable-numa-nodes": "9"},
	{"max-allowable-numa-nodes": "1e2"},
	{"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "16"},
	{"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "7"},
	{"prefer-closest-numa-nodes": "maybe", "max-allowable-numa-nodes": "16"},
	{"foo": "bar"},
	{"prefer-closest-numa-node": "true"},
	{"Prefer-Closest-NUMA-Nodes": "true"},
}

// The policy and scope names the kubelet's configuration validation lets through to the
// Topology Manager (others are refused before NewManager runs, so they are not cases).
var policies = []string{"none", "best-effort", "restricted", "single-numa-node"}
var scopes = []string{"container", "pod"}

// ConfigGrid: every policy × scope × option set × NUMA sizes 2, 8, 9 and 12 (above the
// default max-allowable-numa-nodes of 8), each with one simple provider.
func ConfigGrid(rng *rand.Rand) []Case {
	var out []Case
	for _, n := range []int{2, 8, 9, 12} {
		for _, p := range policies {
			for _, s := range scopes {
				for oi, o := range optionSets {
					c := Case{ID: fmt.Sprintf("config/n%d/%s/%s/opts%d", n, p, s, oi), Policy: p, Scope: s,
						Options: o, NUMANodes: seq(n), Distances: randomDistances(rng, n)}
					c.Providers = []Provider{randomProvider(rng, c.NUMANodes, 2, 2)}
					out = append(out, c)
				}
			}
		}
	}
	return out
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// randomDistances: 10 on the diagonal, a few distinct values elsewhere (ties on purpose),
// symmetric except now and then.
func randomDistances(rng *rand.Rand, n int) [][]int {
	vals := []int{11, 12, 12, 16, 20, 21, 21, 30, 32}
	d := make([][]int, n)
	for i := range d {
		d[i] = make([]int, n)
	}
	for i := 0; i < n; i++ {
		d[i][i] = 10
		for j := i + 1; j < n; j++ {
			v := vals[rng.IntN(len(vals))]
			d[i][j], d[j][i] = v, v
			if rng.IntN(10) == 0 {
				d[j][i] = vals[rng.IntN(len(vals))]
			}
		}
	}
	return d
}

// randomMask: a non-empty subset of nodes, mostly small.
func randomMask(rng *rand.Rand, nodes []int) []int {
	n := len(nodes)
	var k int
	switch r := rng.IntN(10); {
	case r < 5:
		k = 1
	case r < 8:
		k = min(2, n)
	default:
		k = 1 + rng.IntN(n)
	}
	perm := rng.Perm(n)[:k]
	var m []int
	for i := 0; i < n; i++ {
		for _, p := range perm {
			if p == i {
				m = append(m, nodes[i])
			}
		}
	}
	return m
}

func randomHints(rng *rand.Rand, nodes []int, maxHints int) []Hint {
	switch rng.IntN(12) {
	case 0:
		return nil // nil slice: no preference
	case 1:
		return []Hint{} // empty slice: no possible affinity
	}
	k := 1 + rng.IntN(maxHints)
	hs := make([]Hint, 0, k)
	for i := 0; i < k; i++ {
		h := Hint{Preferred: rng.IntN(3) > 0}
		if rng.IntN(25) != 0 {
			h.Affinity = randomMask(rng, nodes)
		}
		if i > 0 && rng.IntN(15) == 0 {
			h = hs[rng.IntN(len(hs))] // a duplicate hint
		}
		hs = append(hs, h)
	}
	return hs
}

func randomProvider(rng *rand.Rand, nodes []int, maxRes, maxHints int) Provider {
	switch rng.IntN(14) {
	case 0:
		return Provider{Null: true}
	case 1:
		return Provider{Resources: []Resource{}}
	}
	k := 1 + rng.IntN(maxRes)
	names := rng.Perm(len(resourcePool))[:k]
	p := Provider{}
	for _, ni := range names {
		p.Resources = append(p.Resources, Resource{Name: resourcePool[ni], Hints: randomHints(rng, nodes, maxHints)})
	}
	return p
}

// permutations is the number of hint combinations the merge iterates.
func permutations(c Case) int {
	total := 1
	for _, p := range c.Providers {
		for _, r := range p.Resources {
			if len(r.Hints) > 0 {
				total *= len(r.Hints)
			}
		}
	}
	return total
}

func randomOptions(rng *rand.Rand) map[string]string {
	switch r := rng.IntN(20); {
	case r < 11:
		return map[string]string{}
	case r < 16:
		return map[string]string{"prefer-closest-numa-nodes": "true"}
	default:
		return optionSets[rng.IntN(len(optionSets))]
	}
}

// RandomCase: 1–8 NUMA nodes (now and then with gaps in the ids when distances do not
// matter), 1–4 providers with 1–4 resources of 1–4 hints, bounded to 20,000 combinations.
func RandomCase(rng *rand.Rand, i int) Case {
	c := Case{ID: fmt.Sprintf("random/%d", i)}
	if rng.IntN(100) < 13 {
		c.Policy = "none"
	} else {
		c.Policy = policies[1+rng.IntN(3)]
	}
	c.Scope = scopes[rng.IntN(2)]
	c.Options = randomOptions(rng)
	n := 1 + rng.IntN(8)
	c.NUMANodes = seq(n)
	if _, closest := c.Options["prefer-closest-numa-nodes"]; !closest && rng.IntN(10) == 0 {
		// sparse node ids (the kubelet indexes distances by id, so only without prefer-closest)
		id := 0
		for j := range c.NUMANodes {
			id += 1 + rng.IntN(2)
			c.NUMANodes[j] = id
		}
	}
	c.Distances = randomDistances(rng, n)
	for {
		c.Providers = nil
		for np := 1 + rng.IntN(4); np > 0; np-- {
			c.Providers = append(c.Providers, randomProvider(rng, c.NUMANodes, 4, 4))
		}
		if permutations(c) <= 20000 {
			return c
		}
	}
}
