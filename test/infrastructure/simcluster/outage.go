package simcluster

import "sync"

// Outages are the simulated nodes that went down: a node's kubelet stopped
// with it, so it neither renews the node's Lease nor reports the node's
// status or its pods', and finishes no pod's deletion. Nothing is written
// for a node that goes down: kube-controller-manager's node lifecycle
// controller marks it NotReady once its node monitor grace period passed
// without a Lease renewal, and taints it, as for a node that died. A node
// that went down stays down. The zero value is not usable (NewOutages); a
// nil *Outages has every node up.
type Outages struct {
	mu   sync.Mutex
	down map[string]chan struct{}
}

// NewOutages returns outages in which every node is up.
func NewOutages() *Outages {
	return &Outages{down: map[string]chan struct{}{}}
}

// Stop takes node down; stopping it again does nothing. It does nothing
// on a nil *Outages.
func (o *Outages) Stop(node string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := o.channelLocked(node)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// Down reports whether node went down.
func (o *Outages) Down(node string) bool {
	if o == nil {
		return false
	}
	select {
	case <-o.stopped(node):
		return true
	default:
		return false
	}
}

// stopped returns a channel that is closed when node goes down; nil (never
// closed) for a nil *Outages.
func (o *Outages) stopped(node string) <-chan struct{} {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.channelLocked(node)
}

// channelLocked returns node's channel, made when new; o.mu is held.
func (o *Outages) channelLocked(node string) chan struct{} {
	ch := o.down[node]
	if ch == nil {
		ch = make(chan struct{})
		o.down[node] = ch
	}
	return ch
}
