package manager_test

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/scheme"
	"github.com/longhorn/diskschedule/internal/testenv"
)

// TestCheckCRDs checks that the manager finds Longhorn's CRDs on the test
// control plane, and on an API server without them refuses to start with
// an error naming every missing one.
func TestCheckCRDs(t *testing.T) {
	if err := manager.CheckCRDs(env.Config); err != nil {
		t.Fatalf("with Longhorn's CRDs installed: %v", err)
	}

	bare := &envtest.Environment{BinaryAssetsDirectory: testenv.AssetsDir()}
	cfg, err := bare.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bare.Stop() })
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	_, err = manager.New(cfg, s, manager.Options{Namespace: "longhorn-system"})
	var missing *manager.MissingCRDsError
	if !errors.As(err, &missing) || !manager.IsMissingCRDs(err) {
		t.Fatalf("starting without Longhorn's CRDs: %v, want a MissingCRDsError", err)
	}
	for _, r := range []string{"nodes.longhorn.io", "volumes.longhorn.io", "replicas.longhorn.io", "backingimages.longhorn.io",
		"settings.longhorn.io", "diskschedules.longhorn.io", "install Longhorn v1.12"} {
		if !strings.Contains(err.Error(), r) {
			t.Errorf("the error %q does not name %s", err, r)
		}
	}
}
