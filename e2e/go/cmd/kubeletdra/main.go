// kubeletdra: the kubelet's own DRA code against a real DRA driver and API server.
//
// It runs the kubelet's plugin watcher (pkg/kubelet/pluginmanager) with the DRA manager
// (pkg/kubelet/cm/dra) as the DRAPlugin handler, exactly as the kubelet wires them, and a
// real client of the API server. A transparent proxy in front of the registration socket
// records the :authority the kubelet's registration client sends.
//
// It reads one step per line on stdin and ends each step's output with "STEP-DONE ok" or
// "STEP-DONE fail"; checks print PASS:/FAIL: lines. Steps:
//
//	start                        start the driver (--driver-cmd, run with bash -c)
//	kill | stop                  SIGKILL | SIGTERM the driver and wait for it
//	register                     wait until the kubelet registered the driver; print the :authority seen
//	prepare-pod NS/POD           the DRA manager's PrepareResources + GetResources (CDI ids)
//	unprepare-pod NS/POD         the DRA manager's UnprepareResources
//	prepare NS/CLAIM ok|refused  NodePrepareResources through the kubelet's DRA client
//	unprepare NS/CLAIM ok|refused
//	cdi NS/CLAIM present|absent  the claim's CDI spec holds exactly its allocated devices | is gone
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	dramanager "k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
)

type harness struct {
	ctx       context.Context
	client    kubernetes.Interface
	mgr       *dramanager.Manager
	pm        *plugin.DRAPluginManager
	mirror    *mirror
	driver    string
	node      string
	cdiDir    string
	driverCmd string
	driverLog string
	pidFile   string
	proc      *exec.Cmd
	exited    chan struct{}
	restarted bool // the driver was stopped: register must see a new registration
	podsMu    sync.Mutex
	pods      []*v1.Pod // the pods the kubelet knows (the DRA manager's active pods)
}

func (h *harness) activePods() []*v1.Pod {
	h.podsMu.Lock()
	defer h.podsMu.Unlock()
	return append([]*v1.Pod(nil), h.pods...)
}

type allReady struct{}

func (allReady) AddSource(string) {}
func (allReady) AllReady() bool   { return true }

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server")
	node := flag.String("node", "", "node name")
	driver := flag.String("driver", "topoalign.dev", "DRA driver name")
	realReg := flag.String("plugin-registry-dir", "", "where the driver creates its registration socket")
	watchDir := flag.String("watch-dir", "", "the directory the kubelet's plugin watcher watches (mirrors of the driver's sockets)")
	stateDir := flag.String("state-dir", "", "the kubelet DRA manager's checkpoint directory")
	cdiDir := flag.String("cdi-dir", "", "the driver's CDI directory")
	driverCmd := flag.String("driver-cmd", "", "command that runs the driver (bash -c)")
	driverLog := flag.String("driver-log", "", "file the driver's output is appended to")
	pidFile := flag.String("driver-pid-file", "", "file that holds the running driver's PID (for the harness's teardown)")
	klog.InitFlags(nil)
	flag.Parse()
	for _, f := range []struct{ n, v string }{{"node", *node}, {"plugin-registry-dir", *realReg}, {"watch-dir", *watchDir},
		{"state-dir", *stateDir}, {"cdi-dir", *cdiDir}, {"driver-cmd", *driverCmd}, {"driver-log", *driverLog}} {
		if f.v == "" {
			fmt.Fprintf(os.Stderr, "kubeletdra: --%s is required\n", f.n)
			os.Exit(2)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeletdra:", err)
		os.Exit(1)
	}
	h := &harness{ctx: ctx, client: kubernetes.NewForConfigOrDie(cfg), driver: *driver, node: *node, cdiDir: *cdiDir,
		driverCmd: *driverCmd, driverLog: *driverLog, pidFile: *pidFile}
	for _, d := range []string{*realReg, *watchDir, *stateDir} {
		_ = os.MkdirAll(d, 0o755)
	}

	// The kubelet's wiring: DRA manager, started with the pods it knows, as the handler of
	// the plugin watcher for type DRAPlugin.
	h.mgr, err = dramanager.NewManager(klog.Background(), h.client, *stateDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeletdra: dra.NewManager:", err)
		os.Exit(1)
	}
	getNode := func(ctx context.Context) (*v1.Node, error) {
		return h.client.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{})
	}
	if err := h.mgr.Start(ctx, h.activePods, getNode, allReady{}); err != nil {
		fmt.Fprintln(os.Stderr, "kubeletdra: dra manager Start:", err)
		os.Exit(1)
	}
	defer h.mgr.Stop()
	h.pm = h.mgr.GetWatcherHandler().(*plugin.DRAPluginManager)
	watcher := pluginmanager.NewPluginManager(*watchDir, record.NewFakeRecorder(100))
	watcher.AddHandler(registerapi.DRAPlugin, h.mgr.GetWatcherHandler())
	stop := make(chan struct{})
	go watcher.Run(ctx, allReady{}, stop)
	h.mirror = newMirror(*realReg, *watchDir)
	go h.mirror.run(stop)

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		ok := h.step(strings.Fields(line))
		if ok {
			fmt.Println("STEP-DONE ok")
		} else {
			fmt.Println("STEP-DONE fail")
		}
	}
	close(stop)
	h.stopDriver(syscall.SIGTERM)
}

func (h *harness) step(f []string) bool {
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	switch f[0] {
	case "start":
		return h.startDriver(f[1:])
	case "crashed":
		return h.waitCrashed()
	case "kill":
		return h.stopDriver(syscall.SIGKILL)
	case "stop":
		return h.stopDriver(syscall.SIGTERM)
	case "register":
		return h.register()
	case "prepare-pod":
		return h.preparePod(arg(1))
	case "unprepare-pod":
		return h.unpreparePod(arg(1))
	case "prepare":
		return h.prepareClaim(arg(1), arg(2) != "refused")
	case "unprepare":
		return h.unprepareClaim(arg(1), arg(2) != "refused")
	case "cdi":
		return h.checkCDI(arg(1), arg(2) != "absent")
	}
	fmt.Printf("FAIL: kubeletdra: unknown step %q\n", strings.Join(f, " "))
	return false
}

// startDriver starts the driver command, with extra arguments appended (e.g. a crash point).
func (h *harness) startDriver(extra []string) bool {
	if h.proc != nil {
		fmt.Println("FAIL: kubeletdra: start: the driver is already running")
		return false
	}
	logf, err := os.OpenFile(h.driverLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Println("FAIL: kubeletdra: driver log:", err)
		return false
	}
	line := h.driverCmd
	for _, a := range extra {
		line += " '" + strings.ReplaceAll(a, "'", "'\\''") + "'"
	}
	cmd := exec.Command("bash", "-c", "exec "+line)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		fmt.Println("FAIL: kubeletdra: starting the driver:", err)
		return false
	}
	logf.Close()
	h.proc, h.exited = cmd, make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(cmd, h.exited)
	if h.pidFile != "" {
		_ = os.WriteFile(h.pidFile, []byte(fmt.Sprintf("%d\n", cmd.Process.Pid)), 0o644)
	}
	fmt.Printf("INFO: driver started, pid %d\n", cmd.Process.Pid)
	return true
}

func (h *harness) stopDriver(sig syscall.Signal) bool {
	if h.proc == nil {
		return true
	}
	_ = h.proc.Process.Signal(sig)
	select {
	case <-h.exited:
	case <-time.After(15 * time.Second):
		_ = h.proc.Process.Kill()
		<-h.exited
	}
	fmt.Printf("INFO: driver pid %d stopped with %v (%s)\n", h.proc.Process.Pid, sig, h.proc.ProcessState)
	h.proc = nil
	h.restarted = true
	h.mirror.takeRequests()
	if h.pidFile != "" {
		_ = os.Remove(h.pidFile)
	}
	return true
}

// waitCrashed waits until the driver process ended by itself (a requested crash) and
// forgets it, as a kill would.
func (h *harness) waitCrashed() bool {
	if h.proc == nil {
		fmt.Println("FAIL: kubeletdra: crashed: no driver was running")
		return false
	}
	select {
	case <-h.exited:
	case <-time.After(15 * time.Second):
		fmt.Println("FAIL: kubeletdra: the driver did not crash within 15 s")
		return false
	}
	fmt.Printf("INFO: driver pid %d ended by itself (%s)\n", h.proc.Process.Pid, h.proc.ProcessState)
	h.proc = nil
	h.restarted = true
	h.mirror.takeRequests()
	if h.pidFile != "" {
		_ = os.Remove(h.pidFile)
	}
	return true
}

// register waits until the kubelet's DRA plugin manager has the driver, and reports the
// requests the kubelet's registration client sent.
func (h *harness) register() bool {
	t0 := time.Now()
	deadline := t0.Add(30 * time.Second)
	var seen []request
	notified := !h.restarted // after a restart, wait for the kubelet to register the new process
	for time.Now().Before(deadline) {
		for _, r := range h.mirror.takeRequests() {
			seen = append(seen, r)
			if strings.HasSuffix(r.path, "/NotifyRegistrationStatus") {
				notified = true
			}
		}
		if h.proc != nil {
			select {
			case <-h.exited:
				fmt.Printf("FAIL: kubelet registration: the driver exited (%s); see %s\n", h.proc.ProcessState, h.driverLog)
				h.proc = nil
				return false
			default:
			}
		}
		if _, err := h.pm.GetPlugin(h.driver); err == nil && notified {
			h.restarted = false
			for _, r := range seen {
				fmt.Printf("INFO: kubelet registration client sent %s\n", r)
			}
			fmt.Printf("PASS: the kubelet's plugin watcher + DRA manager registered %s in %d ms\n", h.driver, time.Since(t0).Milliseconds())
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, r := range append(seen, h.mirror.takeRequests()...) {
		fmt.Printf("INFO: kubelet registration client sent %s\n", r)
	}
	fmt.Printf("FAIL: the kubelet did not register %s within 30 s (driver log: %s)\n", h.driver, h.driverLog)
	return false
}

func splitRef(ref string) (string, string) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return "default", ref
	}
	return ns, name
}
