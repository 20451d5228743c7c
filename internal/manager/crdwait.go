package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// CRDWait holds the manager back, before it starts, while the API server
// serves Longhorn's CRDs but not the DiskSchedule CRD (deleted, or not
// installed yet): instead of exiting, and crash-looping, it says why in its
// log and on a failing /readyz (its /healthz answers, so the kubelet does
// not restart it), and checks again with a growing delay. Anything else
// CheckCRDs refuses (Longhorn's CRDs missing, a DiskSchedule CRD that is
// not the add-on's) still stops it.
type CRDWait struct {
	// Config reaches the API server.
	Config *rest.Config
	// Probes, when not nil, serves /healthz and /readyz while Run waits;
	// Run closes it before it returns, so the manager can listen there next.
	Probes net.Listener
	// Log receives a line for each check that finds the CRD missing.
	Log logr.Logger
	// Initial is the first delay between checks (1s when zero); each next
	// one doubles, up to Max (one minute when zero).
	Initial, Max time.Duration
}

// WaitForDiskScheduleCRD runs a CRDWait whose probes listen on
// probeAddress (none when it is "" or "0", as the manager's
// --health-probe-bind-address).
func WaitForDiskScheduleCRD(ctx context.Context, cfg *rest.Config, probeAddress string, log logr.Logger) error {
	w := CRDWait{Config: cfg, Log: log}
	if probeAddress != "" && probeAddress != "0" {
		ln, err := net.Listen("tcp", probeAddress)
		if err != nil {
			return fmt.Errorf("listening on %s for the probes while the DiskSchedule CRD is checked: %w", probeAddress, err)
		}
		w.Probes = ln
	}
	return w.Run(ctx)
}

// Run returns nil as soon as CheckCRDs finds every CRD it needs, at once
// when they are there; CheckCRDs's error when anything but the DiskSchedule
// CRD alone is wrong; and ctx's error, wrapped, when ctx ends first.
func (w CRDWait) Run(ctx context.Context) error {
	err := CheckCRDs(w.Config)
	if !onlyDiskScheduleMissing(err) {
		if w.Probes != nil {
			_ = w.Probes.Close()
		}
		return err
	}
	probes := &notReady{why: err.Error()}
	if w.Probes != nil {
		srv := &http.Server{Handler: probes, ReadHeaderTimeout: 5 * time.Second}
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = srv.Serve(w.Probes)
		}()
		defer func() {
			shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
			<-served
		}()
	}
	delay, maxDelay := w.Initial, w.Max
	if delay <= 0 {
		delay = time.Second
	}
	if maxDelay <= 0 {
		maxDelay = time.Minute
	}
	for {
		w.Log.Info("Not ready: waiting for the CRD "+diskScheduleCRDName+" ("+err.Error()+")", "nextCheck", delay.String())
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("waiting for the CRD %s: %w", diskScheduleCRDName, ctx.Err())
		case <-timer.C:
		}
		err = CheckCRDs(w.Config)
		if !onlyDiskScheduleMissing(err) {
			if err == nil {
				w.Log.Info("The CRD " + diskScheduleCRDName + " is served: starting")
			}
			return err
		}
		probes.set(err.Error())
		delay = min(2*delay, maxDelay)
	}
}

// onlyDiskScheduleMissing reports whether err says that the DiskSchedule
// CRD is missing and nothing else is wrong.
func onlyDiskScheduleMissing(err error) bool {
	var missing *MissingCRDsError
	return errors.As(err, &missing) && missing.DiskSchedule && len(missing.Longhorn) == 0 && missing.Foreign == ""
}

// notReady answers /healthz with 200 and /readyz, and everything else,
// with 503 and why.
type notReady struct {
	mu  sync.Mutex
	why string
}

func (n *notReady) set(why string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.why = why
}

// ServeHTTP answers the kubelet's probes.
func (n *notReady) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/healthz" {
		rw.WriteHeader(http.StatusOK)
		_, _ = fmt.Fprintln(rw, "ok")
		return
	}
	n.mu.Lock()
	why := n.why
	n.mu.Unlock()
	http.Error(rw, "waiting for the CRD "+diskScheduleCRDName+": "+why, http.StatusServiceUnavailable)
}
