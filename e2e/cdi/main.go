// cdiinject: what a container runtime does with the CDI ids the kubelet hands it, done
// with the library containerd and CRI-O call (tags.cncf.io/container-device-interface).
//
//	cdiinject --spec-dir DIR [--spec-dir DIR ...] [--env NAME=VALUE ...] ID [ID ...]
//	    loads the CDI spec directories (lowest priority first, as the runtime's
//	    cdi_spec_dirs), refuses any spec the library refuses, resolves exactly the given
//	    ids, injects them into an OCI runtime spec whose process starts with the --env
//	    entries (an image's environment), and prints the resulting OCI spec as JSON.
//	cdiinject --spec-dir DIR ... --list-nodes
//	    prints every device node path the specs name, one per line (the host's /dev must
//	    have them: the library reads their type and numbers from there).
//
// Exit status 1 with one message on stderr for any error (a spec the library rejects, an
// unresolvable id, a failed injection).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "cdiinject: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	var dirs, env multi
	flag.Var(&dirs, "spec-dir", "CDI spec directory (repeatable, lowest priority first)")
	flag.Var(&env, "env", "NAME=VALUE of the container's environment before injection (repeatable)")
	listNodes := flag.Bool("list-nodes", false, "print the device node paths every spec names")
	flag.Parse()
	if len(dirs) == 0 {
		fail("at least one --spec-dir is required")
	}

	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		fail("creating the CDI cache: %v", err)
	}
	if err := cache.Refresh(); err != nil {
		fail("loading the CDI specs in %v: %v", []string(dirs), err)
	}
	var specErrs []string
	for path, errs := range cache.GetErrors() {
		for _, e := range errs {
			specErrs = append(specErrs, fmt.Sprintf("%s: %v", path, e))
		}
	}
	if len(specErrs) > 0 {
		sort.Strings(specErrs)
		fail("the CDI library refuses specs: %s", strings.Join(specErrs, "; "))
	}

	if *listNodes {
		seen := map[string]bool{}
		for _, vendor := range cache.ListVendors() {
			for _, spec := range cache.GetVendorSpecs(vendor) {
				for _, n := range spec.ContainerEdits.DeviceNodes {
					seen[hostPath(n.HostPath, n.Path)] = true
				}
				for _, d := range spec.Devices {
					for _, n := range d.ContainerEdits.DeviceNodes {
						seen[hostPath(n.HostPath, n.Path)] = true
					}
				}
			}
		}
		var nodes []string
		for n := range seen {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		fmt.Println(strings.Join(nodes, "\n"))
		return
	}

	ids := flag.Args()
	if len(ids) == 0 {
		fail("no CDI ids given")
	}
	spec := &oci.Spec{
		Version: oci.Version,
		Process: &oci.Process{Env: env},
		Linux:   &oci.Linux{},
	}
	unresolved, err := cache.InjectDevices(spec, ids...)
	if err != nil {
		fail("injecting %v: %v (unresolved: %v)", ids, err, unresolved)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(spec); err != nil {
		fail("writing the OCI spec: %v", err)
	}
}

func hostPath(host, path string) string {
	if host != "" {
		return host
	}
	return path
}
