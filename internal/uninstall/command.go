package uninstall

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/rest"
)

// Command is `manager uninstall` with its arguments (after the word
// uninstall), against the cluster of cfg: it deletes the add-on's webhook
// configurations (--webhooks, on by default) and waits until they are gone,
// then, with --crd, the DiskSchedule CRD when it carries the add-on's label.
// It says what it did on out.
func Command(ctx context.Context, cfg *rest.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("uninstall", flag.ContinueOnError)
	fs.SetOutput(out)
	webhooks := fs.Bool("webhooks", true,
		"Delete the add-on's webhook configurations (diskschedule-gate, diskschedule-pods) and wait until they are gone, so no Longhorn write is sent to a manager that is about to go.")
	crd := fs.Bool("crd", false,
		"Delete the DiskSchedule CRD, and every DiskSchedule, when it carries the label "+LabelKey+"="+LabelValue+"; refuse otherwise, saying why.")
	timeout := fs.Duration("timeout", time.Minute, "How long to wait for each webhook configuration to be gone.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("uninstall takes no arguments, only flags: %v", fs.Args())
	}
	c, err := NewClient(cfg)
	if err != nil {
		return err
	}
	if *webhooks {
		if err := Webhooks(ctx, c, *timeout); err != nil {
			return err
		}
		for _, obj := range WebhookConfigurations() {
			fmt.Fprintf(out, "uninstall: %s is gone\n", obj.GetName())
		}
	}
	if *crd {
		if err := CRD(ctx, c); err != nil {
			return err
		}
		fmt.Fprintf(out, "uninstall: %s is deleted (or was not installed)\n", CRDName)
	}
	return nil
}
