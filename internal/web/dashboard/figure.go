package dashboard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/tendrilai/tendril/internal/state"
)

// Figure is the state view's drawing: an inline SVG plant whose every
// attribute is computed from the state's six values and breaker level
// alone (never the clock, the actor or any text), so one state always
// draws one figure (the seed's "DRIFT" check compares two drawings).
type Figure struct {
	SVG string
	// Digest is the first 16 hex digits of sha256(SVG); StateDigest the
	// same of the inputs (values rounded to 3 decimals, and the level).
	Digest, StateDigest string
	// Reading says in words what each part shows and why.
	Reading []string
}

// levelColor is the frame colour per breaker level.
var levelColor = map[state.Level]string{state.Normal: "#3a7d44", state.Warning: "#c98a00", state.Critical: "#b3261e"}

// DrawFigure draws s. Mapping (each value v in [0,1], rounded to 3 decimals
// first so float noise cannot change the drawing):
//
//	frame colour     ← breaker level (NORMAL green, WARNING amber, CRITICAL red)
//	stem height      ← stability   (40 + 90·v px)
//	stem lean        ← vigilance   ((v − 0.5)·40 px at the top)
//	leaves           ← satisfaction (1 + round(4·v) leaves, 8 + 14·v px long)
//	leaf colour      ← trust       (olive #9aa86b at 0 → green #2e8b57 at 1)
//	tendril curl     ← attachment  (radius 6 + 18·v px)
//	bud radius       ← curiosity   (4 + 10·v px)
//	alert ring       ← vigilance > 0.6 (dashed ring, width 1 + 10·(v − 0.6))
func DrawFigure(s state.Snapshot) Figure {
	var v [state.NumDims]float64
	for i := range v {
		v[i] = math.Round(clamp01(s.Values[i])*1000) / 1000
	}
	trust, curiosity, vigilance, attachment, stability, satisfaction :=
		v[state.Trust], v[state.Curiosity], v[state.Vigilance], v[state.Attachment], v[state.Stability], v[state.Satisfaction]
	frame, ok := levelColor[s.Level]
	if !ok {
		frame = levelColor[state.Critical]
	}
	var b strings.Builder
	f := func(x float64) string { return fmt.Sprintf("%.1f", x) }
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 200" width="200" height="200" role="img" class="figure" aria-label="state figure">`)
	fmt.Fprintf(&b, `<rect x="2" y="2" width="196" height="196" rx="12" fill="#fbfaf5" stroke="%s" stroke-width="4"></rect>`, frame)
	// Pot.
	b.WriteString(`<path d="M70 172 L130 172 L122 196 L78 196 Z" fill="#a0522d"></path>`)
	// Stem: a quadratic curve from the pot to the top.
	h := 40 + 90*stability
	topX, topY := 100+(vigilance-0.5)*40, 172-h
	fmt.Fprintf(&b, `<path d="M100 172 Q100 %s %s %s" fill="none" stroke="#4b6b2a" stroke-width="4" stroke-linecap="round"></path>`, f(172-h/2), f(topX), f(topY))
	// Leaves along the stem, alternating sides.
	n := 1 + int(math.Round(4*satisfaction))
	size := 8 + 14*satisfaction
	leaf := mix("#9aa86b", "#2e8b57", trust)
	for i := 0; i < n; i++ {
		t := float64(i+1) / float64(n+1)
		// Point on the quadratic curve at t.
		px := (1-t)*(1-t)*100 + 2*(1-t)*t*100 + t*t*topX
		py := (1-t)*(1-t)*172 + 2*(1-t)*t*(172-h/2) + t*t*topY
		side := 1.0
		if i%2 == 1 {
			side = -1
		}
		fmt.Fprintf(&b, `<ellipse cx="%s" cy="%s" rx="%s" ry="%s" transform="rotate(%s %s %s)" fill="%s"></ellipse>`,
			f(px+side*size*0.7), f(py), f(size*0.7), f(size*0.3), f(side*-30), f(px+side*size*0.7), f(py), leaf)
	}
	// Tendril: a spiral arc from the top, its radius from attachment.
	r := 6 + 18*attachment
	fmt.Fprintf(&b, `<path d="M%s %s a%s %s 0 1 1 %s %s a%s %s 0 0 1 %s %s" fill="none" stroke="#4b6b2a" stroke-width="2"></path>`,
		f(topX), f(topY), f(r), f(r), f(r), f(r*0.6), f(r*0.5), f(r*0.5), f(-r*0.5), f(-r*0.3))
	// Bud.
	bud := 4 + 10*curiosity
	fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%s" fill="#e58fb1" stroke="#8e3b5d" stroke-width="1.5"></circle>`, f(topX), f(topY), f(bud))
	if vigilance > 0.6 {
		fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%s" fill="none" stroke="%s" stroke-width="%s" stroke-dasharray="4 3"></circle>`,
			f(topX), f(topY), f(bud+6), frame, f(1+10*(vigilance-0.6)))
	}
	fmt.Fprintf(&b, `<text x="12" y="22" font-size="12" font-family="sans-serif" fill="%s">%s</text>`, frame, s.Level.String())
	b.WriteString(`</svg>`)
	svg := b.String()
	in, _ := json.Marshal(struct {
		V     [state.NumDims]float64
		Level string
	}{v, s.Level.String()})
	return Figure{SVG: svg, Digest: digest(svg), StateDigest: digest(string(in)), Reading: []string{
		fmt.Sprintf("frame = %s ← breaker %s", frame, s.Level),
		fmt.Sprintf("stem height = %.1f ← stability %.3f", h, stability),
		fmt.Sprintf("stem lean = %+.1f ← vigilance %.3f", topX-100, vigilance),
		fmt.Sprintf("leaves = %d × %.1f ← satisfaction %.3f", n, size, satisfaction),
		fmt.Sprintf("leaf colour = %s ← trust %.3f", leaf, trust),
		fmt.Sprintf("tendril radius = %.1f ← attachment %.3f", r, attachment),
		fmt.Sprintf("bud radius = %.1f ← curiosity %.3f", bud, curiosity),
	}}
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

func clamp01(x float64) float64 {
	if math.IsNaN(x) || x < 0 {
		return 0
	}
	if x > 1 {
		return 1
	}
	return x
}

// mix blends two #rrggbb colours: t = 0 gives a, 1 gives b.
func mix(a, b string, t float64) string {
	var ar, ag, ab, br, bg, bb int
	fmt.Sscanf(a, "#%02x%02x%02x", &ar, &ag, &ab)
	fmt.Sscanf(b, "#%02x%02x%02x", &br, &bg, &bb)
	l := func(x, y int) int { return int(math.Round(float64(x) + (float64(y)-float64(x))*t)) }
	return fmt.Sprintf("#%02x%02x%02x", l(ar, br), l(ag, bg), l(ab, bb))
}

// Sparkline is a small inline SVG trend of one value.
type Sparkline struct {
	SVG string
}

// DrawSparkline draws value dim over the last 40 changes of history (after
// each change), with the baseline as a dashed line; 100×24 px.
func DrawSparkline(history []state.Change, dim state.Dim, baseline float64) Sparkline {
	if len(history) > 40 {
		history = history[len(history)-40:]
	}
	y := func(v float64) float64 { return 22 - 20*clamp01(v) }
	var b strings.Builder
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 24" width="100" height="24" class="spark" aria-hidden="true">`)
	fmt.Fprintf(&b, `<line x1="0" y1="%.1f" x2="100" y2="%.1f" stroke="#999" stroke-width="0.5" stroke-dasharray="2 2"></line>`, y(baseline), y(baseline))
	if len(history) > 0 {
		var pts []string
		step := 100.0
		if len(history) > 1 {
			step = 100.0 / float64(len(history)-1)
		}
		for i, c := range history {
			x := float64(i) * step
			if len(history) == 1 {
				x = 50
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y(c.Values[dim])))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#2e6b8b" stroke-width="1.5"></polyline>`, strings.Join(pts, " "))
	}
	b.WriteString(`</svg>`)
	return Sparkline{SVG: b.String()}
}

func jsonIndent(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
