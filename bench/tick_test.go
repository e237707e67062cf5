package bench

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A run delivers ticks during its trials: warm-up first, then the
// measurement with its elapsed time and a growing count of operations.
func TestTicksDuringTrial(t *testing.T) {
	var mu sync.Mutex
	var got []Tick
	cfg := Config{Transport: "loopback", Tests: []string{"write-bw"}, NoBaseline: true,
		Duration: 800 * time.Millisecond, Warmup: Warmup{Time: 300 * time.Millisecond}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Run(ctx, cfg, Options{Tick: func(tk Tick) {
		mu.Lock()
		got = append(got, tk)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var warm, measuring int
	var lastOps int64
	for _, tk := range got {
		if tk.Test != "write-bw" || tk.Transport != "loopback" || tk.Size != 64<<10 {
			t.Fatalf("tick for %+v", tk)
		}
		if !tk.Measuring {
			warm++
			if measuring > 0 {
				t.Errorf("a warm-up tick after the measurement began: %+v", tk)
			}
			continue
		}
		measuring++
		if tk.Ops < lastOps || tk.Planned != cfg.Duration {
			t.Errorf("tick %+v after %d ops", tk, lastOps)
		}
		lastOps = tk.Ops
	}
	if warm == 0 || measuring < 2 || lastOps == 0 {
		t.Errorf("%d warm-up and %d measuring ticks, %d ops counted", warm, measuring, lastOps)
	}
}
