package manager_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// audit records every request a rest.Config's clients send: it wraps the
// transport, so the manager's cache, clients, event recorder and leader
// election are all seen.
type audit struct {
	mu       sync.Mutex
	writes   map[string]int // "METHOD path-without-name" → count
	refused  []string
	requests int
}

// wrap returns a copy of cfg whose requests a records.
func (a *audit) wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			a.record(req, resp)
			return resp, err
		})
	})
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (a *audit) record(req *http.Request, resp *http.Response) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.writes == nil {
		a.writes = map[string]int{}
	}
	a.requests++
	if resp != nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized) {
		a.refused = append(a.refused, fmt.Sprintf("%s %s: %d", req.Method, req.URL.Path, resp.StatusCode))
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return
	}
	a.writes[req.Method+" "+resource(req.URL.Path)]++
}

// resource returns the resource (and subresource) a request path names,
// without namespace and object name: "/apis/longhorn.io/v1beta2/namespaces/ns/diskschedules/x/status"
// → "longhorn.io/diskschedules/status".
func resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	group := ""
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api/v1
	case len(parts) >= 3 && parts[0] == "apis":
		group = parts[1]
		parts = parts[3:] // apis/group/version
	default:
		return path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return group + "/namespaces"
	}
	res := parts[0]
	if len(parts) >= 3 {
		res += "/" + parts[2]
	}
	return group + "/" + res
}

// written returns the writes seen, sorted.
func (a *audit) written() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.writes))
	for k, n := range a.writes {
		out = append(out, fmt.Sprintf("%s (%d)", k, n))
	}
	sort.Strings(out)
	return out
}

// refusals returns the requests refused so far.
func (a *audit) refusals() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.refused...)
}
