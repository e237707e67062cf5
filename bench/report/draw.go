package report

// maxMarkers is the most points a series may have for each to be marked
// with a dot; denser series (histogram CDFs) are lines only.
const maxMarkers = 32

// draw lays the plot out on c: frame, grid, ticks, title, series and their
// labels.
func (p *Plot) draw(c canvas) {
	w, h := p.size()
	cw, lh := c.charWidth(), c.lineHeight()
	var xs, ys []float64
	for _, s := range p.Series {
		for _, q := range s.Points {
			xs, ys = append(xs, q.X), append(ys, q.Y)
		}
	}
	xlo, xhi := axisRange(p.X.Scale, xs)
	ylo, yhi := axisRange(p.Y.Scale, ys)
	yt := ticks(p.Y.Scale, ylo, yhi, 0)
	left := 12 + cw*float64(maxLabel(yt))
	top, bottom := 2.8*lh, float64(h)-2.8*lh
	right := float64(w) - cw*2 - endLabelWidth(p.Series, cw)
	xt := ticks(p.X.Scale, xlo, xhi, int((right-left)/(cw*6))) // "128K" and a gap
	xsc := scaler{scale: p.X.Scale, lo: xlo, hi: xhi, p0: left, p1: right}
	ysc := scaler{scale: p.Y.Scale, lo: ylo, hi: yhi, p0: bottom, p1: top}
	drawGrid(c, xt, yt, xsc, ysc)
	c.polyline([]pt{{left, top}, {left, bottom}, {right, bottom}}, black, 1, false)
	c.text(float64(w)/2, lh, p.Title, black, anchorMiddle)
	c.text(left, top-lh, p.Y.Label, grey, anchorStart)
	c.text((left+right)/2, bottom+2*lh, p.X.Label, grey, anchorMiddle)
	lines := make([][]pt, len(p.Series))
	for i, s := range p.Series {
		lines[i] = toPixels(s.Points, xsc, ysc)
		c.polyline(lines[i], palette[i%len(palette)], 2, s.Dashed)
		if len(lines[i]) <= maxMarkers {
			for _, q := range lines[i] {
				c.marker(q, palette[i%len(palette)])
			}
		}
	}
	area := box{x: left, y: top, w: float64(w) - 2 - left, h: bottom - top}
	for i, l := range placeLabels(p.Series, lines, area, cw, lh) {
		if l.w > 0 {
			c.text(l.x, l.y+l.h/2, p.Series[i].Label, palette[i%len(palette)], anchorStart)
		}
	}
}

// drawGrid draws the grid lines and tick labels of both axes.
func drawGrid(c canvas, xt, yt []tick, xs, ys scaler) {
	top, bottom := ys.p1, ys.p0
	for _, t := range xt {
		x := xs.at(t.at)
		c.polyline([]pt{{x, top}, {x, bottom}}, grid, 1, false)
		if t.label != "" {
			c.text(x, bottom+c.lineHeight()*0.9, t.label, black, anchorMiddle)
		}
	}
	for _, t := range yt {
		y := ys.at(t.at)
		c.polyline([]pt{{xs.p0, y}, {xs.p1, y}}, grid, 1, false)
		if t.label != "" {
			c.text(xs.p0-6, y, t.label, black, anchorEnd)
		}
	}
}

func maxLabel(ts []tick) int {
	n := 1
	for _, t := range ts {
		n = max(n, len([]rune(t.label)))
	}
	return n
}

// toPixels maps data points to pixels, dropping those a log scale cannot
// show.
func toPixels(data []Point, xs, ys scaler) []pt {
	out := make([]pt, 0, len(data))
	for _, q := range data {
		x, okx := xs.pix(q.X)
		y, oky := ys.pix(q.Y)
		if okx && oky {
			out = append(out, pt{x, y})
		}
	}
	return out
}
