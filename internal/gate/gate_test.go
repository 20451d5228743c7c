package gate

import (
	"testing"
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
