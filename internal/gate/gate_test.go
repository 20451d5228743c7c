package gate

import (
	"testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// The sandbox's configuration is config/webhook's, each webhook pointed at
// the local front and scoped to the given namespace.
func TestLocalConfiguration(t *testing.T) {
	vwc, err := LocalConfiguration("https://localhost:1234/", "ns-1")
	if err != nil {
		t.Fatal(err)
	}
	if vwc.Name != ConfigurationName || len(vwc.Webhooks) != 3 {
		t.Fatalf("configuration %s with %d webhooks, want %s with 3", vwc.Name, len(vwc.Webhooks), ConfigurationName)
	}
	want := map[string]bool{
		"https://localhost:1234" + ReplicaPath:      true,
		"https://localhost:1234" + VolumePath:       true,
		"https://localhost:1234" + BackingImagePath: true,
	}
	for _, wh := range vwc.Webhooks {
		if wh.ClientConfig.URL == nil || !want[*wh.ClientConfig.URL] || wh.ClientConfig.Service != nil {
			t.Errorf("webhook %s: clientConfig %+v, want one of the gate's local URLs", wh.Name, wh.ClientConfig)
		}
		if got := wh.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]; got != "ns-1" {
			t.Errorf("webhook %s scoped to %q, want ns-1", wh.Name, got)
		}
		if len(wh.MatchConditions) == 0 {
			t.Errorf("webhook %s lost its matchConditions", wh.Name)
		}
	}
}

// Putting back a refused request restores what was there, and leaves
// alone a request someone else changed since.
func TestRestoreRequest(t *testing.T) {
	m := map[string]dsv1.RequestedBytes{"new": 100, "grown": 200, "changed": 300}
	if !restoreRequest(m, "new", 100, 0) {
		t.Error("a new request was not removed")
	}
	if !restoreRequest(m, "grown", 200, 50) || m["grown"] != 50 {
		t.Errorf("a growth was not put back to 50: %v", m)
	}
	if restoreRequest(m, "changed", 999, 0) || m["changed"] != 300 {
		t.Errorf("a request changed by someone else was touched: %v", m)
	}
	if _, ok := m["new"]; ok {
		t.Errorf("removed request still there: %v", m)
	}
	var nilMap map[string]dsv1.RequestedBytes
	if !setRequest(&nilMap, "r", 10) || nilMap["r"] != 10 || setRequest(&nilMap, "r", 10) {
		t.Errorf("setRequest on a nil map: %v", nilMap)
	}
}
