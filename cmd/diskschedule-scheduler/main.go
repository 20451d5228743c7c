// Command diskschedule-scheduler is kube-scheduler with the diskschedule
// plugin compiled in (internal/schedulerplugin): the second scheduler of
// DESIGN §6.1. It takes kube-scheduler's own flags; a profile enables the
// plugin by its name, diskschedule (config/scheduler/secondary).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/longhorn/diskschedule/internal/schedulerplugin"
)

func main() {
	// The plugin's cache and client are controller-runtime's: their logs
	// go where kube-scheduler's go.
	ctrllog.SetLogger(klog.NewKlogr())
	cmd := app.NewSchedulerCommand(app.WithPlugin(schedulerplugin.Name, schedulerplugin.Factory))
	os.Exit(cli.Run(cmd))
}
