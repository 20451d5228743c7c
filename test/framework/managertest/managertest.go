// Package managertest runs the project's manager against a test control
// plane (test/framework/testenv), as tests and benchmarks do.
package managertest

import (
	"k8s.io/client-go/rest"

	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// Start builds the project's manager with opts against cfg (env.Config, or
// a config for another user) and starts it; metrics are off unless opts
// sets them, and several managers may run in one process. Stop it with Stop.
func Start(env *testenv.Env, cfg *rest.Config, opts manager.Options) (*testenv.RunningManager, error) {
	if opts.MetricsBindAddress == "" {
		opts.MetricsBindAddress = "0"
	}
	opts.SkipControllerNameValidation = true
	mgr, err := manager.New(cfg, env.Scheme, opts)
	if err != nil {
		return nil, err
	}
	return env.RunManager(mgr)
}
