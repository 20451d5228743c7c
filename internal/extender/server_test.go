package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// stubDecider stands in for the Extender so these tests exercise the HTTP
// protocol alone (decoding, both nodeCacheCapable modes, errors); the
// decision logic is tested with real API servers elsewhere. It passes the
// nodes whose name does not start with "full".
type stubDecider struct{ panicOn string }

func (s stubDecider) Filter(_ context.Context, pod *corev1.Pod, nodes []string) ([]string, map[string]string, error) {
	if pod.Name == s.panicOn {
		panic("boom")
	}
	var passed []string
	failed := map[string]string{}
	for _, n := range nodes {
		if strings.HasPrefix(n, "full") {
			failed[n] = "disk-1: needs 100Gi, 50Gi free"
		} else {
			passed = append(passed, n)
		}
	}
	return passed, failed, nil
}

func (stubDecider) Prioritize(_ context.Context, _ *corev1.Pod, nodes []string) (map[string]int64, error) {
	scores := map[string]int64{}
	for i, n := range nodes {
		scores[n] = int64(i * 7) // goes past 10 to check clamping
	}
	return scores, nil
}

func post(t *testing.T, h http.Handler, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	return rec
}

func TestFilterNodeNamesMode(t *testing.T) {
	h := NewHandler(stubDecider{}, HandlerOptions{})
	args := extenderv1.ExtenderArgs{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}},
		NodeNames: &[]string{"node-1", "full-2", "node-3"}}
	body, _ := json.Marshal(args)
	rec := post(t, h, "/filter", string(body))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var res extenderv1.ExtenderFilterResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.NodeNames == nil || strings.Join(*res.NodeNames, ",") != "node-1,node-3" || res.Nodes != nil {
		t.Errorf("want NodeNames [node-1 node-3] and no Nodes, got %+v", res)
	}
	if res.FailedNodes["full-2"] != "disk-1: needs 100Gi, 50Gi free" {
		t.Errorf("FailedNodes = %v", res.FailedNodes)
	}
}

func TestFilterNodesMode(t *testing.T) {
	h := NewHandler(stubDecider{}, HandlerOptions{})
	nodes := &corev1.NodeList{Items: []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "full-1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{"a": "b"}}},
	}}
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, Nodes: nodes})
	rec := post(t, h, "/filter", string(body))
	var res extenderv1.ExtenderFilterResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Nodes == nil || len(res.Nodes.Items) != 1 || res.Nodes.Items[0].Name != "node-2" || res.Nodes.Items[0].Labels["a"] != "b" {
		t.Errorf("want the full Node object node-2 back, got %+v", res.Nodes)
	}
	if res.NodeNames != nil {
		t.Errorf("NodeNames must be empty in Nodes mode, got %v", *res.NodeNames)
	}
}

func TestPrioritizeClampsScores(t *testing.T) {
	h := NewHandler(stubDecider{}, HandlerOptions{})
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, NodeNames: &[]string{"a", "b", "c"}})
	rec := post(t, h, "/prioritize", string(body))
	var list extenderv1.HostPriorityList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Host < list[j].Host })
	if len(list) != 3 || list[0].Score != 0 || list[1].Score != 7 || list[2].Score != extenderv1.MaxExtenderPriority {
		t.Errorf("scores = %+v, want 0, 7, 10", list)
	}
}

func TestMalformedRequestsGet400(t *testing.T) {
	h := NewHandler(stubDecider{}, HandlerOptions{})
	for _, tc := range []struct{ name, body, want string }{
		{"not JSON", "{{{", "decoding ExtenderArgs"},
		{"no pod", `{"NodeNames":["a"]}`, "ExtenderArgs.Pod is missing"},
		{"pod without name", `{"Pod":{},"NodeNames":["a"]}`, "ExtenderArgs.Pod has no name"},
		{"no nodes", `{"Pod":{"metadata":{"name":"p"}}}`, "neither NodeNames nor Nodes"},
		{"wrong type", `{"Pod":{"metadata":{"name":"p"}},"NodeNames":"a"}`, "decoding ExtenderArgs"},
		{"trailing data", `{"Pod":{"metadata":{"name":"p"}},"NodeNames":["a"]} {}`, "trailing data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/filter", "/prioritize"} {
				rec := post(t, h, path, tc.body)
				if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.want) {
					t.Errorf("%s: got %d %q, want 400 with %q", path, rec.Code, rec.Body, tc.want)
				}
			}
		})
	}
}

func TestPanicBecomes500(t *testing.T) {
	h := NewHandler(stubDecider{panicOn: "bad"}, HandlerOptions{})
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad"}}, NodeNames: &[]string{"a"}})
	if rec := post(t, h, "/filter", string(body)); rec.Code != http.StatusInternalServerError {
		t.Errorf("a panicking decider got %d, want 500", rec.Code)
	}
}

func TestHealthz(t *testing.T) {
	rec := httptest.NewRecorder()
	NewHandler(stubDecider{}, HandlerOptions{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok" {
		t.Errorf("healthz = %d %q", rec.Code, rec.Body)
	}
}

// FuzzFilterHandler feeds arbitrary bodies to /filter and /prioritize: the
// handler never panics, and answers 200 or 400, never anything else.
func FuzzFilterHandler(f *testing.F) {
	f.Add([]byte(`{"Pod":{"metadata":{"name":"p"}},"NodeNames":["a","full-b"]}`))
	f.Add([]byte(`{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"metadata":{"name":"a"}}]}}`))
	f.Add([]byte(`{"Pod":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{0xff, 0x00})
	h := NewHandler(stubDecider{}, HandlerOptions{})
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/filter", "/prioritize"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
			if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
				t.Fatalf("%s answered %d to %q", path, rec.Code, body)
			}
			if rec.Code == http.StatusOK && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s answered 200 with invalid JSON %q", path, rec.Body)
			}
		}
	})
}

// podsSeen is a Decider that records the pods it is given, in call order.
type podsSeen struct {
	stubDecider
	pods []*corev1.Pod
}

func (p *podsSeen) Filter(ctx context.Context, pod *corev1.Pod, nodes []string) ([]string, map[string]string, error) {
	p.pods = append(p.pods, pod)
	return p.stubDecider.Filter(ctx, pod, nodes)
}

func (p *podsSeen) Prioritize(ctx context.Context, pod *corev1.Pod, nodes []string) (map[string]int64, error) {
	p.pods = append(p.pods, pod)
	return p.stubDecider.Prioritize(ctx, pod, nodes)
}

// TestPrioritizeReusesTheFiltersArgs: kube-scheduler sends /prioritize the
// ExtenderArgs it sent /filter when every node passed; they are decoded
// once. Other args are decoded afresh: another pod, or fewer nodes.
func TestPrioritizeReusesTheFiltersArgs(t *testing.T) {
	d := &podsSeen{}
	h := NewHandler(d, HandlerOptions{})
	args := func(pod string, nodes ...string) string {
		body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "default"}},
			NodeNames: &nodes})
		return string(body)
	}
	hosts := func(rec *httptest.ResponseRecorder) string {
		t.Helper()
		var list extenderv1.HostPriorityList
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var out []string
		for _, hp := range list {
			out = append(out, hp.Host)
		}
		return strings.Join(out, ",")
	}

	post(t, h, "/filter", args("p", "a", "b"))
	if got := hosts(post(t, h, "/prioritize", args("p", "a", "b"))); got != "a,b" {
		t.Errorf("prioritize of the filter's args scored %s, want a,b", got)
	}
	if got := hosts(post(t, h, "/prioritize", args("p", "a"))); got != "a" {
		t.Errorf("prioritize of fewer nodes scored %s, want a", got)
	}
	if got := hosts(post(t, h, "/prioritize", args("q", "a", "b"))); got != "a,b" {
		t.Errorf("prioritize of another pod scored %s, want a,b", got)
	}
	if len(d.pods) != 4 || d.pods[1] != d.pods[0] || d.pods[2] == d.pods[0] || d.pods[3] == d.pods[0] || d.pods[3].Name != "q" {
		t.Errorf("want the filter's pod reused by the first prioritize alone, then pod q; got %d pods: %v", len(d.pods), d.pods)
	}
}
