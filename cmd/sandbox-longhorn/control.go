package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
)

// node is what runs in this process for one sandbox node: its instance
// manager and its longhorn-manager.
type node struct {
	// instanceManager is the node's instance manager (nil without the
	// data plane).
	instanceManager *dataplane.Listeners
	// stopManager stops the node's longhorn-manager: its controllers and
	// its datastore's informers.
	stopManager context.CancelFunc
}

// nodes are the sandbox's nodes by name, as far as this process runs them.
type nodes struct {
	mu     sync.Mutex
	byName map[string]*node
	log    logrus.FieldLogger
	// network is the data plane's network (nil without it): what the
	// replicas hold, where the sandbox's writes go.
	network *dataplane.Network
}

func newNodes(log logrus.FieldLogger) *nodes {
	return &nodes{byName: map[string]*node{}, log: log}
}

// get returns name's node, adding it when it is new.
func (ns *nodes) get(name string) *node {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	n := ns.byName[name]
	if n == nil {
		n = &node{}
		ns.byName[name] = n
	}
	return n
}

// stop takes name down as a node dies: its instance manager stops (its
// ports refuse connections, and the engines of other nodes find its
// replicas in error) and its longhorn-manager stops (its controllers'
// workers and its informers; the monitors Longhorn's controllers started
// keep their goroutines, but reach only the stopped instance manager and
// the stopped controllers' queues). Nothing is written to the API server:
// the other nodes' longhorn-managers find the node down through Kubernetes.
// Longhorn's webhooks and REST API, served in this process by a datastore
// of their own, keep serving, as in a cluster a Service sends them to a
// longhorn-manager on a live node. A stopped node stays down.
func (ns *nodes) stop(name string) error {
	ns.mu.Lock()
	n := ns.byName[name]
	ns.mu.Unlock()
	if n == nil {
		return fmt.Errorf("no node %s", name)
	}
	start := time.Now()
	if n.instanceManager != nil {
		n.instanceManager.Stop()
	}
	if n.stopManager != nil {
		n.stopManager()
	}
	ns.log.Infof("Node %s is down: its instance manager and longhorn-manager stopped in %s", name, time.Since(start).Round(time.Millisecond))
	return nil
}

// serveControl serves the sandbox's requests on a Unix socket at path until
// ctx ends: POST /nodes/{name}/stop takes the node down (nodes.stop) and
// answers once it is; POST /volumes/{name}/write?bytes=N writes N bytes
// into the volume through its engine (writeVolume); GET /disks answers
// what each disk holds. A socket in the sandbox's own directory rather than a
// port: no port has to be found, and only who may write that directory
// can ask. It returns once the socket listens.
func serveControl(ctx context.Context, path string, ns *nodes) error {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("the control socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /nodes/{name}/stop", func(w http.ResponseWriter, r *http.Request) {
		if err := ns.stop(r.PathValue("name")); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = fmt.Fprintf(w, "node %s is down\n", r.PathValue("name"))
	})
	mux.HandleFunc("POST /volumes/{name}/write", ns.writeVolume)
	mux.HandleFunc("GET /disks", ns.disks)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
		_ = os.Remove(path)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ns.log.WithError(err).Error("The control socket stopped serving")
		}
	}()
	return nil
}

// writeVolume writes the bytes the query asks for (bytes=N) into the named
// volume through the data plane (dataplane.Network.Write) and answers what
// the write did as JSON (dataplane.WriteResult): 200 when it was taken,
// 507 Insufficient Storage with the result when no replica could take it
// (every replica's disk full: ENOSPC), 409 when the volume cannot take
// writes (not attached, or no replica in RW mode), 400 for a malformed
// count and 503 without a data plane.
func (ns *nodes) writeVolume(w http.ResponseWriter, r *http.Request) {
	if ns.network == nil {
		http.Error(w, "no data plane runs here", http.StatusServiceUnavailable)
		return
	}
	bytes, err := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
	if err != nil || bytes < 0 {
		http.Error(w, fmt.Sprintf("bytes=%q: want a count of bytes, 0 or more", r.URL.Query().Get("bytes")), http.StatusBadRequest)
		return
	}
	res, err := ns.network.Write(r.PathValue("name"), bytes)
	code := http.StatusOK
	switch {
	case errors.Is(err, dataplane.ErrNoSpace):
		code = http.StatusInsufficientStorage
	case err != nil:
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(res)
}

// disks answers what each disk of the data plane holds, as JSON
// ([]dataplane.DiskBytes); 503 without a data plane.
func (ns *nodes) disks(w http.ResponseWriter, _ *http.Request) {
	if ns.network == nil {
		http.Error(w, "no data plane runs here", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ns.network.Disks())
}
