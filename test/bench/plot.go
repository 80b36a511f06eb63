package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

var (
	colorFloor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorCCM   = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorAxis  = color.RGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff}
	colorGrid  = color.RGBA{R: 0xdd, G: 0xdd, B: 0xdd, A: 0xff}
)

// plot draws initialized Nodes over time for the floor and for talos-ccm into a PNG file.
func plot(path string, res *result) error {
	const (
		width, height = 900, 520
		left, right   = 70, 20
		top, bottom   = 40, 50
	)

	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)

	span := max(res.floor.wall, res.ccm.wall).Seconds() * 1.05
	if span <= 0 {
		span = 1
	}

	n := float64(res.nodes)
	plotW, plotH := float64(width-left-right), float64(height-top-bottom)

	toX := func(s float64) int { return left + int(s/span*plotW) }
	toY := func(count float64) int { return height - bottom - int(count/n*plotH) }

	for i := range 5 {
		y := toY(n * float64(i) / 4)
		line(img, left, y, width-right, y, colorGrid)
		text(img, 5, y+4, fmt.Sprintf("%6.0f", n*float64(i)/4), colorAxis)

		s := span * float64(i) / 4
		x := toX(s)
		line(img, x, top, x, height-bottom, colorGrid)
		text(img, x-15, height-bottom+18, fmt.Sprintf("%.1fs", s), colorAxis)
	}

	line(img, left, top, left, height-bottom, colorAxis)
	line(img, left, height-bottom, width-right, height-bottom, colorAxis)

	series := func(done []time.Duration, c color.Color) {
		px, py := toX(0), toY(0)

		for i, d := range done {
			x, y := toX(d.Seconds()), toY(float64(i+1))
			line(img, px, py, x, py, c)
			line(img, x, py, x, y, c)
			px, py = x, y
		}
	}

	series(res.floor.done, colorFloor)
	series(res.ccm.done, colorCCM)

	text(img, left, 20, fmt.Sprintf("initialized nodes over time, %s", res.name()), colorAxis)
	text(img, width-300, 20, "floor (bare client)", colorFloor)
	text(img, width-150, 20, "talos-ccm", colorCCM)
	text(img, width/2-30, height-10, "seconds", colorAxis)

	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("failed to create plot: %w", err)
	}

	if err = png.Encode(f, img); err != nil {
		f.Close() //nolint:errcheck

		return fmt.Errorf("failed to write plot: %w", err)
	}

	return f.Close()
}

// line draws a straight line of width 2.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	steps := max(abs(x1-x0), abs(y1-y0), 1)

	for i := 0; i <= steps; i++ {
		t := float64(i) / float64(steps)
		x := x0 + int(math.Round(t*float64(x1-x0)))
		y := y0 + int(math.Round(t*float64(y1-y0)))

		img.Set(x, y, c)
		img.Set(x+1, y, c)
		img.Set(x, y+1, c)
	}
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}

	return v
}
