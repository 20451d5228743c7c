package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/longhorn/diskschedule/test/framework/scenario"
)

func TestWriteDiskChart(t *testing.T) {
	with := []scenario.LedgerRow{
		{Node: "node-2", Disk: "disk-0", Scheduled: 400 * gi, Limit: 400 * gi},
		{Node: "node-1", Disk: "disk-0", Scheduled: 0, Limit: 400 * gi},
	}
	without := []scenario.LedgerRow{
		{Node: "node-1", Disk: "disk-0", Scheduled: 300 * gi, Limit: 400 * gi},
		{Node: "node-2", Disk: "disk-0", Scheduled: 100 * gi, Limit: 400 * gi},
		{Node: "node-3", Disk: "<d>", Scheduled: 0, Limit: 99 * gi},
	}
	var buf bytes.Buffer
	if err := writeDiskChart(&buf, "title & more", with, without); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	dec := xml.NewDecoder(strings.NewReader(out))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, out)
		}
	}
	for _, want := range []string{"title &amp; more", "node-1 disk-0", "node-3 &lt;d&gt;", "300Gi / 400Gi", "– / 99Gi", colourWith, colourWithout} {
		if !strings.Contains(out, want) {
			t.Errorf("the chart lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "node-1 disk-0"), strings.Index(out, "node-2 disk-0"); i > j {
		t.Errorf("node-1's disk comes after node-2's")
	}
}

func TestChartRowsFullBarsReachTheLimit(t *testing.T) {
	rows := chartRows(
		[]scenario.LedgerRow{{Node: "n", Disk: "d", Scheduled: 4 * gi, Limit: 4 * gi}},
		[]scenario.LedgerRow{{Node: "n", Disk: "d", Scheduled: 5 * gi, Limit: 4 * gi}},
	)
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	r := rows[0]
	if r.with != 4*gi || r.without != 5*gi || r.limit != 4*gi || !r.hasWith || !r.hasWithout {
		t.Errorf("row %+v, want 4Gi with, 5Gi without, 4Gi limit", r)
	}
}
