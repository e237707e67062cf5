package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeSamples writes the sample results with w.
func writeSamples(t *testing.T, w interface{ Write(Result) error }) {
	t.Helper()
	for _, r := range sampleResults(t) {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestJSONGolden(t *testing.T) {
	var buf bytes.Buffer
	writeSamples(t, NewJSONWriter(&buf))
	golden(t, "results.jsonl", buf.Bytes())
}

// TestJSONSchema checks the fields the issue requires, by name, on the
// decoded objects rather than on Go types.
func TestJSONSchema(t *testing.T) {
	var buf bytes.Buffer
	writeSamples(t, NewJSONWriter(&buf))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want one per result", len(lines))
	}
	common := []string{"test", "transport", "size", "iters"}
	latKeys := []string{"min", "p50", "p90", "p99", "p999", "p9999", "max", "mean", "stdev"}
	cpuKeys := []string{"local_user_s", "local_sys_s", "remote_user_s", "remote_sys_s"}
	for i, line := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		requireKeys(t, obj, common...)
		lat, isLat := obj["latency_us"].(map[string]any)
		_, hasBW := obj["bandwidth_MBps"]
		if isLat == hasBW {
			t.Errorf("line %d: latency %v and bandwidth %v: want exactly one", i+1, isLat, hasBW)
		}
		if isLat {
			requireKeys(t, lat, latKeys...)
		} else {
			requireKeys(t, obj, "bandwidth_MBps", "bandwidth_Gbps", "msg_rate_Mps")
		}
		if cpu, ok := obj["cpu"].(map[string]any); ok {
			requireKeys(t, cpu, cpuKeys...)
		}
	}
}

func requireKeys(t *testing.T, obj map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := obj[k]; !ok {
			t.Errorf("missing %q in %v", k, obj)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	want := sampleResults(t)
	var buf bytes.Buffer
	jw := NewJSONWriter(&buf)
	for _, r := range want {
		if err := jw.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	buf.WriteString("\n  \n") // blank lines are skipped
	got, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip differs:\ngot  %+v\nwant %+v", got, want)
	}
}

func TestReadJSONErrors(t *testing.T) {
	_, err := ReadJSON(strings.NewReader(`{"test":"a"}` + "\n" + `{"test":`))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("ReadJSON of a truncated line: %v, want an error naming line 2", err)
	}
}

func TestJSONRejectsNaN(t *testing.T) {
	r := NewBandwidth("x", "y", 8, 1, time.Second)
	r.BandwidthMBps = math.NaN()
	if err := NewJSONWriter(&bytes.Buffer{}).Write(r); err == nil {
		t.Error("NaN written")
	}
}

func TestCSVGolden(t *testing.T) {
	var buf bytes.Buffer
	writeSamples(t, NewCSVWriter(&buf))
	golden(t, "results.csv", buf.Bytes())

	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rows[0], CSVHeader) {
		t.Errorf("header %v", rows[0])
	}
	if len(rows) != 5 {
		t.Errorf("%d rows, want a header and 4 results", len(rows))
	}
	for _, row := range rows[1:] {
		if len(row) != len(CSVHeader) {
			t.Errorf("row of %d cells, header of %d", len(row), len(CSVHeader))
		}
	}
}

// TestCSVHeaderMatchesJSON checks that every JSON field of the schema has
// a CSV column, so the two outputs carry the same figures.
func TestCSVHeaderMatchesJSON(t *testing.T) {
	for _, col := range []string{"test", "transport", "size", "iters", "bandwidth_MBps", "msg_rate_Mps",
		"local_user_s", "local_sys_s", "remote_user_s", "remote_sys_s", "lat_p50_us", "lat_p9999_us", "lat_stdev_us"} {
		if !slices.Contains(CSVHeader, col) {
			t.Errorf("CSV header lacks %q", col)
		}
	}
}

func TestFtoa(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1e6: "1000000", 0.1: "0.1", 1e-7: "1e-07", 1e21: "1e+21", -2.5: "-2.5"} {
		if got := ftoa(v); got != want {
			t.Errorf("ftoa(%v) = %q, want %q", v, got, want)
		}
	}
}
