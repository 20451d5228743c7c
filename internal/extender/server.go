package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// maxArgsBytes caps a /filter or /prioritize body (ExtenderArgs). With
// nodeCacheCapable it holds the pod and the candidates' names; measured by
// TestBodyCapsHoldTheLargestCalls: 5,000 nodes named as cloud providers
// name them and a pod with 8 claims is 226 KiB; 5,000 names of 253
// characters (the longest a Node's name may be) with a pod of 1.5 MiB
// (etcd's default request limit, so no larger pod is stored) is 2.72 MiB.
// 4 MiB holds the latter with half as much again to spare. Without
// nodeCacheCapable kube-scheduler sends full Node objects (5 to 15 KiB each
// as kubelets report them): that fits for a few hundred nodes only.
const maxArgsBytes = 4 << 20

// maxBindingBytes caps a /bind body (ExtenderBindingArgs): four names,
// 660 bytes with the longest a pod's and a node's name may be (measured by
// TestBodyCapsHoldTheLargestCalls).
const maxBindingBytes = 4 << 10

// DefaultMaxInFlight is how many /filter and /prioritize requests the
// extender serves at once. kube-scheduler calls them from its one
// scheduling loop, one pod at a time, filter then prioritize: one request
// per scheduler at a time (the cluster's and the second scheduler), more
// only while a call kube-scheduler gave up on (httpTimeout) still runs.
// At 4 MiB a body (maxArgsBytes) this holds at most 32 MiB of bodies.
const DefaultMaxInFlight = 8

// DefaultMaxInFlightBinds is how many /bind requests the extender serves at
// once. kube-scheduler binds each pod in a goroutine of its own, so binds
// overlap: as many as the pods its scheduling loop chose during one bind's
// ledger write and Binding (tens of milliseconds), a handful to a few tens
// per scheduler. Their bodies are 4 KiB at most (maxBindingBytes).
const DefaultMaxInFlightBinds = 64

// Decider is what the HTTP handler asks: the Extender, or a stand-in in tests.
type Decider interface {
	// Filter returns the nodes that can hold the pod's volumes and why the others cannot.
	Filter(ctx context.Context, pod *corev1.Pod, candidates []string) ([]string, map[string]string, error)
	// Prioritize scores candidate nodes from 0 to 10.
	Prioritize(ctx context.Context, pod *corev1.Pod, candidates []string) (map[string]int64, error)
}

// Binder binds a pod to the node kube-scheduler chose: the Extender, when
// kube-scheduler's extender configuration sets bindVerb.
type Binder interface {
	// Bind binds the pod to args.Node, or says why not.
	Bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) error
}

// Observer receives the duration of each filter call.
type Observer interface {
	Observe(float64)
}

// HandlerOptions configure NewHandler.
type HandlerOptions struct {
	// FilterDuration, when set, receives the duration of each filter call.
	FilterDuration Observer
	// Bind serves POST /bind, with a Decider that is a Binder:
	// kube-scheduler's extender configuration sets bindVerb. Otherwise
	// /bind is answered 404 with a message.
	Bind bool
	// MaxInFlight caps the /filter and /prioritize requests served at once;
	// DefaultMaxInFlight when not positive.
	MaxInFlight int
	// MaxInFlightBinds caps the /bind requests served at once;
	// DefaultMaxInFlightBinds when not positive.
	MaxInFlightBinds int
}

// NewHandler returns the extender's HTTP handler: POST /filter, POST
// /prioritize, POST /bind when opts.Bind and d is a Binder, and GET
// /healthz. Bodies are capped (413 beyond, refused before they are read
// when their declared length is larger), malformed input is answered 400
// with a message, and requests beyond the in-flight caps 429 with
// Retry-After.
func NewHandler(d Decider, opts HandlerOptions) http.Handler {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxInFlightBinds <= 0 {
		opts.MaxInFlightBinds = DefaultMaxInFlightBinds
	}
	h := &handler{decider: d, filterDuration: opts.FilterDuration}
	mux := http.NewServeMux()
	decide := newInFlight(opts.MaxInFlight, "/filter and /prioritize")
	mux.Handle("POST /filter", decide.limit(http.HandlerFunc(h.filter)))
	mux.Handle("POST /prioritize", decide.limit(http.HandlerFunc(h.prioritize)))
	if b, ok := d.(Binder); ok && opts.Bind {
		binds := newInFlight(opts.MaxInFlightBinds, "/bind")
		mux.Handle("POST /bind", binds.limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { bind(b, w, r) })))
	} else {
		mux.HandleFunc("POST /bind", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "this extender does not bind: kube-scheduler's extender configuration sets no bindVerb "+
				"(start the manager with --extender-bind=true when it does)", http.StatusNotFound)
		})
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
	})
	return recoverPanics(mux)
}

type handler struct {
	decider        Decider
	filterDuration Observer
	// lastFilter is the most recent filter request, as sent and decoded:
	// kube-scheduler sends /prioritize the same ExtenderArgs when every
	// node the filters were asked about passed them, and those are not
	// decoded again.
	lastFilter atomic.Pointer[extenderArgs]
}

// extenderArgs is one request's ExtenderArgs, as sent and decoded, with
// its candidate node names; nodeCache tells which of the two node forms
// was sent. Nothing changes it once decoded.
type extenderArgs struct {
	body      []byte
	args      *extenderv1.ExtenderArgs
	names     []string
	nodeCache bool
}

// readBody reads r's body, what kind of body it is, up to limit bytes. A
// body whose declared length is larger is refused before any of it is
// read, one that turns out larger once limit bytes are read: both are
// answered 413, and false returned, as for a body that cannot be read (400).
func readBody(w http.ResponseWriter, r *http.Request, what string, limit int64) ([]byte, bool) {
	tooLarge := fmt.Sprintf("%s body too large: the extender reads at most %d bytes", what, limit)
	if r.ContentLength > limit {
		http.Error(w, fmt.Sprintf("%s, this one declares %d", tooLarge, r.ContentLength), http.StatusRequestEntityTooLarge)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		http.Error(w, tooLarge, http.StatusRequestEntityTooLarge)
		return nil, false
	case err != nil:
		http.Error(w, fmt.Sprintf("reading the %s body: %v", what, err), http.StatusBadRequest)
		return nil, false
	}
	return body, true
}

// readArgs reads ExtenderArgs, or answers why not and returns nil; a body
// equal to same's is same's, not decoded again.
func readArgs(w http.ResponseWriter, r *http.Request, same *extenderArgs) *extenderArgs {
	body, ok := readBody(w, r, "ExtenderArgs", maxArgsBytes)
	if !ok {
		return nil
	}
	if same != nil && bytes.Equal(body, same.body) {
		return same
	}
	args, err := decodeArgs(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	return args
}

// decodeArgs decodes body, ExtenderArgs, and finds the pod and its
// candidate node names.
func decodeArgs(body []byte) (*extenderArgs, error) {
	args := &extenderv1.ExtenderArgs{}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(args); err != nil {
		return nil, fmt.Errorf("decoding ExtenderArgs: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decoding ExtenderArgs: trailing data after the JSON object")
	}
	if args.Pod == nil {
		return nil, errors.New("ExtenderArgs.Pod is missing")
	}
	if args.Pod.Name == "" {
		return nil, errors.New("ExtenderArgs.Pod has no name")
	}
	switch {
	case args.NodeNames != nil:
		return &extenderArgs{body: body, args: args, names: append([]string(nil), *args.NodeNames...), nodeCache: true}, nil
	case args.Nodes != nil:
		names := make([]string, 0, len(args.Nodes.Items))
		for i := range args.Nodes.Items {
			names = append(names, args.Nodes.Items[i].Name)
		}
		return &extenderArgs{body: body, args: args, names: names}, nil
	}
	return nil, errors.New("ExtenderArgs has neither NodeNames nor Nodes")
}

func (h *handler) filter(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req := readArgs(w, r, nil)
	if req == nil {
		return
	}
	h.lastFilter.Store(req)
	args, names := req.args, req.names
	result := extenderv1.ExtenderFilterResult{}
	passed, failed, err := h.decider.Filter(r.Context(), args.Pod, names)
	if err != nil {
		// An error for the pod, not the request: kube-scheduler reports it on the pod.
		result.Error = err.Error()
		ctrl.LoggerFrom(r.Context()).Error(err, "Filtering nodes", "pod", args.Pod.Namespace+"/"+args.Pod.Name)
	} else {
		result.FailedNodes = failed
		if req.nodeCache {
			result.NodeNames = &passed
		} else {
			keep := map[string]bool{}
			for _, n := range passed {
				keep[n] = true
			}
			list := &corev1.NodeList{}
			for i := range args.Nodes.Items {
				if keep[args.Nodes.Items[i].Name] {
					list.Items = append(list.Items, args.Nodes.Items[i])
				}
			}
			result.Nodes = list
		}
	}
	writeJSON(w, result)
	if h.filterDuration != nil {
		h.filterDuration.Observe(time.Since(start).Seconds())
	}
}

func (h *handler) prioritize(w http.ResponseWriter, r *http.Request) {
	req := readArgs(w, r, h.lastFilter.Load())
	if req == nil {
		return
	}
	names := req.names
	scores, err := h.decider.Prioritize(r.Context(), req.args.Pod, names)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	list := make(extenderv1.HostPriorityList, 0, len(names))
	for _, n := range names {
		list = append(list, extenderv1.HostPriority{Host: n, Score: min(max(scores[n], 0), extenderv1.MaxExtenderPriority)})
	}
	writeJSON(w, list)
}

// bind decodes ExtenderBindingArgs and answers ExtenderBindingResult, with
// the binder's error in it.
func bind(b Binder, w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, "ExtenderBindingArgs", maxBindingBytes)
	if !ok {
		return
	}
	args := &extenderv1.ExtenderBindingArgs{}
	if err := json.Unmarshal(body, args); err != nil {
		http.Error(w, fmt.Sprintf("decoding ExtenderBindingArgs: %v", err), http.StatusBadRequest)
		return
	}
	if args.PodName == "" || args.PodNamespace == "" || args.PodUID == "" || args.Node == "" {
		http.Error(w, "ExtenderBindingArgs needs podName, podNamespace, podUID and node", http.StatusBadRequest)
		return
	}
	result := extenderv1.ExtenderBindingResult{}
	if err := b.Bind(r.Context(), args); err != nil {
		result.Error = err.Error()
		ctrl.LoggerFrom(r.Context()).Info("Bind failed; kube-scheduler schedules the pod again",
			"pod", args.PodNamespace+"/"+args.PodName, "node", args.Node, "reason", err.Error())
	}
	writeJSON(w, result)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// recoverPanics turns a panic in a handler into a 500 instead of a crash.
func recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				ctrl.LoggerFrom(r.Context()).Error(fmt.Errorf("%v", p), "Extender handler panicked", "path", r.URL.Path)
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// inFlight caps the requests of some paths served at once.
type inFlight struct {
	slots chan struct{}
	paths string
}

func newInFlight(n int, paths string) *inFlight {
	return &inFlight{slots: make(chan struct{}, n), paths: paths}
}

// limit serves a request while a slot is free, and answers 429 with
// Retry-After at once otherwise: kube-scheduler reports the error on the
// pod and schedules it again later.
func (f *inFlight) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case f.slots <- struct{}{}:
			defer func() { <-f.slots }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("the extender already serves %d requests to %s, as many as it serves at once; retry later",
				cap(f.slots), f.paths), http.StatusTooManyRequests)
		}
	})
}
