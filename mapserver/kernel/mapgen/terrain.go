package mapgen

// noiseOne is the fixed-point 1.0 of the noise functions: values are in [0, noiseOne).
const noiseOne = 1 << 16

// fade is the smoothstep 3t²-2t³ in 16.16 fixed point, for t in [0, noiseOne].
func fade(t int64) int64 {
	return t * t * (3*noiseOne - 2*t) >> 32
}

// valueNoise samples 2D value noise with the given wavelength (in the same unit as x
// and y, which must be >= 0) at (x, y). Lattice values come from hash2 and are blended
// with smoothstep weights, all in integer arithmetic. The result is in [0, noiseOne).
func valueNoise(seed, salt uint64, x, y, wave int64) int64 {
	ix, iy := x/wave, y/wave
	sx := fade((x - ix*wave) * noiseOne / wave)
	sy := fade((y - iy*wave) * noiseOne / wave)
	v00 := int64(hash2(seed, salt, ix, iy) >> 48)
	v10 := int64(hash2(seed, salt, ix+1, iy) >> 48)
	v01 := int64(hash2(seed, salt, ix, iy+1) >> 48)
	v11 := int64(hash2(seed, salt, ix+1, iy+1) >> 48)
	bottom := v00 + (v10-v00)*sx>>16
	top := v01 + (v11-v01)*sx>>16
	return bottom + (top-bottom)*sy>>16
}

// fractal sums octaves of value noise, each with half the wavelength and persistence
// permille of the previous amplitude, normalized back to [0, noiseOne).
type fractal struct {
	seed, salt uint64
	waves      []int64
	amps       []int64
	ampSum     int64
}

func newFractal(seed, salt uint64, wave int64, octaves, persistence int) fractal {
	f := fractal{seed: seed, salt: salt}
	amp := int64(noiseOne)
	for o := 0; o < octaves && wave >= 1; o++ {
		f.waves = append(f.waves, wave)
		f.amps = append(f.amps, amp)
		f.ampSum += amp
		wave /= 2
		amp = amp * int64(persistence) / 1000
	}
	return f
}

func (f *fractal) at(x, y int64) int64 {
	var sum int64
	for o, wave := range f.waves {
		if f.amps[o] == 0 {
			break
		}
		sum += valueNoise(f.seed, f.salt+uint64(o), x, y, wave) * f.amps[o]
	}
	return sum / f.ampSum
}

// contrast stretches a noise value around its middle by 3/2 and clamps it, because a
// sum of octaves clusters near the middle and would give flat, dull terrain.
func contrast(v int64) int64 {
	v = noiseOne/2 + (v-noiseOne/2)*3/2
	return min(max(v, 0), noiseOne-1)
}

// generateTerrain fills the heightfield from the terrain parameters.
func (g *generator) generateTerrain() {
	t := &g.cfg.Terrain
	cell := int64(t.CellSize) * 100
	cols := cellsAlong(g.cfg.Bounds.Width, t.CellSize)
	rows := cellsAlong(g.cfg.Bounds.Height, t.CellSize)
	maxCm := int64(t.MaxHeight) * 100
	f := newFractal(g.cfg.Seed, streamTerrain, int64(t.FeatureSize)*100, t.Octaves, t.Persistence)

	heights := make([]uint16, (cols+1)*(rows+1))
	i := 0
	for r := 0; r <= rows; r++ {
		y := int64(r) * cell
		for c := 0; c <= cols; c++ {
			v := contrast(f.at(int64(c)*cell, y))
			heights[i] = uint16(v * maxCm / (noiseOne - 1))
			i++
		}
	}
	g.w.Terrain = Heightfield{CellSize: int32(cell), Cols: cols, Rows: rows, Heights: heights}
}

// generateBiomes classifies every terrain cell and records its slope, the largest
// height difference between its corners in permille of the cell size.
func (g *generator) generateBiomes() {
	tf := &g.w.Terrain
	b := &g.cfg.Biome
	maxCm := int64(g.cfg.Terrain.MaxHeight) * 100
	water := maxCm * int64(g.cfg.Terrain.WaterLevel) / 1000
	beach := water + int64(b.BeachHeight)*100
	rock := maxCm * int64(b.RockLine) / 1000
	snow := maxCm * int64(b.SnowLine) / 1000
	cell := int64(tf.CellSize)
	moisture := newFractal(g.cfg.Seed, streamMoisture, int64(b.MoistureScale)*100, 2, 500)

	biomes := make([]Biome, tf.Cols*tf.Rows)
	slopes := make([]int32, tf.Cols*tf.Rows)
	stride := tf.Cols + 1
	for r := 0; r < tf.Rows; r++ {
		for c := 0; c < tf.Cols; c++ {
			i := r*stride + c
			h00, h10 := int64(tf.Heights[i]), int64(tf.Heights[i+1])
			h01, h11 := int64(tf.Heights[i+stride]), int64(tf.Heights[i+stride+1])
			lo := min(h00, h10, h01, h11)
			hi := max(h00, h10, h01, h11)
			slopes[r*tf.Cols+c] = int32(min((hi-lo)*1000/cell, 1<<30))

			h := (h00 + h10 + h01 + h11) / 4
			var kind Biome
			switch {
			case h < water:
				kind = BiomeWater
			case h < beach:
				kind = BiomeBeach
			case h >= snow:
				kind = BiomeSnow
			case h >= rock:
				kind = BiomeRock
			default:
				m := moisture.at(int64(c)*cell+cell/2, int64(r)*cell+cell/2)*1000/noiseOne + int64(b.MoistureBias)
				switch {
				case m < int64(b.DryBelow):
					kind = BiomeDesert
				case m > int64(b.WetAbove):
					kind = BiomeForest
				default:
					kind = BiomeGrassland
				}
			}
			biomes[r*tf.Cols+c] = kind
		}
	}
	g.w.Biomes = biomes
	g.slopes = slopes
}

// terrainCell returns the index of the terrain cell holding (x, y), clamped to the grid.
func (g *generator) terrainCell(x, y int64) int {
	tf := &g.w.Terrain
	_, c := splitCoord(x, int64(tf.CellSize), tf.Cols)
	_, r := splitCoord(y, int64(tf.CellSize), tf.Rows)
	return r*tf.Cols + c
}
