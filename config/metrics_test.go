package config_test

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/longhorn/diskschedule/internal/metrics"
)

// exportedMetrics returns the names of the series the manager exports, as
// internal/metrics registers them: each metric's name and, for histograms,
// its _bucket, _sum and _count series.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	sets := []any{metrics.NewLedger(reg), metrics.NewMirror(reg), metrics.NewExtender(reg), metrics.NewGate(reg), metrics.NewConfig(reg)}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for _, set := range sets {
		v := reflect.ValueOf(set).Elem()
		for i := range v.NumField() {
			c, ok := v.Field(i).Interface().(prometheus.Collector)
			if !ok {
				t.Fatalf("%s.%s is not a Prometheus collector", v.Type(), v.Type().Field(i).Name)
			}
			descs := make(chan *prometheus.Desc, 1)
			go func() { c.Describe(descs); close(descs) }()
			for d := range descs {
				m := fqName.FindStringSubmatch(d.String())
				if m == nil {
					t.Fatalf("no name in %s", d)
				}
				switch c.(type) {
				case prometheus.Histogram, *prometheus.HistogramVec:
					names[m[1]+"_bucket"], names[m[1]+"_sum"], names[m[1]+"_count"] = true, true, true
				default:
					names[m[1]] = true
				}
			}
		}
	}
	return names
}

// grafanaVariables are Grafana's interval variables, which PromQL does not
// parse; any duration stands for them.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// metricNames returns the metric names a PromQL expression selects.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	parsed, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVariables.Replace(expr))
	if err != nil {
		t.Fatalf("%q does not parse: %v", expr, err)
	}
	var names []string
	parser.Inspect(parsed, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				t.Errorf("%q selects series without naming their metric", expr)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

// dashboardQueries returns every PromQL expression of a Grafana dashboard:
// its panels' targets (rows' nested panels included) and its variables'
// label_values queries.
func dashboardQueries(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	var walk func([]dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			for _, target := range p.Targets {
				exprs = append(exprs, target.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dashboard.Panels)
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)
	for _, v := range dashboard.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("%s: variable query %q is not label_values(selector, label)", path, v.Definition)
			continue
		}
		exprs = append(exprs, m[1])
	}
	return exprs
}

type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// TestDashboardQueriesExportedMetrics checks that the Grafana dashboard
// (config/grafana) queries only metrics the manager exports, and shows
// the disks' fill, the gate, the extender, the leader and its fence.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	queried := map[string]bool{}
	exprs := dashboardQueries(t, "grafana/diskschedule-dashboard.json")
	if len(exprs) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	for _, expr := range exprs {
		for _, name := range metricNames(t, expr) {
			queried[name] = true
			if !exported[name] {
				t.Errorf("the dashboard queries %s, which the manager does not export (internal/metrics)", name)
			}
		}
	}
	for _, name := range []string{
		"longhorn_diskschedule_storage_scheduled_bytes", "longhorn_diskschedule_storage_limit_bytes", "longhorn_diskschedule_pending_requests",
		"longhorn_diskschedule_gate_decisions_total", "longhorn_diskschedule_gate_duration_seconds_bucket",
		"longhorn_scheduler_extender_filter_duration_seconds_bucket", "longhorn_scheduler_extender_filter_wait_duration_seconds_bucket",
		"longhorn_scheduler_extender_reservations_total", "longhorn_scheduler_extender_heartbeat", "longhorn_scheduler_extender_fenced",
	} {
		if !queried[name] {
			t.Errorf("the dashboard does not show %s", name)
		}
	}
}

// TestAlertRulesQueryExportedMetrics checks that the alert rules query only
// metrics the manager exports.
func TestAlertRulesQueryExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	for _, r := range loadRules(t, "prometheus/diskschedule.rules.yaml") {
		names := metricNames(t, r.Expr)
		if len(names) == 0 {
			t.Errorf("%s queries no metric", r.Alert)
		}
		for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
			if !exported[name] {
				t.Errorf("%s queries %s, which the manager does not export (internal/metrics)", r.Alert, name)
			}
		}
	}
}
