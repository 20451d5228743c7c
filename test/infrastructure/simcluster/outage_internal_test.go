package simcluster

import "testing"

// TestOutages: a node is up until it is stopped, stays down, and a second
// Stop does nothing; nil Outages have every node up.
func TestOutages(t *testing.T) {
	var none *Outages
	none.Stop("node-1")
	if none.Down("node-1") {
		t.Error("a nil Outages has node-1 down")
	}
	o := NewOutages()
	if o.Down("node-1") {
		t.Error("node-1 is down before it was stopped")
	}
	ch := o.stopped("node-1")
	o.Stop("node-1")
	o.Stop("node-1")
	select {
	case <-ch:
	default:
		t.Error("the channel of node-1 is not closed after Stop")
	}
	if !o.Down("node-1") || o.Down("node-2") {
		t.Errorf("down: node-1 %t, node-2 %t; want only node-1", o.Down("node-1"), o.Down("node-2"))
	}
}
