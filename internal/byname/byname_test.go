package byname

import (
	"net/http"
	"net/url"
	"testing"
)

// recordingTransport records the last request it was given.
type recordingTransport struct{ last *http.Request }

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.last = req
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// The names the test restricts collections to, as the gate's certificate
// rotator does.
const (
	secretName               = "diskschedule-gate-cert"
	configurationName        = "diskschedule-gate"
	validatingConfigurations = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
)

// A list or watch of a named collection carries the name's field selector;
// a named object, another collection and a write go as they are.
func TestByName(t *testing.T) {
	names := Names{SecretsPath("longhorn-system"): secretName, validatingConfigurations: configurationName}
	for _, c := range []struct {
		method, url string
		want        string // the field selector sent; "-" for none
	}{
		{http.MethodGet, "https://api/api/v1/namespaces/longhorn-system/secrets?limit=500", "metadata.name=" + secretName},
		{http.MethodGet, "https://api/api/v1/namespaces/longhorn-system/secrets?watch=true&resourceVersion=7", "metadata.name=" + secretName},
		{http.MethodGet, "https://api/prefix/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?fieldSelector=metadata.namespace%3D",
			"metadata.namespace=,metadata.name=" + configurationName},
		{http.MethodGet, "https://api/api/v1/namespaces/longhorn-system/secrets/other", "-"},
		{http.MethodGet, "https://api/api/v1/namespaces/default/secrets", "-"},
		{http.MethodGet, "https://api/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "-"},
		{http.MethodPut, "https://api/api/v1/namespaces/longhorn-system/secrets", "-"},
	} {
		rec := &recordingTransport{}
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		req := &http.Request{Method: c.method, URL: u, Header: http.Header{}}
		if _, err := (transport{names: names, next: rec}).RoundTrip(req); err != nil {
			t.Fatalf("%s %s: %v", c.method, c.url, err)
		}
		got, ok := rec.last.URL.Query()["fieldSelector"]
		switch {
		case c.want == "-" && ok && rec.last.URL.RawQuery != u.RawQuery:
			t.Errorf("%s %s: sent with field selector %v, want it untouched", c.method, c.url, got)
		case c.want != "-" && (len(got) != 1 || got[0] != c.want):
			t.Errorf("%s %s: field selector %v, want %q", c.method, c.url, got, c.want)
		}
		if c.want != "-" && u.Query().Get("watch") != rec.last.URL.Query().Get("watch") {
			t.Errorf("%s %s: the other parameters were not kept: %s", c.method, c.url, rec.last.URL.RawQuery)
		}
	}
}
