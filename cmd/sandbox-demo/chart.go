package main

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/longhorn/diskschedule/test/framework/scenario"
)

// Layout of a disk chart, in SVG user units.
const (
	chartWidth   = 760
	chartLabelW  = 150 // the disk labels' column
	chartValueW  = 170 // the values' column
	chartBarH    = 14
	chartRowGap  = 10
	chartTop     = 56
	chartBottomM = 16
)

// Colours of a disk chart's bars.
const (
	colourWith    = "#2b6cb0"
	colourWithout = "#dd6b20"
)

// diskBars is one disk of a chart: its granted bytes with and without the
// extender and its limit.
type diskBars struct {
	node, disk           string
	with, without, limit int64
	hasWith, hasWithout  bool
}

// chartRows pairs the disks of the two runs' ledgers, by node and disk.
func chartRows(with, without []scenario.LedgerRow) []diskBars {
	byKey := map[string]*diskBars{}
	row := func(r scenario.LedgerRow) *diskBars {
		k := r.Node + "/" + r.Disk
		if byKey[k] == nil {
			byKey[k] = &diskBars{node: r.Node, disk: r.Disk}
		}
		b := byKey[k]
		b.limit = max(b.limit, r.Limit)
		return b
	}
	for _, r := range with {
		b := row(r)
		b.with, b.hasWith = r.Scheduled, true
	}
	for _, r := range without {
		b := row(r)
		b.without, b.hasWithout = r.Scheduled, true
	}
	out := make([]diskBars, 0, len(byKey))
	for _, b := range byKey {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].node != out[j].node {
			return out[i].node < out[j].node
		}
		return out[i].disk < out[j].disk
	})
	return out
}

// writeDiskChart writes an SVG bar chart of the disks' granted bytes
// against their limits, per node and disk, with the extender and without
// it: two bars a disk over a light band as long as its limit, with a mark
// at the limit.
func writeDiskChart(w io.Writer, title string, with, without []scenario.LedgerRow) error {
	rows := chartRows(with, without)
	scale := int64(1)
	for _, r := range rows {
		scale = max(scale, r.limit, r.with, r.without)
	}
	barsW := float64(chartWidth - chartLabelW - chartValueW)
	x := func(n int64) float64 { return float64(chartLabelW) + barsW*float64(n)/float64(scale) }
	rowH := 2*chartBarH + chartRowGap
	height := chartTop + len(rows)*rowH + chartBottomM

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(bw, `<text x="8" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	legend(bw, 8, 40, colourWith, "with the extender")
	legend(bw, 180, 40, colourWithout, "without the extender")
	fmt.Fprintf(bw, `<text x="380" y="44">| the disk's limit</text>`+"\n")
	for i, r := range rows {
		y := chartTop + i*rowH
		fmt.Fprintf(bw, `<text x="8" y="%d">%s</text>`+"\n", y+chartBarH+4, html.EscapeString(r.node+" "+r.disk))
		fmt.Fprintf(bw, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#edf2f7"/>`+"\n",
			x(0), y-2, x(r.limit)-x(0), 2*chartBarH+2)
		bar(bw, x, y, r.with, r.hasWith, colourWith)
		bar(bw, x, y+chartBarH, r.without, r.hasWithout, colourWithout)
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-width="2"/>`+"\n",
			x(r.limit), y-2, x(r.limit), y+2*chartBarH+2)
		fmt.Fprintf(bw, `<text x="%d" y="%d">%s / %s</text>`+"\n", chartWidth-chartValueW+8, y+chartBarH-3,
			valueOr(r.with, r.hasWith), scenario.Bytes(r.limit))
		fmt.Fprintf(bw, `<text x="%d" y="%d">%s / %s</text>`+"\n", chartWidth-chartValueW+8, y+2*chartBarH-3,
			valueOr(r.without, r.hasWithout), scenario.Bytes(r.limit))
	}
	fmt.Fprintln(bw, `</svg>`)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing the disk chart: %w", err)
	}
	return nil
}

// legend writes one legend entry: a swatch and its label.
func legend(w io.Writer, x, y int, colour, label string) {
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
		x, y-10, colour, x+16, y, html.EscapeString(label))
}

// bar writes one disk's bar of granted bytes, or nothing for a run that
// did not see the disk.
func bar(w io.Writer, x func(int64) float64, y int, granted int64, seen bool, colour string) {
	if !seen {
		return
	}
	fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n",
		x(0), y, x(granted)-x(0), chartBarH-2, colour)
}

// valueOr formats granted bytes, or "–" for a run that did not see the disk.
func valueOr(n int64, seen bool) string {
	if !seen {
		return "–"
	}
	return scenario.Bytes(n)
}

// writeDiskChartFile writes the disk chart to dir/name and returns its path.
func writeDiskChartFile(dir, name, title string, with, without []scenario.LedgerRow) (string, error) {
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("creating %s: %w", path, err)
	}
	if err := writeDiskChart(f, title, with, without); err != nil {
		f.Close()
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("closing %s: %w", path, err)
	}
	return path, nil
}
