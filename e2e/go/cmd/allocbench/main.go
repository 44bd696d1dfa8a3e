// allocbench: the upstream structured allocator (k8s.io/dynamic-resource-allocation/structured),
// configured exactly as kube-scheduler v1.37.2 configures it from its default feature gates,
// timed on given ResourceSlices, DeviceClasses and claims.
//
//	allocbench --objects OBJECTS.json --claim CLAIM.json --node NAME [--reps N] [--timeout 10s]
//	           [--allocated POOL/DEVICE,...]
//
// OBJECTS.json: a JSON array of DeviceClasses and ResourceSlices (other kinds ignored).
// CLAIM.json: one ResourceClaim. Prints one JSON line: the median and minimum time of
// Allocate over the repetitions, and the devices of the first result (or "unsatisfiable",
// or the error, e.g. the timeout the scheduler's Filter also has).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	_ "k8s.io/kubernetes/pkg/features" // registers the Kubernetes feature gates with their defaults
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(c))
	for _, v := range c {
		out = append(out, v)
	}
	return out, nil
}

func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if v, ok := c[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("DeviceClass %q not found", name)
}

type result struct {
	Claim        string   `json:"claim"`
	Reps         int      `json:"reps"`
	MedianMs     float64  `json:"medianMs"`
	MinMs        float64  `json:"minMs"`
	Outcome      string   `json:"outcome"` // allocated | unsatisfiable | error
	Error        string   `json:"error,omitempty"`
	Devices      []string `json:"devices,omitempty"`
	FeatureNames []string `json:"features"`
}

func main() {
	objects := flag.String("objects", "", "JSON array of DeviceClasses and ResourceSlices")
	claimFile := flag.String("claim", "", "ResourceClaim (JSON)")
	nodeName := flag.String("node", "", "node name")
	reps := flag.Int("reps", 5, "repetitions")
	timeout := flag.Duration("timeout", 10*time.Second, "per-Allocate timeout (kube-scheduler's DRA Filter timeout is 10 s)")
	allocated := flag.String("allocated", "", "devices already allocated to other claims, POOL/DEVICE comma-separated (driver: the slices' driver)")
	flag.Parse()
	if err := run(*objects, *claimFile, *nodeName, *reps, *timeout, *allocated); err != nil {
		fmt.Fprintln(os.Stderr, "allocbench:", err)
		os.Exit(1)
	}
}

func run(objects, claimFile, nodeName string, reps int, timeout time.Duration, allocated string) error {
	raw, err := os.ReadFile(objects)
	if err != nil {
		return err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("%s: expected a JSON array of objects: %w", objects, err)
	}
	cls := classes{}
	var slices []*resourceapi.ResourceSlice
	for i, it := range items {
		var meta metav1.TypeMeta
		if err := json.Unmarshal(it, &meta); err != nil {
			return fmt.Errorf("%s[%d]: %w", objects, i, err)
		}
		switch meta.Kind {
		case "DeviceClass":
			var c resourceapi.DeviceClass
			if err := json.Unmarshal(it, &c); err != nil {
				return fmt.Errorf("%s[%d]: %w", objects, i, err)
			}
			cls[c.Name] = &c
		case "ResourceSlice":
			var s resourceapi.ResourceSlice
			if err := json.Unmarshal(it, &s); err != nil {
				return fmt.Errorf("%s[%d]: %w", objects, i, err)
			}
			slices = append(slices, &s)
		}
	}
	raw, err = os.ReadFile(claimFile)
	if err != nil {
		return err
	}
	var claim resourceapi.ResourceClaim
	if err := json.Unmarshal(raw, &claim); err != nil {
		return fmt.Errorf("%s: %w", claimFile, err)
	}
	if claim.UID == "" {
		claim.UID = "allocbench-claim"
	}
	features := dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/hostname": nodeName}}}
	celCache := cel.NewCache(10, cel.Features{EnableConsumableCapacity: features.ConsumableCapacity, EnableListTypeAttributes: features.ListTypeAttributes})
	res := result{Claim: claim.Name, Reps: reps, FeatureNames: sets.List(features.Set())}
	var times []float64
	for r := 0; r < reps; r++ {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		state := structured.AllocatedState{AllocatedDevices: allocatedIDs(allocated, slices),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
		t0 := time.Now()
		alloc, err := structured.NewAllocator(ctx, features, state, cls, slices, celCache)
		var out []resourceapi.AllocationResult
		if err == nil {
			out, err = alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{&claim})
		}
		times = append(times, float64(time.Since(t0).Microseconds())/1000)
		cancel()
		switch {
		case err != nil:
			res.Outcome, res.Error = "error", err.Error()
			if errors.Is(err, context.DeadlineExceeded) {
				res.Outcome = "timeout"
			}
		case out == nil:
			res.Outcome = "unsatisfiable"
		default:
			res.Outcome, res.Devices = "allocated", nil
			for _, d := range out[0].Devices.Results {
				res.Devices = append(res.Devices, d.Device)
			}
		}
		if res.Outcome == "timeout" {
			break // one timeout is the answer; do not wait out every repetition
		}
	}
	sort.Float64s(times)
	res.Reps, res.MedianMs, res.MinMs = len(times), times[len(times)/2], times[0]
	return json.NewEncoder(os.Stdout).Encode(res)
}

// allocatedIDs turns POOL/DEVICE entries into device IDs of the slices' driver.
func allocatedIDs(list string, slices []*resourceapi.ResourceSlice) sets.Set[structured.DeviceID] {
	ids := sets.New[structured.DeviceID]()
	if list == "" || len(slices) == 0 {
		return ids
	}
	driver := slices[0].Spec.Driver
	for _, e := range strings.Split(list, ",") {
		pool, dev, ok := strings.Cut(strings.TrimSpace(e), "/")
		if ok {
			ids.Insert(structured.MakeDeviceID(driver, pool, dev))
		}
	}
	return ids
}
