package main

// The prepare/unprepare steps, through the kubelet's DRA manager (pod level) or its DRA
// gRPC client (claim level), and the CDI spec check.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin"
)

func (h *harness) getPod(ref string) (*v1.Pod, error) {
	ns, name := splitRef(ref)
	return h.client.CoreV1().Pods(ns).Get(h.ctx, name, metav1.GetOptions{})
}

func (h *harness) preparePod(ref string) bool {
	pod, err := h.getPod(ref)
	if err != nil {
		fmt.Printf("FAIL: prepare-pod %s: %v\n", ref, err)
		return false
	}
	h.podsMu.Lock()
	h.pods = append(h.pods, pod)
	h.podsMu.Unlock()
	t0 := time.Now()
	if err := h.mgr.PrepareResources(h.ctx, pod); err != nil {
		fmt.Printf("FAIL: kubelet DRA manager PrepareResources(%s): %v\n", ref, err)
		return false
	}
	ms := time.Since(t0).Milliseconds()
	for i := range pod.Spec.Containers {
		info, err := h.mgr.GetResources(pod, &pod.Spec.Containers[i])
		if err != nil {
			fmt.Printf("FAIL: kubelet DRA manager GetResources(%s/%s): %v\n", ref, pod.Spec.Containers[i].Name, err)
			return false
		}
		var ids []string
		for _, d := range info.CDIDevices {
			ids = append(ids, d.Name)
		}
		fmt.Printf("INFO: container %s gets CDI devices %v\n", pod.Spec.Containers[i].Name, ids)
	}
	fmt.Printf("PASS: kubelet DRA manager prepared pod %s in %d ms\n", ref, ms)
	return true
}

func (h *harness) unpreparePod(ref string) bool {
	pod, err := h.getPod(ref)
	if err != nil {
		fmt.Printf("FAIL: unprepare-pod %s: %v\n", ref, err)
		return false
	}
	if err := h.mgr.UnprepareResources(h.ctx, pod); err != nil {
		fmt.Printf("FAIL: kubelet DRA manager UnprepareResources(%s): %v\n", ref, err)
		return false
	}
	h.podsMu.Lock()
	for i, p := range h.pods {
		if p.UID == pod.UID {
			h.pods = append(h.pods[:i], h.pods[i+1:]...)
			break
		}
	}
	h.podsMu.Unlock()
	fmt.Printf("PASS: kubelet DRA manager unprepared pod %s\n", ref)
	return true
}

func (h *harness) getClaim(ref string) (*resourceapi.ResourceClaim, error) {
	ns, name := splitRef(ref)
	return h.client.ResourceV1().ResourceClaims(ns).Get(h.ctx, name, metav1.GetOptions{})
}

// draClient: the kubelet's gRPC client of the registered driver.
func (h *harness) draClient(what string) (*plugin.DRAPlugin, bool) {
	p, err := h.pm.GetPlugin(h.driver)
	if err != nil {
		fmt.Printf("FAIL: %s: the kubelet has no plugin %s: %v\n", what, h.driver, err)
		return nil, false
	}
	return p, true
}

// prepareClaim calls NodePrepareResources for one claim through the kubelet's client and
// checks the outcome: wantOK=false expects the driver to refuse it.
func (h *harness) prepareClaim(ref string, wantOK bool) bool {
	claim, err := h.getClaim(ref)
	if err != nil {
		fmt.Printf("FAIL: prepare %s: %v\n", ref, err)
		return false
	}
	p, ok := h.draClient("prepare " + ref)
	if !ok {
		return false
	}
	req := &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)}}}
	t0 := time.Now()
	resp, err := p.NodePrepareResources(h.ctx, req)
	ms := time.Since(t0).Milliseconds()
	var outcome string
	var devices []string
	failed := err != nil
	if err != nil {
		outcome = "gRPC error: " + err.Error()
	} else if r := resp.Claims[string(claim.UID)]; r == nil {
		failed, outcome = true, "no answer for the claim"
	} else if r.Error != "" {
		failed, outcome = true, "claim error: "+r.Error
	} else {
		for _, d := range r.Devices {
			devices = append(devices, fmt.Sprintf("%s/%s%v", d.PoolName, d.DeviceName, d.CdiDeviceIds))
		}
		outcome = fmt.Sprintf("%d devices %v", len(r.Devices), devices)
	}
	fmt.Printf("INFO: NodePrepareResources %s (%d ms): %s\n", ref, ms, outcome)
	switch {
	case wantOK && !failed:
		want := allocatedDevices(claim, h.driver)
		if len(devices) != len(want) {
			fmt.Printf("FAIL: prepare %s returned %d devices, the allocation has %d\n", ref, len(devices), len(want))
			return false
		}
		fmt.Printf("PASS: prepare %s: %d devices in %d ms\n", ref, len(devices), ms)
		return true
	case !wantOK && failed:
		fmt.Printf("PASS: prepare %s refused: %s\n", ref, outcome)
		return true
	case wantOK:
		fmt.Printf("FAIL: prepare %s: %s\n", ref, outcome)
	default:
		fmt.Printf("FAIL: prepare %s was accepted, expected a refusal\n", ref)
	}
	return false
}

func (h *harness) unprepareClaim(ref string, wantOK bool) bool {
	claim, err := h.getClaim(ref)
	if err != nil {
		fmt.Printf("FAIL: unprepare %s: %v\n", ref, err)
		return false
	}
	p, ok := h.draClient("unprepare " + ref)
	if !ok {
		return false
	}
	req := &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)}}}
	resp, err := p.NodeUnprepareResources(h.ctx, req)
	failed, outcome := err != nil, "ok"
	if err != nil {
		outcome = "gRPC error: " + err.Error()
	} else if r := resp.Claims[string(claim.UID)]; r == nil {
		failed, outcome = true, "no answer for the claim"
	} else if r.Error != "" {
		failed, outcome = true, "claim error: "+r.Error
	}
	fmt.Printf("INFO: NodeUnprepareResources %s: %s\n", ref, outcome)
	if failed == wantOK {
		fmt.Printf("FAIL: unprepare %s: %s (expected %s)\n", ref, outcome, map[bool]string{true: "success", false: "a refusal"}[wantOK])
		return false
	}
	fmt.Printf("PASS: unprepare %s: %s\n", ref, outcome)
	return true
}

// allocatedDevices: the claim's allocation results for this driver, as pool/device.
func allocatedDevices(c *resourceapi.ResourceClaim, driver string) []string {
	var out []string
	if c.Status.Allocation == nil {
		return out
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == driver {
			out = append(out, r.Pool+"/"+r.Device)
		}
	}
	sort.Strings(out)
	return out
}

// checkCDI: the claim's CDI spec (topoalign.dev-claim_<uid>.json, devices named
// <uid>-<device>) lists exactly the claim's allocated devices; or it is gone.
func (h *harness) checkCDI(ref string, present bool) bool {
	claim, err := h.getClaim(ref)
	if err != nil {
		fmt.Printf("FAIL: cdi %s: %v\n", ref, err)
		return false
	}
	uid := string(claim.UID)
	var files []string
	entries, _ := os.ReadDir(h.cdiDir)
	for _, e := range entries {
		if strings.Contains(e.Name(), uid) {
			files = append(files, e.Name())
		}
	}
	if !present {
		if len(files) == 0 {
			fmt.Printf("PASS: no CDI spec left for %s\n", ref)
			return true
		}
		fmt.Printf("FAIL: CDI specs left for %s after unprepare: %v\n", ref, files)
		return false
	}
	if len(files) != 1 {
		fmt.Printf("FAIL: expected one CDI spec for %s in %s, found %v\n", ref, h.cdiDir, files)
		return false
	}
	raw, err := os.ReadFile(filepath.Join(h.cdiDir, files[0]))
	if err != nil {
		fmt.Printf("FAIL: cdi %s: %v\n", ref, err)
		return false
	}
	var spec struct {
		Kind    string `json:"kind"`
		Devices []struct {
			Name           string `json:"name"`
			ContainerEdits struct {
				DeviceNodes []struct {
					Path string `json:"path"`
				} `json:"deviceNodes"`
			} `json:"containerEdits"`
		} `json:"devices"`
		ContainerEdits struct {
			Env []string `json:"env"`
		} `json:"containerEdits"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		fmt.Printf("FAIL: CDI spec %s is not valid JSON: %v\n", files[0], err)
		return false
	}
	var got, want []string
	for _, d := range spec.Devices {
		got = append(got, strings.TrimPrefix(d.Name, uid+"-"))
		var nodes []string
		for _, n := range d.ContainerEdits.DeviceNodes {
			nodes = append(nodes, n.Path)
		}
		fmt.Printf("INFO: CDI %s device %s nodes %v\n", spec.Kind, d.Name, nodes)
	}
	for _, d := range allocatedDevices(claim, h.driver) {
		want = append(want, d[strings.Index(d, "/")+1:])
	}
	sort.Strings(got)
	sort.Strings(want)
	fmt.Printf("INFO: CDI env %v\n", spec.ContainerEdits.Env)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		fmt.Printf("FAIL: CDI spec %s holds %v, the allocation is %v\n", files[0], got, want)
		return false
	}
	fmt.Printf("PASS: CDI spec %s holds exactly the %d allocated devices\n", files[0], len(want))
	return true
}
