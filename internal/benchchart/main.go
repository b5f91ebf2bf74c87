// Command benchchart draws the charts of docs/BENCHMARKS.md: grouped
// horizontal bars, as a self-contained SVG, from a small tab-separated table.
//
//	go run ./internal/benchchart < docs/img/kernels-16k.tsv > docs/img/kernels-16k.svg
//
// The input has header lines "# title: …", "# unit: …" (shown on the axis)
// and optionally "# note: …" (a line under the title), then one row per bar:
// group, series, value. Groups and series keep their order of appearance;
// each series has one colour across groups.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

func main() {
	c, err := parse(os.Stdin)
	if err == nil {
		err = c.writeSVG(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchchart:", err)
		os.Exit(1)
	}
}

// chart is a parsed input.
type chart struct {
	title, unit, note string
	groups            []string
	series            []string
	values            map[[2]string]float64 // {group, series}
}

func parse(r io.Reader) (*chart, error) {
	c := &chart{values: make(map[[2]string]float64)}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if h, ok := strings.CutPrefix(line, "#"); ok {
			k, v, _ := strings.Cut(h, ":")
			switch strings.TrimSpace(k) {
			case "title":
				c.title = strings.TrimSpace(v)
			case "unit":
				c.unit = strings.TrimSpace(v)
			case "note":
				c.note = strings.TrimSpace(v)
			}
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want group, series and value separated by tabs", n)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("line %d: value %q is not a non-negative number", n, f[2])
		}
		g, s := strings.TrimSpace(f[0]), strings.TrimSpace(f[1])
		if _, dup := c.values[[2]string{g, s}]; dup {
			return nil, fmt.Errorf("line %d: %s / %s given twice", n, g, s)
		}
		if !contains(c.groups, g) {
			c.groups = append(c.groups, g)
		}
		if !contains(c.series, s) {
			c.series = append(c.series, s)
		}
		c.values[[2]string{g, s}] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(c.values) == 0 {
		return nil, errors.New("no rows")
	}
	return c, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
