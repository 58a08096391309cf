package kern

import (
	"fmt"
	"testing"
)

// BenchmarkFMAPeak measures one core's float32 FMA peak per variant.
func BenchmarkFMAPeak(b *testing.B) {
	for _, v := range Variants() {
		if !v.Usable() || v.FMAPeak == nil {
			continue
		}
		b.Run(fmt.Sprintf("variant=%s", v.Name), func(b *testing.B) {
			const iters = 1 << 16
			for b.Loop() {
				v.FMAPeak(iters)
			}
			b.ReportMetric(float64(v.PeakFLOPs)*iters*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
