package main

// The kubelet's side of the differential test: its own Topology Manager code
// (k8s.io/kubernetes/pkg/kubelet/cm/topologymanager) decides every case.
//
// NewManager validates policy, scope and options exactly as the kubelet does at start-up;
// the manager's own policy (GetPolicy) then merges the providers' hints.
//
// A provider's resources come from a Go map, so the kubelet merges them in an unspecified
// order, and for some inputs the merged hint depends on that order. Each case is therefore
// merged once in input order (the primary answer) and, when a provider has several
// resources, in other orders too; every distinct answer the kubelet can give is kept as an
// acceptable alternative. Splitting a provider into one single-resource map per resource is
// what fixes the order: the policy's first step concatenates all providers' resources, so it
// is the same input.

import (
	"math/rand/v2"
	"sort"

	"github.com/go-logr/logr"
	cadvisorapi "github.com/google/cadvisor/lib/model"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
)

// maxOrders bounds how many resource orders are tried per case.
const maxOrders = 8

// KubeletResult is the kubelet's primary answer and every answer a resource order gives.
type KubeletResult struct {
	Primary      Answer
	Alternatives []Answer // distinct answers, Primary first
}

func topology(c Case) []cadvisorapi.Node {
	nodes := make([]cadvisorapi.Node, len(c.NUMANodes))
	for i, id := range c.NUMANodes {
		nodes[i].Id = id
		if i < len(c.Distances) {
			d := make([]uint64, len(c.Distances[i]))
			for j, v := range c.Distances[i] {
				d[j] = uint64(v)
			}
			nodes[i].Distances = d
		}
	}
	return nodes
}

func toHints(hs []Hint) []topologymanager.TopologyHint {
	if hs == nil {
		return nil
	}
	out := make([]topologymanager.TopologyHint, 0, len(hs))
	for _, h := range hs {
		var m bitmask.BitMask
		if h.Affinity != nil {
			m, _ = bitmask.NewBitMask(h.Affinity...)
		}
		out = append(out, topologymanager.TopologyHint{NUMANodeAffinity: m, Preferred: h.Preferred})
	}
	return out
}

// providersInOrder builds the kubelet's []map input with each provider's resources in the
// given order (order[i] is a permutation of provider i's resource indexes).
func providersInOrder(c Case, order [][]int) []map[string][]topologymanager.TopologyHint {
	var out []map[string][]topologymanager.TopologyHint
	for i, p := range c.Providers {
		if p.Null {
			out = append(out, nil)
			continue
		}
		if len(p.Resources) == 0 {
			out = append(out, map[string][]topologymanager.TopologyHint{})
			continue
		}
		for _, ri := range order[i] {
			r := p.Resources[ri]
			out = append(out, map[string][]topologymanager.TopologyHint{r.Name: toHints(r.Hints)})
		}
	}
	return out
}

func answerOf(id string, h topologymanager.TopologyHint, admit bool) Answer {
	a := Answer{ID: id, Preferred: h.Preferred, Admit: admit}
	if h.NUMANodeAffinity != nil {
		a.Affinity = h.NUMANodeAffinity.GetBits()
		if a.Affinity == nil {
			a.Affinity = []int{}
		}
	}
	return a
}

// identityOrder is every provider's resources in input order.
func identityOrder(c Case) [][]int {
	order := make([][]int, len(c.Providers))
	for i, p := range c.Providers {
		for j := range p.Resources {
			order[i] = append(order[i], j)
		}
	}
	return order
}

// otherOrders lists resource orders besides input order: by name (what a sorted map
// gives), reversed, then random permutations, up to maxOrders in all.
func otherOrders(c Case, rng *rand.Rand) [][][]int {
	multi := false
	for _, p := range c.Providers {
		if len(p.Resources) > 1 {
			multi = true
		}
	}
	if !multi {
		return nil
	}
	var out [][][]int
	byName := identityOrder(c)
	for i, p := range c.Providers {
		sort.SliceStable(byName[i], func(a, b int) bool { return p.Resources[byName[i][a]].Name < p.Resources[byName[i][b]].Name })
	}
	out = append(out, byName)
	rev := identityOrder(c)
	for i := range rev {
		for a, b := 0, len(rev[i])-1; a < b; a, b = a+1, b-1 {
			rev[i][a], rev[i][b] = rev[i][b], rev[i][a]
		}
	}
	out = append(out, rev)
	for len(out) < maxOrders-1 {
		o := identityOrder(c)
		for i := range o {
			rng.Shuffle(len(o[i]), func(a, b int) { o[i][a], o[i][b] = o[i][b], o[i][a] })
		}
		out = append(out, o)
	}
	return out
}

// Kubelet decides one case with the kubelet's code.
func Kubelet(c Case, rng *rand.Rand) KubeletResult {
	logger := logr.Discard() // the kubelet logs every merge step at info level
	mgr, err := topologymanager.NewManager(logger, topology(c), c.Policy, c.Scope, c.Options)
	if err != nil {
		msg := err.Error()
		a := Answer{ID: c.ID, Error: &msg}
		return KubeletResult{Primary: a, Alternatives: []Answer{a}}
	}
	policy := mgr.GetPolicy()
	h, admit := policy.Merge(logger, providersInOrder(c, identityOrder(c)))
	res := KubeletResult{Primary: answerOf(c.ID, h, admit)}
	res.Alternatives = []Answer{res.Primary}
	for _, o := range otherOrders(c, rng) {
		h, admit := policy.Merge(logger, providersInOrder(c, o))
		a := answerOf(c.ID, h, admit)
		seen := false
		for _, b := range res.Alternatives {
			if sameOutcome(a, b) {
				seen = true
				break
			}
		}
		if !seen {
			res.Alternatives = append(res.Alternatives, a)
		}
	}
	return res
}
