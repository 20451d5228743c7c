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

// maxBodyBytes caps request bodies: a filter request for thousands of full
// Node objects stays well below it.
const maxBodyBytes = 64 << 20

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

// NewHandler returns the extender's HTTP handler: POST /filter, POST
// /prioritize, POST /bind when d is a Binder, and GET /healthz, with bodies
// capped and malformed input answered 400 with a message.
func NewHandler(d Decider, filterDuration Observer) http.Handler {
	h := &handler{decider: d, filterDuration: filterDuration}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /filter", h.filter)
	mux.HandleFunc("POST /prioritize", h.prioritize)
	if b, ok := d.(Binder); ok {
		mux.HandleFunc("POST /bind", func(w http.ResponseWriter, r *http.Request) { bind(b, w, r) })
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

// readArgs reads ExtenderArgs; a body equal to same's is same's, not
// decoded again.
func readArgs(w http.ResponseWriter, r *http.Request, same *extenderArgs) (*extenderArgs, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("decoding ExtenderArgs: %w", err)
	}
	if same != nil && bytes.Equal(body, same.body) {
		return same, nil
	}
	return decodeArgs(body)
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
	req, err := readArgs(w, r, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
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
	req, err := readArgs(w, r, h.lastFilter.Load())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
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
	args := &extenderv1.ExtenderBindingArgs{}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(args); err != nil {
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
