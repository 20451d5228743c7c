package testenv

import (
	"context"
	"fmt"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
)

// RunningManager is a manager started by Env.RunManager.
type RunningManager struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// RunManager starts mgr and waits until its cache has synced. Stop it with
// Stop. (test/framework/managertest builds the project's manager and runs
// it here; testenv does not import the manager, so the manager's own
// packages can use testenv in their tests.)
func (e *Env) RunManager(mgr ctrl.Manager) (*RunningManager, error) {
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
