package gate

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/longhorn/diskschedule/internal/controller/backingimage"
	"github.com/longhorn/diskschedule/internal/controller/replica"
	"github.com/longhorn/diskschedule/internal/controller/volume"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/requirement"
	"github.com/longhorn/diskschedule/internal/scheme"
)

// fuzzHandlers returns the gate's three webhook handlers, as SetupWithManager
// registers them, over a fake client that holds no ledger, answering
// within a short timeout.
func fuzzHandlers(f *testing.F) map[string]http.Handler {
	s, err := scheme.New()
	if err != nil {
		f.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	m := metrics.NewGate(prometheus.NewRegistry())
	waiter := requirement.NewWaiter(clock.RealClock{})
	g := &Gate{
		decoder:  admission.NewDecoder(s),
		recorder: events.NewFakeRecorder(100),
		metrics:  m,
		waiter:   waiter,
		exec:     requirement.NewExecutor(c, c, waiter, nil, clock.RealClock{}, m, logr.Discard(), "longhorn-system"),
		log:      logr.Discard(),
		timeout:  50 * time.Millisecond,
	}
	return map[string]http.Handler{
		ReplicaPath: &webhook.Admission{Handler: g.handler("replica", func() client.Object { return &lhv1.Replica{} },
			replica.NewHandler(g.exec))},
		VolumePath: &webhook.Admission{Handler: g.handler("volume", func() client.Object { return &lhv1.Volume{} },
			volume.NewHandler(g.exec))},
		BackingImagePath: &webhook.Admission{Handler: g.handler("backingimage", func() client.Object { return &lhv1.BackingImage{} },
			backingimage.NewHandler(g.exec))},
	}
}

// FuzzAdmissionReview feeds arbitrary bodies to the gate's three webhook
// handlers: none panics, each answers HTTP 200 with an AdmissionReview
// whose response carries the request's UID, and a request that is not a
// well-formed AdmissionReview of the handler's kind is refused with code
// 400 and a message saying what is wrong.
func FuzzAdmissionReview(f *testing.F) {
	review := func(kind, operation, object, old string) []byte {
		body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",` +
			`"kind":{"group":"longhorn.io","version":"v1beta2","kind":"` + kind + `"},` +
			`"resource":{"group":"longhorn.io","version":"v1beta2","resource":"` + strings.ToLower(kind) + `s"},` +
			`"namespace":"longhorn-system","name":"x","operation":"` + operation + `","object":` + object
		if old != "" {
			body += `,"oldObject":` + old
		}
		return []byte(body + `}}`)
	}
	f.Add(review("Replica", "CREATE", `{"apiVersion":"longhorn.io/v1beta2","kind":"Replica","metadata":{"name":"r"},"spec":{"volumeName":"v","diskID":"d","volumeSize":"1073741824"}}`, ""))
	f.Add(review("Volume", "UPDATE", `{"apiVersion":"longhorn.io/v1beta2","kind":"Volume","metadata":{"name":"v"},"spec":{"size":"2147483648"}}`,
		`{"apiVersion":"longhorn.io/v1beta2","kind":"Volume","metadata":{"name":"v"},"spec":{"size":"1073741824"}}`))
	f.Add(review("BackingImage", "UPDATE", `{"apiVersion":"longhorn.io/v1beta2","kind":"BackingImage","metadata":{"name":"bi"},"spec":{"diskFileSpecMap":{"d":{}}}}`, `{}`))
	f.Add(review("Replica", "CREATE", `{"spec":{"volumeSize":"not a number"}}`, ""))
	f.Add(review("Volume", "UPDATE", `{"spec":{}}`, `[1,2]`))
	f.Add(review("Replica", "CREATE", `null`, ""))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0x00})
	handlers := fuzzHandlers(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var in admissionv1.AdmissionReview
		wellFormed := json.Unmarshal(body, &in) == nil && in.Request != nil
		for path, h := range handlers {
			req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s answered HTTP %d to %q", path, rec.Code, body)
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("%s answered %q to %q: not an AdmissionReview with a response (%v)", path, rec.Body, body, err)
			}
			resp := out.Response
			if wellFormed && resp.UID != in.Request.UID {
				t.Fatalf("%s answered UID %q to request UID %q", path, resp.UID, in.Request.UID)
			}
			if resp.Allowed {
				continue
			}
			if resp.Result == nil || resp.Result.Message == "" {
				t.Fatalf("%s refused %q without a message", path, body)
			}
			if !wellFormed && resp.Result.Code != http.StatusBadRequest {
				t.Fatalf("%s refused the malformed %q with code %d (%q), want 400", path, body, resp.Result.Code, resp.Result.Message)
			}
		}
	})
}
