// Package chartaxis holds the arithmetic of the project's SVG charts (the
// /speed page and docs/BENCHMARKS.md): round axis steps and coordinates.
package chartaxis

import "math"

// NiceStep returns a round step (1, 2, 2.5 or 5 × 10ⁿ) that divides span into
// about n intervals; 1 for an empty span.
func NiceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// Round1 rounds a coordinate to a tenth of a unit, which keeps the SVG short.
func Round1(v float64) float64 { return math.Round(v*10) / 10 }
