package gate

import (
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Collection paths of the objects the certificate rotator reads.
const (
	validatingConfigurationsPath = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
	mutatingConfigurationsPath   = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
)

// secretsPath is the collection path of the Secrets of namespace.
func secretsPath(namespace string) string { return "/api/v1/namespaces/" + namespace + "/secrets" }

// byName restricts every list and watch of the collections it names (by
// URL path) to the one object named there, with the field selector
// metadata.name=<name>. kube-apiserver authorizes such a list or watch as a
// request on that one object, so a rule with resourceNames allows it, and
// nothing else of the collection is read.
type byName map[string]string

// config returns a copy of cfg whose requests go through b.
func (b byName) config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return byNameTransport{names: b, next: rt} })
	return out
}

// byNameTransport is byName's http.RoundTripper.
type byNameTransport struct {
	names byName
	next  http.RoundTripper
}

// RoundTrip adds the field selector to a GET of a named collection, whose
// path ends with the collection's path (a named object's path is longer).
func (t byNameTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return t.next.RoundTrip(req)
	}
	for path, name := range t.names {
		if !strings.HasSuffix(req.URL.Path, path) {
			continue
		}
		sel := fields.OneTermEqualSelector("metadata.name", name)
		q := req.URL.Query()
		if cur := q.Get("fieldSelector"); cur != "" {
			parsed, err := fields.ParseSelector(cur)
			if err != nil {
				return nil, fmt.Errorf("restricting %s to %s: parsing its field selector %q: %w", path, name, cur, err)
			}
			sel = fields.AndSelectors(parsed, sel)
		}
		q.Set("fieldSelector", sel.String())
		req = req.Clone(req.Context())
		req.URL.RawQuery = q.Encode()
		break
	}
	return t.next.RoundTrip(req)
}

// namedManager is a manager whose GetConfig restricts lists and watches of
// some collections to one object each: cert-controller's rotator builds its
// own cache from GetConfig, which would otherwise list every Secret of the
// namespace and every webhook configuration of the cluster.
type namedManager struct {
	ctrl.Manager
	cfg *rest.Config
}

// GetConfig returns the restricted configuration.
func (m namedManager) GetConfig() *rest.Config { return m.cfg }
