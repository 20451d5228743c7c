package testenv

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// DefaultInterval is how often a poll looks unless Every says otherwise.
const DefaultInterval = 50 * time.Millisecond

// Check looks at the cluster once. It reports whether what a poll waits for
// holds, a short account of what it saw (for the failure message), and an
// error that ends the poll at once.
type Check func(ctx context.Context) (done bool, state string, err error)

// PollOption adjusts a poll.
type PollOption func(*pollOptions)

type pollOptions struct {
	interval    time.Duration
	retryErrors bool
}

func options(opts []PollOption) pollOptions {
	o := pollOptions{interval: DefaultInterval}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Every makes a poll look every interval instead of DefaultInterval.
func Every(interval time.Duration) PollOption {
	return func(o *pollOptions) { o.interval = interval }
}

// RetryErrors makes a poll go on when check returns an error, taking the
// error as what check saw: for checks that cross a network, such as a
// component's metrics or an API server that restarts during the test.
func RetryErrors() PollOption {
	return func(o *pollOptions) { o.retryErrors = true }
}

// Poll calls check at once and then every interval until it reports done,
// returns an error (unless RetryErrors), or timeout passes (or ctx ends).
// It returns what check last said and, unless done, why the poll ended.
func Poll(ctx context.Context, timeout time.Duration, check Check, opts ...PollOption) (string, error) {
	o := options(opts)
	var state string
	err := wait.PollUntilContextTimeout(ctx, o.interval, timeout, true, func(ctx context.Context) (bool, error) {
		done, s, err := check(ctx)
		if err != nil && o.retryErrors {
			state = err.Error()
			return false, nil
		}
		if s != "" || done {
			state = s
		}
		return done, err
	})
	return state, err
}

// Eventually polls check (Poll) and fails the test, naming what it waited
// for and what check last said, unless check reports done within timeout.
func Eventually(t testing.TB, ctx context.Context, timeout time.Duration, what string, check Check, opts ...PollOption) {
	t.Helper()
	if state, err := Poll(ctx, timeout, check, opts...); err != nil {
		t.Fatalf("waiting up to %s until %s: %v; last seen: %s", timeout, what, err, state)
	}
}

// Consistently is a bounded observation that something does not happen: it
// calls check at once and then every interval for the whole window, and
// fails the test the first time check reports that it no longer holds (done
// false) or returns an error. Use it only where the rule under test is
// that nothing changes for a while; to wait for something, use Eventually.
func Consistently(t testing.TB, ctx context.Context, window time.Duration, what string, check Check, opts ...PollOption) {
	t.Helper()
	o := options(opts)
	var state string
	var broken bool
	err := wait.PollUntilContextTimeout(ctx, o.interval, window, true, func(ctx context.Context) (bool, error) {
		holds, s, err := check(ctx)
		state = s
		if err != nil && o.retryErrors {
			state = err.Error()
			return false, nil
		}
		if err != nil {
			return false, err
		}
		broken = !holds
		return broken, nil
	})
	switch {
	case broken:
		t.Fatalf("for %s, %s: it stopped holding; seen: %s", window, what, state)
	case err != nil && !wait.Interrupted(err):
		t.Fatalf("for %s, %s: %v; seen: %s", window, what, err, state)
	case ctx.Err() != nil:
		t.Fatalf("for %s, %s: the test's context ended first: %v", window, what, ctx.Err())
	}
}

// WaitLedger polls the DiskSchedule uuid of namespace through c until done
// accepts it, and returns that version; it fails the test, with the last
// version seen (DescribeLedger), unless done accepts one within timeout. A
// ledger not found yet is waited for.
func WaitLedger(t testing.TB, ctx context.Context, c client.Client, namespace, uuid string, timeout time.Duration, what string,
	done func(*dsv1.DiskSchedule) bool, opts ...PollOption) *dsv1.DiskSchedule {
	t.Helper()
	var last *dsv1.DiskSchedule
	Eventually(t, ctx, timeout, "DiskSchedule "+uuid+": "+what, func(ctx context.Context) (bool, string, error) {
		ds := &dsv1.DiskSchedule{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: uuid}, ds); err != nil {
			return false, err.Error(), client.IgnoreNotFound(err)
		}
		last = ds
		return done(ds), DescribeLedger(ds), nil
	}, opts...)
	return last
}

// describedEntries is how many entries DescribeLedger names.
const describedEntries = 20

// DescribeLedger summarises a ledger for failure messages: its generation
// and the one its status decided, storageScheduled of storageLimit, its
// conditions, and its requests with their decisions (the first
// describedEntries, by kind and name).
func DescribeLedger(ds *dsv1.DiskSchedule) string {
	var parts []string
	for _, k := range ledger.Kinds() {
		requests, decided := *ledger.Requests(&ds.Spec, k), *ledger.Decisions(&ds.Status, k)
		for _, name := range slices.Sorted(maps.Keys(requests)) {
			st := decided[name]
			parts = append(parts, fmt.Sprintf("%s %s=%d (%s %d)", k, name, requests[name], st.State, st.ScheduledSize))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ds.Spec.Reservations)) {
		st := ds.Status.Reservations[name]
		parts = append(parts, fmt.Sprintf("reservation %s=%d (%s %d)", name, ds.Spec.Reservations[name].Size, st.State, st.ScheduledSize))
	}
	if len(parts) > describedEntries {
		parts = append(parts[:describedEntries], fmt.Sprintf("and %d more", len(parts)-describedEntries))
	}
	var conds []string
	for _, c := range ds.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	return fmt.Sprintf("generation %d observed %d, scheduled %d of %d, conditions [%s]: %s", ds.Generation, ds.Status.ObservedGeneration,
		ds.Status.StorageScheduled, ds.Status.StorageLimit, strings.Join(conds, " "), strings.Join(parts, ", "))
}
