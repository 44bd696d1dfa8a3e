// podresources: the kubelet's own pod-resources gRPC server, fed fixed allocations.
//
// It serves k8s.io/kubernetes/pkg/kubelet/apis/podresources (the v1 and v1alpha1
// PodResourcesLister servers, NewV1PodResourcesServer) on --socket, set up as the
// kubelet's ListenAndServePodResources (pkg/kubelet/server) does: a gRPC server with the
// kubelet's podresources rate limiter and the kubelet's unix listener (cri-client's
// CreateListener). pkg/kubelet/server itself is not imported: it needs modules outside
// this module's go.sum (the Kubernetes build's cache key). The providers the kubelet's device, CPU and
// memory managers would back are fed from --allocations, a JSON file:
//
//	{
//	  "allocatable": {
//	    "devices": [{"resource": "amd.com/gpu", "id": "0000:11:00.0", "numa": [0]}],
//	    "cpus": [0, 1, 2],
//	    "memory": [{"type": "memory", "size": 1073741824, "numa": [0]}]
//	  },
//	  "pods": [{"namespace": "ns", "name": "p", "uid": "u1",
//	            "containers": [{"name": "c", "devices": [...], "cpus": [0], "memory": [...]}]}]
//	}
//
// Each device is reported as its own ContainerDevices entry with its NUMA topology, as the
// kubelet's device manager does. The file is read once at start; it runs until SIGTERM.
//
// With --dir DIR instead of --socket/--allocations it stands in for many nodes' kubelets:
// for every DIR/<node>.json present at start it serves DIR/<node>.sock, and re-reads that
// file whenever its modification time changes (write it by rename), so the allocations can
// follow a simulated node (scenario placement).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	criutil "k8s.io/cri-client/pkg/util"
	"k8s.io/klog/v2"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesapiv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	apisgrpc "k8s.io/kubernetes/pkg/kubelet/apis/grpc"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"
)

type device struct {
	Resource string  `json:"resource"`
	ID       string  `json:"id"`
	NUMA     []int64 `json:"numa"`
}

type memory struct {
	Type string  `json:"type"`
	Size uint64  `json:"size"`
	NUMA []int64 `json:"numa"`
}

type container struct {
	Name    string   `json:"name"`
	Devices []device `json:"devices"`
	CPUs    []int64  `json:"cpus"`
	Memory  []memory `json:"memory"`
}

type pod struct {
	Namespace  string      `json:"namespace"`
	Name       string      `json:"name"`
	UID        string      `json:"uid"`
	Containers []container `json:"containers"`
}

type allocations struct {
	Allocatable struct {
		Devices []device `json:"devices"`
		CPUs    []int64  `json:"cpus"`
		Memory  []memory `json:"memory"`
	} `json:"allocatable"`
	Pods []pod `json:"pods"`
}

func topology(numa []int64) *podresourcesapi.TopologyInfo {
	if len(numa) == 0 {
		return nil
	}
	t := &podresourcesapi.TopologyInfo{}
	for _, n := range numa {
		t.Nodes = append(t.Nodes, &podresourcesapi.NUMANode{ID: n})
	}
	return t
}

func devices(ds []device) []*podresourcesapi.ContainerDevices {
	var out []*podresourcesapi.ContainerDevices
	for _, d := range ds {
		out = append(out, &podresourcesapi.ContainerDevices{
			ResourceName: d.Resource,
			DeviceIds:    []string{d.ID},
			Topology:     topology(d.NUMA),
		})
	}
	return out
}

func memories(ms []memory) []*podresourcesapi.ContainerMemory {
	var out []*podresourcesapi.ContainerMemory
	for _, m := range ms {
		out = append(out, &podresourcesapi.ContainerMemory{MemoryType: m.Type, Size: m.Size, Topology: topology(m.NUMA)})
	}
	return out
}

// fixed backs every provider interface of podresources.PodResourcesProviders.
type fixed struct {
	a    allocations
	pods []*v1.Pod
	// by pod UID, then container name
	conts map[string]map[string]container
}

func newFixed(a allocations) (*fixed, error) {
	f := &fixed{a: a, conts: map[string]map[string]container{}}
	for i, p := range a.Pods {
		if p.Name == "" || p.Namespace == "" || p.UID == "" {
			return nil, fmt.Errorf("pods[%d]: namespace, name and uid are required", i)
		}
		if _, dup := f.conts[p.UID]; dup {
			return nil, fmt.Errorf("pods[%d]: uid %q used twice", i, p.UID)
		}
		obj := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: types.UID(p.UID)}}
		f.conts[p.UID] = map[string]container{}
		for _, c := range p.Containers {
			obj.Spec.Containers = append(obj.Spec.Containers, v1.Container{Name: c.Name})
			f.conts[p.UID][c.Name] = c
		}
		f.pods = append(f.pods, obj)
	}
	return f, nil
}

// PodsProvider
func (f *fixed) GetActivePods() []*v1.Pod { return f.pods }
func (f *fixed) GetPods() []*v1.Pod       { return f.pods }
func (f *fixed) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	for _, p := range f.pods {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// DevicesProvider
func (f *fixed) UpdateAllocatedDevices(klog.Logger) {}
func (f *fixed) GetDevices(podUID, containerName string) []*podresourcesapi.ContainerDevices {
	return devices(f.conts[podUID][containerName].Devices)
}
func (f *fixed) GetAllocatableDevices(klog.Logger) []*podresourcesapi.ContainerDevices {
	return devices(f.a.Allocatable.Devices)
}

// CPUsProvider
func (f *fixed) GetCPUs(p *v1.Pod, c *v1.Container) []int64 {
	return f.conts[string(p.UID)][c.Name].CPUs
}
func (f *fixed) GetPodCPUs(string) []int64   { return nil }
func (f *fixed) GetAllocatableCPUs() []int64 { return f.a.Allocatable.CPUs }

// MemoryProvider
func (f *fixed) GetMemory(_ klog.Logger, p *v1.Pod, c *v1.Container) []*podresourcesapi.ContainerMemory {
	return memories(f.conts[string(p.UID)][c.Name].Memory)
}
func (f *fixed) GetPodMemory(klog.Logger, string) []*podresourcesapi.ContainerMemory { return nil }
func (f *fixed) GetAllocatableMemory(klog.Logger) []*podresourcesapi.ContainerMemory {
	return memories(f.a.Allocatable.Memory)
}

// DynamicResourcesProvider
func (f *fixed) GetDynamicResources(klog.Logger, *v1.Pod, *v1.Container) []*podresourcesapi.DynamicResource {
	return nil
}

func load(file string) (*fixed, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var a allocations
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	f, err := newFixed(a)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return f, nil
}

// reloading is a provider over a file that is re-read when its modification time changes;
// a file that cannot be read keeps the last good allocations (and says so on stderr).
type reloading struct {
	file  string
	mu    sync.Mutex
	cur   *fixed
	mtime time.Time
}

func (r *reloading) get() *fixed {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, err := os.Stat(r.file); err == nil && !st.ModTime().Equal(r.mtime) {
		if f, err := load(r.file); err == nil {
			r.cur, r.mtime = f, st.ModTime()
		} else {
			fmt.Fprintf(os.Stderr, "podresources: keeping the last allocations: %v\n", err)
		}
	}
	return r.cur
}

func (r *reloading) GetActivePods() []*v1.Pod { return r.get().GetActivePods() }
func (r *reloading) GetPods() []*v1.Pod       { return r.get().GetPods() }
func (r *reloading) GetPodByName(ns, name string) (*v1.Pod, bool) {
	return r.get().GetPodByName(ns, name)
}
func (r *reloading) UpdateAllocatedDevices(klog.Logger) {}
func (r *reloading) GetDevices(uid, c string) []*podresourcesapi.ContainerDevices {
	return r.get().GetDevices(uid, c)
}
func (r *reloading) GetAllocatableDevices(l klog.Logger) []*podresourcesapi.ContainerDevices {
	return r.get().GetAllocatableDevices(l)
}
func (r *reloading) GetCPUs(p *v1.Pod, c *v1.Container) []int64 { return r.get().GetCPUs(p, c) }
func (r *reloading) GetPodCPUs(uid string) []int64              { return r.get().GetPodCPUs(uid) }
func (r *reloading) GetAllocatableCPUs() []int64                { return r.get().GetAllocatableCPUs() }
func (r *reloading) GetMemory(l klog.Logger, p *v1.Pod, c *v1.Container) []*podresourcesapi.ContainerMemory {
	return r.get().GetMemory(l, p, c)
}
func (r *reloading) GetPodMemory(l klog.Logger, uid string) []*podresourcesapi.ContainerMemory {
	return r.get().GetPodMemory(l, uid)
}
func (r *reloading) GetAllocatableMemory(l klog.Logger) []*podresourcesapi.ContainerMemory {
	return r.get().GetAllocatableMemory(l)
}
func (r *reloading) GetDynamicResources(l klog.Logger, p *v1.Pod, c *v1.Container) []*podresourcesapi.DynamicResource {
	return nil
}

// serve starts the kubelet's pod-resources gRPC server on socket, set up as
// pkg/kubelet/server.ListenAndServePodResources does.
func serve(ctx context.Context, socket string, p interface {
	podresources.PodsProvider
	podresources.DevicesProvider
	podresources.CPUsProvider
	podresources.MemoryProvider
	podresources.DynamicResourcesProvider
}) (*grpc.Server, error) {
	providers := podresources.PodResourcesProviders{Pods: p, Devices: p, Cpus: p, Memory: p, DynamicResources: p}
	server := grpc.NewServer(apisgrpc.WithRateLimiter(ctx, "podresources", podresources.DefaultQPS, podresources.DefaultBurstTokens))
	podresourcesapiv1alpha1.RegisterPodResourcesListerServer(server, podresources.NewV1alpha1PodResourcesServer(providers))
	podresourcesapi.RegisterPodResourcesListerServer(server, podresources.NewV1PodResourcesServer(ctx, providers))
	l, err := criutil.CreateListener("unix://" + socket)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", socket, err)
	}
	go func() {
		if err := server.Serve(l); err != nil {
			fmt.Fprintf(os.Stderr, "podresources: serving %s: %v\n", socket, err)
			os.Exit(1)
		}
	}()
	return server, nil
}

func serveDir(ctx context.Context, dir string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		fmt.Fprintf(os.Stderr, "podresources: --dir %s: no <node>.json files\n", dir)
		os.Exit(1)
	}
	var servers []*grpc.Server
	for _, file := range files {
		r := &reloading{file: file}
		if r.get() == nil {
			fmt.Fprintf(os.Stderr, "podresources: %s: cannot be read\n", file)
			os.Exit(1)
		}
		s, err := serve(ctx, strings.TrimSuffix(file, ".json")+".sock", r)
		if err != nil {
			fmt.Fprintf(os.Stderr, "podresources: %v\n", err)
			os.Exit(1)
		}
		servers = append(servers, s)
	}
	fmt.Printf("podresources: serving %d nodes under %s\n", len(files), dir)
	<-ctx.Done()
	for i, s := range servers {
		s.Stop()
		_ = os.Remove(strings.TrimSuffix(files[i], ".json") + ".sock")
	}
}

func main() {
	socket := flag.String("socket", "", "unix socket path to serve on")
	file := flag.String("allocations", "", "JSON file with the fixed allocations")
	dir := flag.String("dir", "", "serve DIR/<node>.sock for every DIR/<node>.json (re-read on change)")
	klog.InitFlags(nil)
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if *dir != "" {
		serveDir(ctx, *dir)
		return
	}
	if *socket == "" || *file == "" {
		fmt.Fprintln(os.Stderr, "podresources: --socket and --allocations (or --dir) are required")
		os.Exit(2)
	}
	f, err := load(*file)
	if err != nil {
		fmt.Fprintf(os.Stderr, "podresources: --allocations: %v\n", err)
		os.Exit(1)
	}
	server, err := serve(ctx, *socket, f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "podresources: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("podresources: serving %d pods, %d allocatable devices on %s\n", len(f.pods), len(f.a.Allocatable.Devices), *socket)
	<-ctx.Done()
	server.Stop()
	_ = os.Remove(*socket)
}
