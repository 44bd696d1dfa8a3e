package main

// A transparent unix-socket proxy in front of the plugin's registration socket that
// records the HTTP/2 :authority and :path of every request the kubelet's client sends.
//
// The plugin creates its registration socket in realDir; the proxy mirrors each socket it
// finds there into watchDir (the directory the kubelet's plugin watcher watches), and
// recreates the mirror whenever the plugin recreates its socket (a restart), so the
// watcher sees a new registration exactly when the kubelet would.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

type request struct{ authority, path string }

type mirror struct {
	realDir, watchDir string
	mu                sync.Mutex
	requests          []request
	listeners         map[string]net.Listener // by socket name
	inodes            map[string]string       // identity of each mirrored socket: inode and change time
}

func newMirror(realDir, watchDir string) *mirror {
	return &mirror{realDir: realDir, watchDir: watchDir, listeners: map[string]net.Listener{}, inodes: map[string]string{}}
}

// takeRequests returns and forgets the requests seen so far.
func (m *mirror) takeRequests() []request {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.requests
	m.requests = nil
	return r
}

// run polls realDir every 50 ms until stop is closed.
func (m *mirror) run(stop <-chan struct{}) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		m.sync()
		select {
		case <-stop:
			m.mu.Lock()
			for name, l := range m.listeners {
				l.Close()
				os.Remove(filepath.Join(m.watchDir, name))
			}
			m.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

func (m *mirror) sync() {
	entries, _ := os.ReadDir(m.realDir)
	present := map[string]string{} // an inode number alone can be reused by the recreated socket
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		fi, err := os.Stat(filepath.Join(m.realDir, e.Name()))
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			present[e.Name()] = fmt.Sprintf("%d/%d.%d", st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, l := range m.listeners {
		if ino, ok := present[name]; !ok || ino != m.inodes[name] {
			l.Close()
			os.Remove(filepath.Join(m.watchDir, name))
			delete(m.listeners, name)
			fmt.Printf("INFO: plugin socket %s gone or replaced; mirror removed\n", name)
		}
	}
	for name, ino := range present {
		if _, ok := m.listeners[name]; ok {
			continue
		}
		path := filepath.Join(m.watchDir, name)
		os.Remove(path)
		l, err := net.Listen("unix", path)
		if err != nil {
			fmt.Printf("INFO: cannot mirror %s: %v\n", name, err)
			continue
		}
		m.listeners[name], m.inodes[name] = l, ino
		go m.accept(l, filepath.Join(m.realDir, name))
	}
}

func (m *mirror) accept(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go m.forward(c, target)
	}
}

func (m *mirror) forward(client net.Conn, target string) {
	defer client.Close()
	server, err := net.Dial("unix", target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() { _, _ = io.Copy(client, server); client.Close() }()
	pr, pw := io.Pipe()
	go m.sniff(pr)
	_, _ = io.Copy(io.MultiWriter(server, pw), client)
	pw.Close()
}

// sniff decodes the client's HTTP/2 frames and records each request's pseudo-headers.
func (m *mirror) sniff(r io.Reader) {
	defer func() { _, _ = io.Copy(io.Discard, r) }()
	br := bufio.NewReader(r)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(nil, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		if mh, ok := f.(*http2.MetaHeadersFrame); ok {
			req := request{authority: mh.PseudoValue("authority"), path: mh.PseudoValue("path")}
			m.mu.Lock()
			m.requests = append(m.requests, req)
			m.mu.Unlock()
		}
	}
}

func (r request) String() string {
	return fmt.Sprintf("%s :authority=%q", strings.TrimSpace(r.path), r.authority)
}
