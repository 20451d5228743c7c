package schedulerbench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU
// times (100 on every Linux architecture Go supports).
const clockTicks = 100

// cpuTimes are the CPU seconds (user + system) each process of the sandbox
// has used, by name (sb.Processes: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and sandbox-longhorn, Longhorn's
// controllers); "test" is this process (the manager, the simulated CSI
// driver and kubelets, and the benchmark itself).
type cpuTimes map[string]float64

// readCPU reads the CPU time of this process and of the sandbox's
// processes from /proc.
func readCPU(sb *sandbox.Sandbox) (cpuTimes, error) {
	out := cpuTimes{}
	self, err := processCPU(os.Getpid())
	if err != nil {
		return nil, err
	}
	out["test"] = self
	for _, p := range sb.Processes() {
		t, err := processCPU(p.PID)
		if err != nil {
			return nil, err
		}
		out[p.Name] = t
	}
	return out, nil
}

// processCPU returns the user and system CPU seconds of process pid.
func processCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields after its closing
	// parenthesis start with field 3 (state). utime and stime are fields 14
	// and 15.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("reading the CPU time of process %d: %d fields in %q", pid, len(fields), s)
	}
	var total float64
	for _, f := range fields[11:13] {
		ticks, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
		}
		total += float64(ticks) / clockTicks
	}
	return total, nil
}

// sub returns the CPU seconds used between o and c.
func (c cpuTimes) sub(o cpuTimes) cpuTimes {
	out := cpuTimes{}
	for name, t := range c {
		out[name] = t - o[name]
	}
	return out
}

// describe lists the processes by CPU seconds used, most first, and
// their total against what the machine's cores could give over elapsed.
func (c cpuTimes) describe(elapsed time.Duration, cores int) string {
	names := make([]string, 0, len(c))
	var total float64
	for name, t := range c {
		names = append(names, name)
		total += t
	}
	sort.Slice(names, func(i, j int) bool { return c[names[i]] > c[names[j]] })
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %.2fs", name, c[name]))
	}
	return fmt.Sprintf("CPU %.2fs of %.2fs available (%s)", total, elapsed.Seconds()*float64(cores), strings.Join(parts, ", "))
}

// apiCounts are kube-apiserver's request counts by verb and resource
// (with subresource), and the watch events it sent by resource.
type apiCounts map[string]float64

// readAPICounts reads apiserver_request_total,
// apiserver_watch_events_total and the time requests waited in API
// Priority and Fairness's queues by priority level
// (apiserver_flowcontrol_request_wait_duration_seconds) from
// kube-apiserver's metrics.
func readAPICounts(ctx context.Context, cfg *rest.Config) (apiCounts, error) {
	rc, err := rest.RESTClientFor(withCodecs(cfg))
	if err != nil {
		return nil, fmt.Errorf("a client for kube-apiserver's metrics: %w", err)
	}
	data, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	out := apiCounts{}
	for _, line := range strings.Split(string(data), "\n") {
		var key string
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			labels := parseLabels(line)
			key = labels["verb"] + " " + labels["resource"]
			if sub := labels["subresource"]; sub != "" {
				key += "/" + sub
			}
		case strings.HasPrefix(line, "apiserver_watch_events_total{"):
			labels := parseLabels(line)
			key = "WATCH-EVENT " + labels["resource"]
		case strings.HasPrefix(line, "apiserver_flowcontrol_request_wait_duration_seconds_sum{"):
			key = apfWaitSum + parseLabels(line)["priority_level"]
		case strings.HasPrefix(line, "apiserver_flowcontrol_request_wait_duration_seconds_count{"):
			key = apfWaitCount + parseLabels(line)["priority_level"]
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		out[key] += v
	}
	return out, nil
}

// parseLabels returns the labels of one sample line of the text format.
func parseLabels(line string) map[string]string {
	out := map[string]string{}
	open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	if open < 0 || end < open {
		return out
	}
	for _, pair := range strings.Split(line[open+1:end], ",") {
		if k, v, ok := strings.Cut(pair, "="); ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// sub returns the counts between o and a.
func (a apiCounts) sub(o apiCounts) apiCounts {
	out := apiCounts{}
	for k, v := range a {
		if d := v - o[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Keys of apiCounts for the time requests of a priority level waited in
// API Priority and Fairness's queues, and how many there were.
const (
	apfWaitSum   = "APF-WAIT-SECONDS "
	apfWaitCount = "APF-WAIT-COUNT "
)

// describeWaits says, by priority level, how many requests API Priority
// and Fairness let through and how long they waited on average, the
// longest wait first.
func (a apiCounts) describeWaits() string {
	var levels []string
	for k := range a {
		if level, ok := strings.CutPrefix(k, apfWaitCount); ok {
			levels = append(levels, level)
		}
	}
	mean := func(level string) float64 { return a[apfWaitSum+level] / a[apfWaitCount+level] }
	sort.Slice(levels, func(i, j int) bool { return mean(levels[i]) > mean(levels[j]) })
	parts := make([]string, 0, len(levels))
	for _, l := range levels {
		parts = append(parts, fmt.Sprintf("%s %.0f requests, %.1f ms on average", l, a[apfWaitCount+l], 1000*mean(l)))
	}
	return strings.Join(parts, "; ")
}

// describe lists the top n counts, most first.
func (a apiCounts) describe(n int) string {
	keys := make([]string, 0, len(a))
	for k := range a {
		if strings.HasPrefix(k, apfWaitSum) || strings.HasPrefix(k, apfWaitCount) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return a[keys[i]] > a[keys[j]] })
	if len(keys) > n {
		keys = keys[:n]
	}
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, a[k]))
	}
	return strings.Join(parts, ", ")
}

// withCodecs returns a copy of cfg that can build a plain REST client.
func withCodecs(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if out.GroupVersion == nil {
		out.GroupVersion = &schema.GroupVersion{}
	}
	return out
}

// total returns the CPU seconds of every process together.
func (c cpuTimes) total() float64 {
	var sum float64
	for _, t := range c {
		sum += t
	}
	return sum
}

// quietBelow is the share of the machine's cores under which the sandbox
// counts as idle: its controllers' resyncs and heartbeats, not the work the
// last provisioning or the previous phase left behind.
const quietBelow = 0.15

// waitQuiet waits, for at most timeout, until the sandbox's processes and
// this one together use less than quietBelow of the machine's cores over
// two consecutive seconds, so that a phase's clock starts on an idle
// machine rather than during the previous work's tail. It returns how long
// it waited and the last second's usage, and whether the machine went quiet.
func waitQuiet(ctx context.Context, sb *sandbox.Sandbox, cores int, timeout time.Duration) (time.Duration, float64, bool, error) {
	start := time.Now()
	prev, err := readCPU(sb)
	if err != nil {
		return 0, 0, false, err
	}
	quiet, usage := 0, 0.0
	for time.Since(start) < timeout {
		select {
		case <-ctx.Done():
			return time.Since(start), usage, false, ctx.Err()
		case <-time.After(time.Second):
		}
		cur, err := readCPU(sb)
		if err != nil {
			return time.Since(start), usage, false, err
		}
		usage = cur.sub(prev).total() / float64(cores)
		prev = cur
		if usage >= quietBelow {
			quiet = 0
			continue
		}
		if quiet++; quiet == 2 {
			return time.Since(start), usage, true, nil
		}
	}
	return time.Since(start), usage, false, nil
}
