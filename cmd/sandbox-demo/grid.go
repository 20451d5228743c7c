package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// grid is a table for people: every column as wide as its widest cell, the
// first leftAligned columns left-aligned and the others right-aligned, and
// titles over groups of columns.
type grid struct {
	leftAligned int
	groups      []span
	header      []string
	rows        [][]string
}

// span is a title over the columns [from, to).
type span struct {
	title    string
	from, to int
}

const gap = "  "

func (g *grid) add(cells ...string) { g.rows = append(g.rows, cells) }

// write prints the grid to w.
func (g *grid) write(w io.Writer) {
	widths := make([]int, len(g.header))
	for _, row := range append([][]string{g.header}, g.rows...) {
		for i, c := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	// Widen a group's last column when its title is wider than its columns.
	for _, s := range g.groups {
		if need := utf8.RuneCountInString(s.title) + 4 - spanWidth(widths, s); need > 0 {
			widths[s.to-1] += need
		}
	}
	if len(g.groups) > 0 {
		var b strings.Builder
		col := 0
		for _, s := range g.groups {
			for ; col < s.from; col++ {
				b.WriteString(strings.Repeat(" ", widths[col]) + gap)
			}
			width := spanWidth(widths, s)
			title := " " + s.title + " "
			left := (width - utf8.RuneCountInString(title)) / 2
			right := width - utf8.RuneCountInString(title) - left
			b.WriteString(strings.Repeat("-", left) + title + strings.Repeat("-", right) + gap)
			col = s.to
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	for _, row := range append([][]string{g.header}, g.rows...) {
		var b strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i < g.leftAligned {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
			b.WriteString(gap)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// spanWidth is the printed width of a span's columns with the gaps between them.
func spanWidth(widths []int, s span) int {
	n := len(gap) * (s.to - s.from - 1)
	for _, w := range widths[s.from:s.to] {
		n += w
	}
	return n
}
