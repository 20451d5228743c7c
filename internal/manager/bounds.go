package manager

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// controller-runtime's webhook, metrics and health probe servers bound a
// request's headers (32s, 1 MiB) and idle connections (90s) themselves, and
// its admission handler reads at most 7 MiB of a body; they take no read
// or write timeout, so each request to the webhook and metrics servers sets
// its connection's deadlines (withDeadlines). The health probe server
// reads no body and answers a few bytes: its handlers cannot be wrapped,
// and controller-runtime's bounds are its bounds.
const (
	// webhookReadTimeout bounds an admission request's body read.
	webhookReadTimeout = 10 * time.Second
	// webhookWriteTimeout bounds an admission request from its headers to
	// its answer: kube-apiserver waits at most 30s for a webhook (the most
	// timeoutSeconds may be), so past it nobody reads the answer.
	webhookWriteTimeout = 35 * time.Second
	// metricsReadTimeout bounds a scrape's request; it has no body.
	metricsReadTimeout = 10 * time.Second
	// metricsWriteTimeout bounds a scrape, its TokenReview and
	// SubjectAccessReview included: far above Prometheus' scrape timeout.
	metricsWriteTimeout = time.Minute
)

// withDeadlines serves next with the request's connection reading at most
// read and answering at most write from now on; a connection that takes no
// deadline is served as it is.
func withDeadlines(read, write time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		_ = rc.SetReadDeadline(now.Add(read))
		_ = rc.SetWriteDeadline(now.Add(write))
		next.ServeHTTP(w, r)
	})
}

// boundedWebhookServer is a webhook server whose handlers each run with
// the webhook deadlines.
type boundedWebhookServer struct {
	webhook.Server
}

// Register serves hook at path, with the webhook deadlines.
func (s boundedWebhookServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, withDeadlines(webhookReadTimeout, webhookWriteTimeout, hook))
}

// boundedMetrics returns a metrics FilterProvider that applies inner, when
// set (authentication and authorization), inside the metrics deadlines.
func boundedMetrics(inner func(*rest.Config, *http.Client) (metricsserver.Filter, error)) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(cfg *rest.Config, client *http.Client) (metricsserver.Filter, error) {
		var filter metricsserver.Filter
		if inner != nil {
			var err error
			if filter, err = inner(cfg, client); err != nil {
				return nil, fmt.Errorf("building the metrics server's filter: %w", err)
			}
		}
		return func(log logr.Logger, h http.Handler) (http.Handler, error) {
			if filter != nil {
				var err error
				if h, err = filter(log, h); err != nil {
					return nil, fmt.Errorf("filtering the metrics server's handler: %w", err)
				}
			}
			return withDeadlines(metricsReadTimeout, metricsWriteTimeout, h), nil
		}, nil
	}
}

// disableHTTP2 offers HTTP/1.1 alone on a TLS server, against HTTP/2's
// stream cancellation and rapid reset (CVE-2023-44487, CVE-2023-39325), as
// kubebuilder scaffolds it.
func disableHTTP2(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
}
