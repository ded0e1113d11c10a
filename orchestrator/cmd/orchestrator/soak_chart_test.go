package main

// The soak report's charts (see soak_sample_test.go): PNGs drawn with the standard
// library alone, so the report needs no plotting module.

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/raster"
)

// The chart's geometry: one panel a series, stacked.
const (
	chartWidth  = 800
	chartPanel  = 150
	chartMargin = 10
)

var (
	chartBack  = color.RGBA{255, 255, 255, 255}
	chartGrid  = color.RGBA{225, 225, 225, 255}
	chartLine  = color.RGBA{30, 90, 200, 255}
	chartFault = color.RGBA{220, 40, 40, 255}
)

// chartSeries is one panel: a name for the caption, a value a sample (-1 where it
// could not be read) and how to print its maximum.
type chartSeries struct {
	name   string
	values []int64
	unit   func(int64) string
}

// writeChart draws series over the run's samples (taken at at) into a PNG at path, one
// panel each from zero to the series' maximum, with grid lines at quarters and the
// faults (began at faults) as red vertical lines. It returns the caption naming the
// panels and their scales.
func writeChart(path string, at []time.Duration, dur time.Duration, faults []time.Duration, series []chartSeries) (string, error) {
	h := len(series)*(chartPanel+chartMargin) + chartMargin
	img := image.NewRGBA(image.Rect(0, 0, chartWidth, h))
	for y := range h {
		for x := range chartWidth {
			img.Set(x, y, chartBack)
		}
	}
	xOf := func(d time.Duration) int {
		return chartMargin + int(float64(chartWidth-2*chartMargin-1)*d.Seconds()/max(dur.Seconds(), 1))
	}
	var caption []string
	for i, s := range series {
		top := chartMargin + i*(chartPanel+chartMargin)
		bottom := top + chartPanel - 1
		peak := int64(1)
		for _, v := range s.values {
			peak = max(peak, v)
		}
		for q := range 5 {
			y := bottom - q*(chartPanel-1)/4
			for x := chartMargin; x < chartWidth-chartMargin; x++ {
				img.Set(x, y, chartGrid)
			}
		}
		for _, f := range faults {
			x := xOf(f)
			for y := top; y <= bottom; y++ {
				img.Set(x, y, chartFault)
			}
		}
		yOf := func(v int64) int { return bottom - int(float64(chartPanel-1)*float64(v)/float64(peak)) }
		px, py := -1, -1
		for j, v := range s.values {
			if v < 0 {
				px = -1
				continue
			}
			x, y := xOf(at[j]), yOf(v)
			if px >= 0 {
				raster.Line(px, py, x, y, func(lx, ly int) { img.Set(lx, ly, chartLine) })
			}
			img.Set(x, y, chartLine)
			px, py = x, y
		}
		caption = append(caption, fmt.Sprintf("%s 0–%s", s.name, s.unit(peak)))
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return "", err
	}
	return "top to bottom: " + strings.Join(caption, ", ") + "; red: the faults", f.Close()
}

// charts writes one chart a long-lived process (RSS, goroutines, open FDs) into dir and
// returns the report's section showing them.
func (s *soak) charts(dir string, ids []string) (string, error) {
	at := make([]time.Duration, len(s.samples))
	for i, smp := range s.samples {
		at[i] = smp.At
	}
	var faults []time.Duration
	for _, f := range s.faults {
		faults = append(faults, f.Began.Sub(s.start))
	}
	procs := []struct {
		name, file string
		get        func(soakSample) soakProc
	}{
		{"orchestrator", "orchestrator", func(smp soakSample) soakProc { return smp.Orch }},
		{"edge + players (test process)", "test-process", func(smp soakSample) soakProc { return smp.Test }},
	}
	for _, id := range ids {
		procs = append(procs, struct {
			name, file string
			get        func(soakSample) soakProc
		}{"map " + id, "map-" + id, func(smp soakSample) soakProc { return smp.Maps[id] }})
	}
	var b strings.Builder
	b.WriteString("\n## Charts\n\n")
	for _, p := range procs {
		var rss, gor, fds []int64
		for _, smp := range s.samples {
			v := p.get(smp)
			rss, gor, fds = append(rss, v.RSS), append(gor, v.Goroutines), append(fds, v.FDs)
		}
		file := "chart-" + p.file + ".png"
		caption, err := writeChart(filepath.Join(dir, file), at, s.dur, faults, []chartSeries{
			{"RSS", rss, mib}, {"goroutines", gor, count}, {"open FDs", fds, count}})
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s (%s):\n\n![%s](%s)\n\n", p.name, caption, p.name, file)
	}
	return b.String(), nil
}

// TestSoakChart_DrawsEveryPanel draws a chart of two series, a gap and a fault, and
// finds each panel's line and the fault's mark in it.
func TestSoakChart_DrawsEveryPanel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.png")
	at := []time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second}
	caption, err := writeChart(path, at, 30*time.Second, []time.Duration{15 * time.Second}, []chartSeries{
		{"RSS", []int64{10 << 20, 12 << 20, -1, 11 << 20}, mib}, {"goroutines", []int64{5, 50, 40, 45}, count}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "top to bottom: RSS 0–12.0 MiB, goroutines 0–50; red: the faults"; caption != want {
		t.Fatalf("caption %q, want %q", caption, want)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := img.Bounds().Dy(), 2*(chartPanel+chartMargin)+chartMargin; got != want {
		t.Fatalf("height %d, want %d", got, want)
	}
	for panel := range 2 {
		top := chartMargin + panel*(chartPanel+chartMargin)
		line, fault := 0, 0
		for y := top; y < top+chartPanel; y++ {
			for x := range chartWidth {
				switch img.At(x, y) {
				case color.Color(chartLine):
					line++
				case color.Color(chartFault):
					fault++
				}
			}
		}
		if line < 100 || fault < chartPanel/2 {
			t.Errorf("panel %d: %d pixels of line, %d of the fault's mark", panel, line, fault)
		}
	}
}
