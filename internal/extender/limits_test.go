package extender

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// claimsPod is a StatefulSet's pod with claims claims, as kube-scheduler
// sends it, with an annotation of pad bytes.
func claimsPod(claims, pad int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "default", UID: "0b7f2a44-7c2e-4d4f-9a51-1f0e3c6d8a90",
			Labels:      map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": "db-0"},
			Annotations: map[string]string{"pad": strings.Repeat("a", pad)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "registry.example.com/db:1.2.3",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), "longhorn.io/scheduler-extender": resource.MustParse("1")}},
		}}},
	}
	for i := range claims {
		name := fmt.Sprintf("data-%d-db-0", i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/" + name})
	}
	return pod
}

// nodeNames returns n node names, each of the given length, the first
// characters telling them apart.
func nodeNames(n, length int) []string {
	names := make([]string, n)
	for i := range names {
		name := fmt.Sprintf("ip-10-%d-%d-%d.eu-central-1.compute.internal", i/65536, (i/256)%256, i%256)
		if length > 0 {
			name = fmt.Sprintf("%05d", i) + strings.Repeat("n", length-5)
		}
		names[i] = name
	}
	return names
}

func jsonSize(t *testing.T, v any) int {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(body)
}

// TestBodyCapsHoldTheLargestCalls measures the largest legitimate bodies
// and holds the caps above them with room to spare: ExtenderArgs for 5,000
// nodes (nodeCacheCapable, names only) and a pod with 8 claims, as clouds
// name nodes and at the limits (names of 253 characters, a pod as large as
// etcd stores), and ExtenderBindingArgs with the longest names.
func TestBodyCapsHoldTheLargestCalls(t *testing.T) {
	typical := nodeNames(5000, 0)
	longest := nodeNames(5000, 253)
	typicalArgs := jsonSize(t, extenderv1.ExtenderArgs{Pod: claimsPod(8, 0), NodeNames: &typical})
	largestArgs := jsonSize(t, extenderv1.ExtenderArgs{Pod: claimsPod(8, 1536<<10), NodeNames: &longest})
	largestBinding := jsonSize(t, extenderv1.ExtenderBindingArgs{PodName: strings.Repeat("p", 253), PodNamespace: strings.Repeat("n", 63),
		PodUID: "0b7f2a44-7c2e-4d4f-9a51-1f0e3c6d8a90", Node: strings.Repeat("x", 253)})
	t.Logf("ExtenderArgs, 5,000 nodes, 8 claims: %d bytes as clouds name nodes, %d at the limits (cap %d); ExtenderBindingArgs at the limits: %d bytes (cap %d)",
		typicalArgs, largestArgs, maxArgsBytes, largestBinding, maxBindingBytes)
	if largestArgs*5/4 > maxArgsBytes {
		t.Errorf("the largest ExtenderArgs, %d bytes, leaves less than a quarter of headroom under the cap %d", largestArgs, maxArgsBytes)
	}
	if largestBinding*4 > maxBindingBytes {
		t.Errorf("the largest ExtenderBindingArgs, %d bytes, leaves less than 4x headroom under the cap %d", largestBinding, maxBindingBytes)
	}
}

// filterStream is a filter request's body of size bytes that looks valid
// as it is read: a pod, then node names until size; it counts what was read.
type filterStream struct {
	size, read int64
	head       []byte
}

func newFilterStream(size int64) *filterStream {
	return &filterStream{size: size, head: []byte(`{"Pod":{"metadata":{"name":"p","namespace":"default"}},"NodeNames":[`)}
}

func (f *filterStream) Read(p []byte) (int, error) {
	if f.read >= f.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), f.size-f.read)
	for i := range n {
		at := f.read + i
		switch {
		case at < int64(len(f.head)):
			p[i] = f.head[at]
		case at == f.size-1:
			p[i] = ']'
		default:
			p[i] = `"node",`[(at-int64(len(f.head)))%7]
		}
	}
	f.read += n
	return int(n), nil
}

// TestOversizedBodiesGet413 sends a 16 MiB filter request and a /bind
// body past its cap: both are answered 413 with the cap; the filter
// request's body is read no further than the cap, and, when its length is
// declared, not at all: the answer comes before the body is sent.
func TestOversizedBodiesGet413(t *testing.T) {
	h := NewHandler(stubDecider{}, HandlerOptions{})
	const size = 16 << 20

	stream := newFilterStream(size)
	req := httptest.NewRequest(http.MethodPost, "/filter", stream)
	req.ContentLength = -1 // chunked: the length is not known up front
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "at most 4194304 bytes") {
		t.Errorf("a 16 MiB filter body got %d %q, want 413 naming the cap", rec.Code, rec.Body)
	}
	if stream.read > maxArgsBytes+64<<10 {
		t.Errorf("%d bytes of a 16 MiB body were read, want no more than the cap %d", stream.read, maxArgsBytes)
	}

	binder := &stubBinder{}
	rec = post(t, NewHandler(binder, HandlerOptions{Bind: true}), "/bind", `{"podName":"`+strings.Repeat("p", maxBindingBytes)+`"}`)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "ExtenderBindingArgs body too large") || binder.calls.Load() != 0 {
		t.Errorf("a /bind body past its cap got %d %q with %d binds, want 413 and none", rec.Code, rec.Body, binder.calls.Load())
	}

	// Over a connection: the headers declare 16 MiB and no byte of the
	// body is sent; the answer must come anyway.
	addr := serve(t, h)
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a declared 16 MiB body before it was sent: %v", err)
	}
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "this one declares 16777216") {
		t.Errorf("a declared 16 MiB body got %d %q, want 413", resp.StatusCode, msg)
	}
}

// serve serves h as the extender's bounded http.Server does, on loopback,
// until the test ends, and returns its address.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(context.Background(), h)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serving: %v", err)
		}
	})
	return ln.Addr().String()
}

// stubBinder is a stubDecider that binds, counting the binds.
type stubBinder struct {
	stubDecider
	calls atomic.Int32
}

func (b *stubBinder) Bind(context.Context, *extenderv1.ExtenderBindingArgs) error {
	b.calls.Add(1)
	return nil
}

// TestBindOnlyWhenEnabled: /bind binds only when the extender is
// configured to (kube-scheduler's bindVerb); otherwise it is answered 404
// with the flag that turns it on, and nothing is bound.
func TestBindOnlyWhenEnabled(t *testing.T) {
	body := `{"podName":"p","podNamespace":"default","podUID":"u","node":"n"}`
	binder := &stubBinder{}
	rec := post(t, NewHandler(binder, HandlerOptions{}), "/bind", body)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "--extender-bind=true") || binder.calls.Load() != 0 {
		t.Errorf("/bind without Bind got %d %q with %d binds, want 404 naming --extender-bind and none", rec.Code, rec.Body, binder.calls.Load())
	}
	rec = post(t, NewHandler(binder, HandlerOptions{Bind: true}), "/bind", body)
	if rec.Code != http.StatusOK || binder.calls.Load() != 1 {
		t.Errorf("/bind with Bind got %d %q with %d binds, want 200 and one", rec.Code, rec.Body, binder.calls.Load())
	}
	rec = post(t, NewHandler(binder, HandlerOptions{Bind: true}), "/bind", "{")
	if rec.Code != http.StatusBadRequest || binder.calls.Load() != 1 {
		t.Errorf("malformed /bind got %d %q, want 400 and no bind", rec.Code, rec.Body)
	}
}

// blockingDecider holds every filter until release is closed.
type blockingDecider struct {
	stubDecider
	entered atomic.Int32
	release chan struct{}
}

func (b *blockingDecider) Filter(ctx context.Context, pod *corev1.Pod, nodes []string) ([]string, map[string]string, error) {
	b.entered.Add(1)
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return b.stubDecider.Filter(ctx, pod, nodes)
}

// TestInFlightCap sends 1,000 filter requests at once while the decider
// holds every filter: as many as the cap are served, every other one is
// answered 429 with Retry-After at once, nothing hangs, the heap stays
// bounded, and the server answers afterwards.
func TestInFlightCap(t *testing.T) {
	const requests = 1000
	d := &blockingDecider{release: make(chan struct{})}
	addr := serve(t, NewHandler(d, HandlerOptions{}))
	names := nodeNames(200, 0)
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: claimsPod(4, 0), NodeNames: &names})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: requests}}
	defer client.CloseIdleConnections()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var wg sync.WaitGroup
	var ok, tooMany, other atomic.Int32
	for range requests {
		wg.Go(func() {
			resp, err := client.Post("http://"+addr+"/filter", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Errorf("filter request: %v", err)
				other.Add(1)
				return
			}
			defer func() { _ = resp.Body.Close() }()
			_, _ = io.Copy(io.Discard, resp.Body)
			switch {
			case resp.StatusCode == http.StatusOK:
				ok.Add(1)
			case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
				tooMany.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	// The excess is refused while the first ones are held.
	deadline := time.Now().Add(30 * time.Second)
	for tooMany.Load()+other.Load() < requests-DefaultMaxInFlight || d.entered.Load() < DefaultMaxInFlight {
		if time.Now().After(deadline) {
			close(d.release)
			t.Fatalf("after 30s: %d filters held, %d answered 429, %d otherwise; want %d held and %d answered 429",
				d.entered.Load(), tooMany.Load(), other.Load(), DefaultMaxInFlight, requests-DefaultMaxInFlight)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	close(d.release)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("requests still unanswered 30s after the held filters were released")
	}
	t.Logf("%d requests: %d served, %d answered 429, %d otherwise; heap %d MiB before, %d MiB with every request in",
		requests, ok.Load(), tooMany.Load(), other.Load(), before.HeapInuse>>20, during.HeapInuse>>20)
	if ok.Load() != DefaultMaxInFlight || tooMany.Load() != requests-DefaultMaxInFlight || other.Load() != 0 {
		t.Errorf("want %d served and %d answered 429", DefaultMaxInFlight, requests-DefaultMaxInFlight)
	}
	if d.entered.Load() != DefaultMaxInFlight {
		t.Errorf("the decider was asked %d times, want %d", d.entered.Load(), DefaultMaxInFlight)
	}
	if grown := int64(during.HeapInuse) - int64(before.HeapInuse); grown > 128<<20 {
		t.Errorf("the heap grew by %d MiB with %d requests in, want it bounded (under 128 MiB)", grown>>20, requests)
	}
	resp, err := client.Post("http://"+addr+"/filter", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("a filter after the burst: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a filter after the burst got %d, want 200", resp.StatusCode)
	}
}

// TestSlowHeadersAreCutOff: a client that sends its request's headers a
// byte at a time, slowly, is cut off once readHeaderTimeout has passed,
// before it has finished.
func TestSlowHeadersAreCutOff(t *testing.T) {
	addr := serve(t, NewHandler(stubDecider{}, HandlerOptions{}))
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	start := time.Now()
	// Three times readHeaderTimeout to send them, at this pace.
	headers := []byte("POST /filter HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("s", int(3*readHeaderTimeout/(100*time.Millisecond))) + "\r\n\r\n")
	for _, b := range headers {
		if _, err := conn.Write([]byte{b}); err != nil {
			break
		}
		if time.Since(start) > 2*readHeaderTimeout {
			t.Fatalf("still sending headers after %s, twice readHeaderTimeout", time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The server closed the connection: whatever it answered, reading ends.
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, conn); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection was still open after %s", time.Since(start).Round(time.Millisecond))
		}
	}
	if took := time.Since(start); took < readHeaderTimeout || took > 2*readHeaderTimeout {
		t.Errorf("cut off after %s, want between readHeaderTimeout (%s) and twice it", took.Round(time.Millisecond), readHeaderTimeout)
	}
}
