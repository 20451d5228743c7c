package manager_test

import (
	"context"
	"strings"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/internal/manager"
)

// TestLonghornMissing: the manager binary refuses a namespace where
// Longhorn does not run, naming it, and accepts it once longhorn-manager
// has written its Settings there.
func TestLonghornMissing(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	why, err := manager.LonghornMissing(ctx, env.Config, ns)
	if err != nil || !strings.Contains(why, `namespace "`+ns+`" holds no Longhorn Setting or Node`) {
		t.Fatalf("in a namespace without Longhorn: %q, %v; want it refused by name", why, err)
	}
	// longhorn-manager writes its default Settings when it starts.
	setting := &lhv1.Setting{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-over-provisioning-percentage"}, Value: "100"}
	if err := env.Client.Create(ctx, setting); err != nil {
		t.Fatal(err)
	}
	if why, err := manager.LonghornMissing(ctx, env.Config, ns); err != nil || why != "" {
		t.Errorf("in Longhorn's namespace: %q, %v; want it accepted", why, err)
	}
}
