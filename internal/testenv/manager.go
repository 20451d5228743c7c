package testenv

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/longhorn/diskschedule/internal/manager"
)

// RunningManager is a manager started by StartManager.
type RunningManager struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// StartManager builds the project's manager with opts against cfg and starts
// it; metrics and health endpoints are off unless opts sets them. Stop it
// with Stop.
func (e *Env) StartManager(cfg *rest.Config, opts manager.Options) (*RunningManager, error) {
	if opts.MetricsBindAddress == "" {
		opts.MetricsBindAddress = "0"
	}
	opts.SkipControllerNameValidation = true
	mgr, err := manager.New(cfg, e.Scheme, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	rm := &RunningManager{cancel: cancel, done: make(chan error, 1)}
	go func() { rm.done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("the manager's cache did not sync: %w", <-rm.done)
	}
	return rm, nil
}

// Stop stops the manager and waits until it has stopped.
func (m *RunningManager) Stop() error {
	m.once.Do(func() {
		m.cancel()
		m.err = <-m.done
	})
	return m.err
}
