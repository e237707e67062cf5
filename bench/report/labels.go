package report

import "math"

// box is a rectangle in pixels: top-left corner and size.
type box struct{ x, y, w, h float64 }

func (b box) overlaps(o box) bool {
	return b.x < o.x+o.w && o.x < b.x+b.w && b.y < o.y+o.h && o.y < b.y+b.h
}

func (b box) contains(p pt) bool {
	return p.X >= b.x && p.X <= b.x+b.w && p.Y >= b.y && p.Y <= b.y+b.h
}

func (b box) inside(o box) bool {
	return b.x >= o.x && b.y >= o.y && b.x+b.w <= o.x+o.w && b.y+b.h <= o.y+o.h
}

// endLabelWidth returns the room to keep right of the plot for the labels
// of series labelled at their last point.
func endLabelWidth(series []Series, cw float64) float64 {
	var w float64
	for _, s := range series {
		if s.LabelAt < 0 && s.Label != "" {
			w = max(w, cw*float64(len([]rune(s.Label)))+cw)
		}
	}
	return w
}

// placeLabels chooses where each series' label goes, greedily in series
// order: among candidate boxes near the series' points, nearest its label
// point first, the one crossing the fewest line pixels and no label placed
// before it. A series with no label or no points gets a zero box.
func placeLabels(series []Series, lines [][]pt, area box, cw, lh float64) []box {
	var samples []pt
	for _, l := range lines {
		samples = append(samples, sample(l, 2)...)
	}
	placed := make([]box, len(series))
	for i, s := range series {
		if s.Label == "" || len(lines[i]) == 0 {
			continue
		}
		w := cw * float64(len([]rune(s.Label)))
		best, bestScore := box{}, math.Inf(1)
		for _, b := range candidates(s, lines[i], w, lh, cw) {
			if sc := score(b, area, samples, placed); sc < bestScore {
				best, bestScore = b, sc
			}
		}
		placed[i] = best
	}
	return placed
}

// candidates returns label boxes around the series' points, in order of
// preference: around the label point first, then ever farther from it.
func candidates(s Series, pts []pt, w, h, gap float64) []box {
	at := s.LabelAt
	if at < 0 || at >= len(pts) {
		at = len(pts) - 1
	}
	var out []box
	if s.LabelAt < 0 { // at the end of the line, in the margin kept for it
		p := pts[at]
		for _, dy := range []float64{0, -1, 1, -2, 2, -3, 3} {
			out = append(out, box{p.X + gap, p.Y - h/2 + dy*h, w, h})
		}
	}
	for d := 0; d < len(pts); d++ {
		for _, i := range []int{at - d, at + d} {
			if i < 0 || i >= len(pts) || (d == 0 && i != at-d) {
				continue
			}
			p := pts[i]
			out = append(out,
				box{p.X - gap - w, p.Y - h - 2, w, h}, // above left
				box{p.X + gap, p.Y + 2, w, h},         // below right
				box{p.X + gap, p.Y - h - 2, w, h},     // above right
				box{p.X - gap - w, p.Y + 2, w, h},     // below left
			)
		}
	}
	return out
}

// score rates a label box: lower is better. Leaving the plot area or
// covering another label is all but forbidden; each line pixel covered
// costs one.
func score(b box, area box, samples []pt, placed []box) float64 {
	sc := 0.0
	if !b.inside(area) {
		sc += 1e6
	}
	for _, o := range placed {
		if o.w > 0 && b.overlaps(o) {
			sc += 1e4
		}
	}
	pad := box{b.x - 2, b.y - 2, b.w + 4, b.h + 4}
	for _, p := range samples {
		if pad.contains(p) {
			sc++
		}
	}
	return sc
}

// sample returns points every step pixels along the polyline.
func sample(line []pt, step float64) []pt {
	out := append([]pt(nil), line...)
	for i := 1; i < len(line); i++ {
		a, b := line[i-1], line[i]
		n := int(math.Hypot(b.X-a.X, b.Y-a.Y) / step)
		for k := 1; k < n; k++ {
			f := float64(k) / float64(n)
			out = append(out, pt{a.X + f*(b.X-a.X), a.Y + f*(b.Y-a.Y)})
		}
	}
	return out
}
