package manager_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/config"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestCRDWaitHoldsUntilTheCRDIsBack deletes the DiskSchedule CRD from an
// API server of its own (Longhorn's CRDs stay), starts the manager's
// check, and sees it wait: its /readyz fails naming the CRD while /healthz
// answers, and it does not return. Once the CRD is created again it
// returns nil and its probes are gone, so the manager can listen there.
func TestCRDWaitHoldsUntilTheCRDIsBack(t *testing.T) {
	own, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Stop() })
	ctx := t.Context()
	c, err := client.New(own.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(config.DiskScheduleCRD, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, crd.DeepCopy()); err != nil {
		t.Fatalf("deleting the DiskSchedule CRD: %v", err)
	}
	testenv.Eventually(t, ctx, time.Minute, "the DiskSchedule CRD is gone", func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there", err
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	done := make(chan error, 1)
	go func() {
		done <- manager.CRDWait{Config: own.Config, Probes: ln, Log: testr.New(t), Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond}.Run(ctx)
	}()
	get := func(ctx context.Context, path string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", fmt.Errorf("GET %s: %w", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	testenv.Eventually(t, ctx, 30*time.Second, "/readyz fails naming the CRD and /healthz answers", func(ctx context.Context) (bool, string, error) {
		code, body, err := get(ctx, "/readyz")
		if err != nil {
			return false, err.Error(), nil
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "diskschedules.longhorn.io is not installed") {
			return false, fmt.Sprintf("/readyz %d %q", code, body), nil
		}
		code, body, err = get(ctx, "/healthz")
		return err == nil && code == http.StatusOK, fmt.Sprintf("/healthz %d %q (%v)", code, body, err), nil
	})
	// Several checks (100, 200, 400 ms apart) later it still waits.
	select {
	case err := <-done:
		t.Fatalf("the check returned while the CRD was missing: %v", err)
	case <-time.After(time.Second):
	}

	if err := c.Create(ctx, crd.DeepCopy()); err != nil {
		t.Fatalf("creating the DiskSchedule CRD again: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("with the CRD back: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the check still waits 30s after the CRD was created again")
	}
	if _, _, err := get(ctx, "/healthz"); err == nil {
		t.Errorf("the probes still answer after the check returned")
	}
	if again, err := net.Listen("tcp", ln.Addr().String()); err != nil {
		t.Errorf("listening where the probes were: %v", err)
	} else {
		_ = again.Close()
	}

	// A Longhorn CRD missing is not waited for: the manager still exits,
	// naming it.
	if err := c.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "settings.longhorn.io"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, ctx, time.Minute, "Longhorn's Setting CRD is no longer served", func(context.Context) (bool, string, error) {
		err := manager.CheckCRDs(own.Config)
		return err != nil, fmt.Sprint(err), nil
	})
	err = manager.CRDWait{Config: own.Config, Log: testr.New(t), Initial: time.Hour}.Run(ctx)
	var missing *manager.MissingCRDsError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "settings.longhorn.io") {
		t.Errorf("without Longhorn's Setting CRD: %v, want a MissingCRDsError naming it at once", err)
	}
}
