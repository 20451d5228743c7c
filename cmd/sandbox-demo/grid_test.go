package main

import (
	"strings"
	"testing"
)

func TestGrid(t *testing.T) {
	g := &grid{
		leftAligned: 1,
		groups:      []span{{"with", 1, 3}},
		header:      []string{"node", "pods", "scheduled/limit"},
	}
	g.add("node-1", "4", "400Gi/400Gi")
	g.add("node-10", "12", "0/400Gi")
	var b strings.Builder
	g.write(&b)
	want := `         ------- with --------
node     pods  scheduled/limit
node-1      4      400Gi/400Gi
node-10    12          0/400Gi
`
	if b.String() != want {
		t.Errorf("grid:\n%s\nwant:\n%s", b.String(), want)
	}
}
