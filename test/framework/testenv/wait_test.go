package testenv

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the failure and ends the
// goroutine, as the testing package's does.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder in its own goroutine and returns the failure
// f reported, or "".
func run(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failure
}

func TestPoll(t *testing.T) {
	ctx := t.Context()
	calls := 0
	state, err := Poll(ctx, time.Second, func(context.Context) (bool, string, error) {
		calls++
		return calls == 3, fmt.Sprintf("call %d", calls), nil
	}, Every(time.Millisecond))
	if err != nil || state != "call 3" {
		t.Errorf("Poll = %q, %v; want the third call's state and no error", state, err)
	}

	state, err = Poll(ctx, 20*time.Millisecond, func(context.Context) (bool, string, error) { return false, "not yet", nil }, Every(time.Millisecond))
	if err == nil || state != "not yet" {
		t.Errorf("Poll that never holds = %q, %v; want its last state and an error", state, err)
	}

	boom := errors.New("boom")
	if _, err := Poll(ctx, time.Second, func(context.Context) (bool, string, error) { return false, "", boom }); !errors.Is(err, boom) {
		t.Errorf("Poll whose check fails = %v, want %v", err, boom)
	}
	calls = 0
	state, err = Poll(ctx, time.Second, func(context.Context) (bool, string, error) {
		calls++
		if calls < 3 {
			return false, "", boom
		}
		return true, "recovered", nil
	}, Every(time.Millisecond), RetryErrors())
	if err != nil || state != "recovered" {
		t.Errorf("Poll with RetryErrors = %q, %v; want it to go on past the errors", state, err)
	}
}

func TestEventually(t *testing.T) {
	ctx := t.Context()
	if failure := run(t, func(tb testing.TB) {
		Eventually(tb, ctx, time.Second, "it holds", func(context.Context) (bool, string, error) { return true, "", nil })
	}); failure != "" {
		t.Errorf("Eventually of a check that holds failed: %s", failure)
	}
	failure := run(t, func(tb testing.TB) {
		Eventually(tb, ctx, 20*time.Millisecond, "it holds", func(context.Context) (bool, string, error) { return false, "it does not", nil },
			Every(time.Millisecond))
	})
	if !strings.Contains(failure, "it holds") || !strings.Contains(failure, "it does not") {
		t.Errorf("Eventually of a check that never holds: failure %q, want what it waited for and what it saw", failure)
	}
}

func TestConsistently(t *testing.T) {
	ctx := t.Context()
	calls := 0
	start := time.Now()
	if failure := run(t, func(tb testing.TB) {
		Consistently(tb, ctx, 30*time.Millisecond, "nothing changes", func(context.Context) (bool, string, error) {
			calls++
			return true, "", nil
		}, Every(5*time.Millisecond))
	}); failure != "" {
		t.Errorf("Consistently of a check that holds failed: %s", failure)
	}
	if took := time.Since(start); took < 30*time.Millisecond || calls < 2 {
		t.Errorf("Consistently looked %d times in %s, want several over the whole window of 30ms", calls, took)
	}

	calls = 0
	failure := run(t, func(tb testing.TB) {
		Consistently(tb, ctx, time.Minute, "nothing changes", func(context.Context) (bool, string, error) {
			calls++
			return calls < 3, fmt.Sprintf("call %d", calls), nil
		}, Every(time.Millisecond))
	})
	if !strings.Contains(failure, "stopped holding") || !strings.Contains(failure, "call 3") || calls != 3 {
		t.Errorf("Consistently of a check that breaks at the third call: failure %q after %d calls", failure, calls)
	}

	boom := errors.New("boom")
	if failure := run(t, func(tb testing.TB) {
		Consistently(tb, ctx, time.Minute, "nothing changes", func(context.Context) (bool, string, error) { return true, "", boom })
	}); !strings.Contains(failure, "boom") {
		t.Errorf("Consistently whose check fails: failure %q, want the error", failure)
	}
}
