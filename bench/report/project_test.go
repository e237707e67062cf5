package report

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestProjectIssueExample(t *testing.T) {
	p, err := Project(80*time.Millisecond, 20*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Before != 100*time.Millisecond || p.After != 90*time.Millisecond {
		t.Errorf("step %v → %v, want 100ms → 90ms", p.Before, p.After)
	}
	if math.Abs(p.Speedup-100.0/90) > 1e-12 || p.Ceiling != 1.25 {
		t.Errorf("speedup %v ceiling %v, want 1.111 and 1.25", p.Speedup, p.Ceiling)
	}
	want := "step 100ms → 90ms: 1.11× faster (ceiling 1.25× with an infinitely fast transfer)"
	if p.String() != want {
		t.Errorf("String() = %q, want %q", p.String(), want)
	}
}

func TestProjectEdges(t *testing.T) {
	tests := []struct {
		name              string
		compute, transfer time.Duration
		factor            float64
		after             time.Duration
		speedup, ceiling  float64
		text              string
	}{
		{"no transfer", 80 * time.Millisecond, 0, 2, 80 * time.Millisecond, 1, 1,
			"step 80ms → 80ms: 1.00× faster (ceiling 1.00× with an infinitely fast transfer)"},
		{"slower transfer", 80 * time.Millisecond, 20 * time.Millisecond, 0.5, 120 * time.Millisecond, 100.0 / 120, 1.25,
			"step 100ms → 120ms: 0.83× (slower) (ceiling 1.25× with an infinitely fast transfer)"},
		{"no compute", 0, 20 * time.Millisecond, 4, 5 * time.Millisecond, 4, math.Inf(1),
			"step 20ms → 5ms: 4.00× faster (ceiling ∞ with an infinitely fast transfer)"},
		{"same speed", time.Second, time.Second, 1, 2 * time.Second, 1, 2,
			"step 2s → 2s: 1.00× faster (ceiling 2.00× with an infinitely fast transfer)"},
	}
	for _, tt := range tests {
		p, err := Project(tt.compute, tt.transfer, tt.factor)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if p.After != tt.after || math.Abs(p.Speedup-tt.speedup) > 1e-12 || p.Ceiling != tt.ceiling {
			t.Errorf("%s: %+v", tt.name, p)
		}
		if p.String() != tt.text {
			t.Errorf("%s: %q, want %q", tt.name, p.String(), tt.text)
		}
	}
}

func TestProjectRejects(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		compute, transfer time.Duration
		factor            float64
	}{
		{-ms, ms, 2}, {ms, -ms, 2}, {0, 0, 2}, {ms, ms, 0}, {ms, ms, -1},
		{ms, ms, math.NaN()}, {ms, ms, math.Inf(1)},
	} {
		if _, err := Project(tt.compute, tt.transfer, tt.factor); !errors.Is(err, ErrProjection) {
			t.Errorf("Project(%v, %v, %v) error %v, want ErrProjection", tt.compute, tt.transfer, tt.factor, err)
		}
	}
}

func TestFactor(t *testing.T) {
	rs := sampleResults(t)
	rdma, sock := []Result{rs[0], rs[2]}, []Result{rs[1], rs[3]}
	f, err := Factor(rdma, sock, 8, MetricP50)
	if err != nil || f != 15.5/3.1 {
		t.Errorf("p50 factor = %v, %v; want %v", f, err, 15.5/3.1)
	}
	f, err = Factor(rdma, sock, 64<<10, MetricBW)
	if err != nil || f != 1.25 {
		t.Errorf("bw factor = %v, %v; want 1.25", f, err)
	}
	if _, err := Factor(rdma, sock, 16, MetricP50); !errors.Is(err, ErrProjection) {
		t.Errorf("absent size: %v", err)
	}
	if _, err := Factor(rdma, sock, 8, MetricBW); !errors.Is(err, ErrProjection) {
		t.Errorf("bw of latency results: %v", err)
	}
	if _, err := Factor(rdma, rs[3:], 64<<10, MetricBW); err != nil {
		t.Errorf("socket list of one: %v", err)
	}
	zero := NewBandwidth("tcp-bw", "tcp", 64<<10, 0, time.Second)
	if _, err := Factor(rdma, []Result{zero}, 64<<10, MetricBW); !errors.Is(err, ErrProjection) {
		t.Errorf("zero bandwidth: %v", err)
	}
}
