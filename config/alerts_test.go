package config_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"sigs.k8s.io/yaml"
)

// The alert rules are tested in promtool's `test rules` format
// (config/prometheus/diskschedule.rules_test.yaml), so `promtool test rules`
// runs the same tests. This file runs them with Prometheus's own PromQL
// engine, rule parser and template expander over an in-memory series
// store, and evaluates each alerting rule as Prometheus's rule manager
// does (pending while the expression holds for less than `for`, firing
// after); the rules package itself, like the TSDB, would pull Prometheus's
// service discovery and its cloud SDKs into the module graph.

// ruleTestFile is promtool's unit-test file.
type ruleTestFile struct {
	RuleFiles          []string       `json:"rule_files"`
	EvaluationInterval model.Duration `json:"evaluation_interval"`
	Tests              []ruleTest     `json:"tests"`
}

type ruleTest struct {
	Name          string          `json:"name"`
	Interval      model.Duration  `json:"interval"`
	InputSeries   []inputSeries   `json:"input_series"`
	AlertRuleTest []alertTestCase `json:"alert_rule_test"`
}

type inputSeries struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

type alertTestCase struct {
	EvalTime  model.Duration `json:"eval_time"`
	Alertname string         `json:"alertname"`
	ExpAlerts []alert        `json:"exp_alerts"`
}

// alert is a firing alert as promtool compares them: its labels without
// alertname, and its expanded annotations.
type alert struct {
	ExpLabels      map[string]string `json:"exp_labels"`
	ExpAnnotations map[string]string `json:"exp_annotations"`
}

// TestAlertRules runs config/prometheus/diskschedule.rules_test.yaml, and
// checks that every alert of the rules file is tested firing and not.
func TestAlertRules(t *testing.T) {
	const testFile = "prometheus/diskschedule.rules_test.yaml"
	data, err := os.ReadFile(testFile)
	if err != nil {
		t.Fatal(err)
	}
	var tf ruleTestFile
	if err := yaml.UnmarshalStrict(data, &tf); err != nil {
		t.Fatalf("decoding %s: %v", testFile, err)
	}
	if tf.EvaluationInterval == 0 {
		tf.EvaluationInterval = model.Duration(time.Minute)
	}
	var rules []rulefmt.Rule
	for _, f := range tf.RuleFiles {
		rules = append(rules, loadRules(t, filepath.Join(filepath.Dir(testFile), f))...)
	}
	fires, stays := map[string]bool{}, map[string]bool{}
	for _, test := range tf.Tests {
		t.Run(test.Name, func(t *testing.T) {
			store := loadSeries(t, test)
			for _, c := range test.AlertRuleTest {
				rule := ruleNamed(t, rules, c.Alertname)
				got := firingAt(t, store, rule, time.Duration(tf.EvaluationInterval), time.Duration(c.EvalTime))
				want := c.ExpAlerts
				if want == nil {
					want = []alert{}
				}
				sortAlerts(got)
				sortAlerts(want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s at %s: firing alerts differ (-want +got):\n%s", c.Alertname, c.EvalTime, diff)
				}
				if len(want) > 0 {
					fires[c.Alertname] = true
				} else {
					stays[c.Alertname] = true
				}
			}
		})
	}
	for _, r := range rules {
		if !fires[r.Alert] || !stays[r.Alert] {
			t.Errorf("%s is not tested both firing (%t) and not firing (%t)", r.Alert, fires[r.Alert], stays[r.Alert])
		}
	}
}

// loadRules parses and validates a rules file as Prometheus does.
func loadRules(t *testing.T, path string) []rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, parser.NewParser(parser.Options{}), promslog.NewNopLogger())
	for _, err := range errs {
		t.Errorf("%s: %v", path, err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Fatalf("%s: group %s has a recording rule %s; the test runs alerting rules only", path, g.Name, r.Record)
			}
			rules = append(rules, r)
		}
	}
	return rules
}

func ruleNamed(t *testing.T, rules []rulefmt.Rule, name string) rulefmt.Rule {
	t.Helper()
	for _, r := range rules {
		if r.Alert == name {
			return r
		}
	}
	t.Fatalf("no alerting rule %s", name)
	return rulefmt.Rule{}
}

// loadSeries reads a test's input series, in promtool's notation (the same
// as promql tests' `load`), one sample every interval from time 0.
func loadSeries(t *testing.T, test ruleTest) memSeries {
	t.Helper()
	interval := time.Duration(test.Interval)
	if interval == 0 {
		interval = time.Minute
	}
	p := parser.NewParser(parser.Options{})
	var out memSeries
	for _, in := range test.InputSeries {
		lset, values, err := p.ParseSeriesDesc(in.Series + " " + in.Values)
		if err != nil {
			t.Fatalf("series %s %s: %v", in.Series, in.Values, err)
		}
		s := series{labels: lset}
		for i, v := range values {
			if v.Omitted {
				continue
			}
			if v.Histogram != nil {
				t.Fatalf("series %s: native histograms are not supported here", in.Series)
			}
			s.samples = append(s.samples, fSample{t: int64(i) * interval.Milliseconds(), f: v.Value})
		}
		out = append(out, s)
	}
	return out
}

// firingAt evaluates rule every interval from 0 to at and returns the alerts
// firing at at: an alert is pending from the first evaluation its series is
// in the expression's result, and fires once it has been for `for`.
func firingAt(t *testing.T, store memSeries, rule rulefmt.Rule, interval, at time.Duration) []alert {
	t.Helper()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	ctx := context.Background()
	activeSince := map[string]time.Duration{}
	var result promql.Vector
	for ts := time.Duration(0); ts <= at; ts += interval {
		q, err := engine.NewInstantQuery(ctx, store, nil, rule.Expr, time.UnixMilli(ts.Milliseconds()))
		if err != nil {
			t.Fatalf("%s: %v", rule.Alert, err)
		}
		res := q.Exec(ctx)
		if res.Err != nil {
			t.Fatalf("%s at %s: %v", rule.Alert, ts, res.Err)
		}
		result, err = res.Vector()
		if err != nil {
			t.Fatalf("%s at %s: %v", rule.Alert, ts, err)
		}
		seen := map[string]time.Duration{}
		for _, s := range result {
			k := s.Metric.DropReserved(func(string) bool { return false }).String()
			since, ok := activeSince[k]
			if !ok {
				since = ts
			}
			seen[k] = since
		}
		activeSince = seen
		q.Close()
	}
	var out []alert
	for _, s := range result {
		k := s.Metric.DropReserved(func(string) bool { return false }).String()
		if at-activeSince[k] < time.Duration(rule.For) {
			continue // pending
		}
		lbls := s.Metric.Map()
		delete(lbls, labels.MetricName)
		maps.Copy(lbls, rule.Labels)
		out = append(out, alert{ExpLabels: lbls, ExpAnnotations: expandAnnotations(t, rule, s, at)})
	}
	if out == nil {
		out = []alert{}
	}
	return out
}

// expandAnnotations expands rule's annotations for sample s as
// Prometheus's AlertingRule does.
func expandAnnotations(t *testing.T, rule rulefmt.Rule, s promql.Sample, at time.Duration) map[string]string {
	t.Helper()
	const defs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	lbls := s.Metric.Map()
	delete(lbls, labels.MetricName)
	data := template.AlertTemplateData(lbls, nil, "", s)
	noQueries := func(context.Context, string, time.Time) (promql.Vector, error) {
		return nil, fmt.Errorf("the test runs no queries from templates")
	}
	out := map[string]string{}
	for name, text := range rule.Annotations {
		exp := template.NewTemplateExpander(context.Background(), defs+text, "__alert_"+rule.Alert, data,
			model.Time(at.Milliseconds()), noQueries, nil, nil)
		v, err := exp.Expand()
		if err != nil {
			t.Fatalf("%s: annotation %s: %v", rule.Alert, name, err)
		}
		out[name] = v
	}
	return out
}

func sortAlerts(a []alert) {
	slices.SortFunc(a, func(x, y alert) int {
		return strings.Compare(labels.FromMap(x.ExpLabels).String(), labels.FromMap(y.ExpLabels).String())
	})
}

// memSeries is an in-memory storage.Queryable of float series.
type memSeries []series

type series struct {
	labels  labels.Labels
	samples []fSample
}

func (m memSeries) Querier(mint, maxt int64) (storage.Querier, error) {
	return &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
		out := &seriesSet{}
		for _, s := range m {
			if !matchAll(s.labels, matchers) {
				continue
			}
			var in []chunks.Sample
			for _, smpl := range s.samples {
				if smpl.t >= mint && smpl.t <= maxt {
					in = append(in, smpl)
				}
			}
			out.series = append(out.series, storage.NewListSeries(s.labels, in))
		}
		slices.SortFunc(out.series, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
		return out
	}}, nil
}

func matchAll(lset labels.Labels, matchers []*labels.Matcher) bool {
	for _, m := range matchers {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// seriesSet iterates over its series.
type seriesSet struct {
	series []storage.Series
	next   int
}

func (s *seriesSet) Next() bool {
	s.next++
	return s.next <= len(s.series)
}

func (s *seriesSet) At() storage.Series              { return s.series[s.next-1] }
func (*seriesSet) Err() error                        { return nil }
func (*seriesSet) Warnings() annotations.Annotations { return nil }

// fSample is a float sample.
type fSample struct {
	t int64
	f float64
}

func (s fSample) T() int64                    { return s.t }
func (fSample) ST() int64                     { return 0 }
func (s fSample) F() float64                  { return s.f }
func (fSample) H() *histogram.Histogram       { return nil }
func (fSample) FH() *histogram.FloatHistogram { return nil }
func (fSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fSample) Copy() chunks.Sample         { return s }
