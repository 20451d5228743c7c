package scalebench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// mem is the process's memory at one moment, after a full GC.
type mem struct {
	// live is HeapInuse + StackInuse: the Go heap spans and goroutine
	// stacks in use.
	live uint64
	// rss is /proc/self/status VmRSS.
	rss uint64
}

func readMem() mem {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mem{live: ms.HeapInuse + ms.StackInuse, rss: statusKiB("self", "VmRSS") << 10}
}

// statusKiB reads a "Key: N kB" line of /proc/PID/status.
func statusKiB(pid, key string) uint64 {
	data, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			v, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return 0
}

// selfCPU is the CPU time (user + system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// child is a control-plane process this process started (kube-apiserver, etcd).
type child struct {
	name string
	pid  int
}

// children lists this process's child processes by name.
func children() []child {
	var out []child
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, ppid, _, ok := procStat(pid)
		if ok && ppid == self {
			out = append(out, child{name: name, pid: pid})
		}
	}
	return out
}

// procStat reads a process's name, parent and CPU time from /proc/PID/stat.
func procStat(pid int) (string, int, time.Duration, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, false
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < 0 {
		return "", 0, 0, false
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 13 {
		return "", 0, 0, false
	}
	ppid, _ := strconv.Atoi(fields[1])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	// USER_HZ is 100 on Linux.
	return s[open+1 : end], ppid, time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// cpuSample is the CPU time of this process and of each child at one moment.
type cpuSample struct {
	self     time.Duration
	children map[string]time.Duration
}

func sampleCPU() cpuSample {
	s := cpuSample{self: selfCPU(), children: map[string]time.Duration{}}
	for _, c := range children() {
		if _, _, cpu, ok := procStat(c.pid); ok {
			s.children[c.name] += cpu
		}
	}
	return s
}

// since returns the CPU used since earlier, per process ("test" is this one).
func (s cpuSample) since(earlier cpuSample) map[string]time.Duration {
	out := map[string]time.Duration{"test": s.self - earlier.self}
	for name, cpu := range s.children {
		out[name] = cpu - earlier.children[name]
	}
	return out
}

func describeCPU(cpu map[string]time.Duration) string {
	var parts []string
	for _, name := range []string{"test", "kube-apiserver", "etcd"} {
		parts = append(parts, fmt.Sprintf("%s %.1f", name, cpu[name].Seconds()))
	}
	return strings.Join(parts, ", ")
}

// controllerMetrics reads controller-runtime's metrics of one controller
// from the in-process registry: reconciles so far, reconcile seconds so
// far, the queue's depth and its unfinished work (seconds).
type controllerMetrics struct {
	reconciles, reconcileSeconds, depth, unfinished float64
}

func readController(name string) controllerMetrics {
	var out controllerMetrics
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if label(m, "controller") != name {
				continue
			}
			switch f.GetName() {
			case "controller_runtime_reconcile_total":
				out.reconciles += m.GetCounter().GetValue()
			case "controller_runtime_reconcile_time_seconds":
				out.reconcileSeconds += m.GetHistogram().GetSampleSum()
			case "workqueue_depth":
				out.depth += m.GetGauge().GetValue()
			case "workqueue_unfinished_work_seconds":
				out.unfinished += m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// readCounter sums a counter family of the in-process registry whose
// labels include want.
func readCounter(name string, want map[string]string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				if label(m, k) != v {
					continue metric
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
