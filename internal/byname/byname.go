// Package byname restricts a client's lists and watches of some
// collections to one object each, so that a component that builds its own
// cache (cert-controller's rotator) reads no more than RBAC by
// resourceNames grants it.
package byname

import (
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// SecretsPath is the collection path of the Secrets of namespace.
func SecretsPath(namespace string) string { return "/api/v1/namespaces/" + namespace + "/secrets" }

// Names maps a collection's URL path to the one object of it that is read:
// every list and watch of the collection gets the field selector
// metadata.name=<name>. kube-apiserver authorizes such a list or watch as
// a request on that one object, so a rule with resourceNames allows it.
type Names map[string]string

// Config returns a copy of cfg whose requests are restricted to n.
func (n Names) Config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return transport{names: n, next: rt} })
	return out
}

// Manager returns mgr with GetConfig restricted to n.
func (n Names) Manager(mgr ctrl.Manager) ctrl.Manager {
	return restricted{Manager: mgr, cfg: n.Config(mgr.GetConfig())}
}

// transport is Names' http.RoundTripper.
type transport struct {
	names Names
	next  http.RoundTripper
}

// RoundTrip adds the field selector to a GET of a named collection, whose
// path ends with the collection's path (a named object's path is longer).
func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
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

// restricted is a manager whose GetConfig is restricted.
type restricted struct {
	ctrl.Manager
	cfg *rest.Config
}

// GetConfig returns the restricted configuration.
func (m restricted) GetConfig() *rest.Config { return m.cfg }
