package main

// The case and answer formats shared with `topoalign tm merge-cases` (JSON Lines in,
// a JSON array out). Resources keep their input order: JSON objects are written and read
// with their keys in order, because the order in which a provider's resources are merged
// can change the kubelet's answer.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Hint is one topology hint: affinity nil means the kubelet's nil bitmask.
type Hint struct {
	Affinity  []int `json:"affinity"`
	Preferred bool  `json:"preferred"`
}

// Resource is one resource of a provider. Hints nil = nil slice (no preference),
// Hints non-nil and empty = empty slice (no possible affinity).
type Resource struct {
	Name  string
	Hints []Hint
}

// Provider is one hint provider's answer. Null=true: the provider returned nil.
type Provider struct {
	Null      bool
	Resources []Resource
}

// Case is one merge case.
type Case struct {
	ID        string            `json:"id"`
	Policy    string            `json:"policy"`
	Scope     string            `json:"scope"`
	Options   map[string]string `json:"options"`
	NUMANodes []int             `json:"numaNodes"`
	Distances [][]int           `json:"distances"`
	Providers []Provider        `json:"providers"`
}

// Answer is one merged result.
type Answer struct {
	ID        string  `json:"id"`
	Error     *string `json:"error"`
	Affinity  []int   `json:"affinity"`
	Preferred bool    `json:"preferred"`
	Admit     bool    `json:"admit"`
}

func (a Answer) String() string {
	if a.Error != nil {
		return fmt.Sprintf("error(%q)", *a.Error)
	}
	aff := "nil"
	if a.Affinity != nil {
		aff = fmt.Sprint(a.Affinity)
	}
	return fmt.Sprintf("{affinity:%s preferred:%v admit:%v}", aff, a.Preferred, a.Admit)
}

// sameOutcome: both refuse the configuration, or both merge to the same hint and admit.
// Error texts are not compared (they are each implementation's own words).
func sameOutcome(a, b Answer) bool {
	if (a.Error != nil) || (b.Error != nil) {
		return (a.Error != nil) == (b.Error != nil)
	}
	if (a.Affinity == nil) != (b.Affinity == nil) || a.Preferred != b.Preferred || a.Admit != b.Admit {
		return false
	}
	x, y := append([]int(nil), a.Affinity...), append([]int(nil), b.Affinity...)
	sort.Ints(x)
	sort.Ints(y)
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

// MarshalJSON writes null, or an object with the resources in order.
func (p Provider) MarshalJSON() ([]byte, error) {
	if p.Null {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, r := range p.Resources {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(r.Name)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		var v []byte
		if r.Hints == nil {
			v = []byte("null")
		} else if v, err = json.Marshal(r.Hints); err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads null or an object, keeping the key order.
func (p *Provider) UnmarshalJSON(data []byte) error {
	*p = Provider{}
	if string(bytes.TrimSpace(data)) == "null" {
		p.Null = true
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("provider: expected null or an object, got %v", tok)
	}
	p.Resources = []Resource{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("provider resource %q: %w", name, err)
		}
		r := Resource{Name: name}
		if string(bytes.TrimSpace(raw)) != "null" {
			r.Hints = []Hint{}
			if err := json.Unmarshal(raw, &r.Hints); err != nil {
				return fmt.Errorf("provider resource %q: %w", name, err)
			}
		}
		p.Resources = append(p.Resources, r)
	}
	_, err = dec.Token()
	return err
}
